#include "meshtrain/checkpoint/shard_file.h"

#include <cstring>

#include <fmt/format.h>

#include "meshtrain/checkpoint/safetensors.h"
#include "meshtrain/core/dtype.h"

namespace meshtrain::checkpoint {

std::string shard_file_name(int rank) { return fmt::format("rank_{:05d}.safetensors", rank); }

std::vector<std::string_view> ShardFile::parts() const {
  std::vector<std::string_view> out;
  if (!header.empty()) out.emplace_back(header);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

int64_t ShardFile::bytes() const {
  int64_t n = static_cast<int64_t>(header.size());
  for (std::string_view d : data) n += static_cast<int64_t>(d.size());
  return n;
}

template <class T>
ShardFile shard_file(ShardedState<T>& state, int rank) {
  ShardFile f;
  f.name = shard_file_name(rank);
  f.tensors = nlohmann::json::object();
  std::vector<StEntry> entries[2];  // F32, then BF16
  std::vector<std::string_view> sources[2];
  auto add = [&](const std::string& key, StDtype dt, const void* src, int64_t n) {
    const int k = dt == StDtype::f32 ? 0 : 1;
    entries[k].push_back({key, dt, {n}, 0, n * st_dtype_bytes(dt)});
    sources[k].emplace_back(static_cast<const char*>(src), static_cast<size_t>(n * st_dtype_bytes(dt)));
  };
  const StDtype wdt = std::is_same_v<T, float> ? StDtype::f32 : StDtype::bf16;
  for (const auto& sh : state.optimizer_shards()) {
    if (sh.write_length == 0) continue;
    const ParamSpec& s = *sh.spec;
    const int64_t k = sh.write_begin, n = sh.write_length;
    add(s.name + "/weight", wdt, sh.weights + k, n);
    if (sh.master) add(s.name + "/master", StDtype::f32, sh.master + k, n);
    add(s.name + "/exp_avg", StDtype::f32, sh.m + k, n);
    add(s.name + "/exp_avg_sq", StDtype::f32, sh.v + k, n);
    f.tensors[s.name] = {{"global_shape", {s.rows, s.cols}},
                         {"shard",
                          {{"global_offset", {s.row_offset, s.col_offset}},
                           {"local_shape", {s.local_rows, s.local_cols}},
                           {"flattened_range", {sh.begin + k, sh.begin + k + n}}}}};
  }
  std::vector<StEntry> all;
  int64_t at = 0;
  for (int k = 0; k < 2; ++k) {
    for (StEntry e : entries[k]) {
      e.end = at + (e.end - e.begin);
      e.begin = at;
      at = e.end;
      all.push_back(std::move(e));
    }
  }
  f.header = st_header_bytes(all, {{"format", "pt"}});
  for (int k = 0; k < 2; ++k) f.data.insert(f.data.end(), sources[k].begin(), sources[k].end());
  return f;
}

void snapshot(ShardFile& f, IoBuffer& keep) {
  const int64_t n = f.bytes();
  if (keep.capacity() < round_up(n, kIoAlign)) keep = IoBuffer(round_up(n, kIoAlign));
  char* dst = keep.data();
  for (std::string_view d : f.parts()) {
    std::memcpy(dst, d.data(), d.size());
    dst += d.size();
  }
  f.header.clear();
  f.data = {std::string_view(keep.data(), static_cast<size_t>(n))};
}

template ShardFile shard_file(ShardedState<float>&, int);
template ShardFile shard_file(ShardedState<bf16>&, int);

}  // namespace meshtrain::checkpoint
