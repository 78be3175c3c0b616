#include "meshtrain/checkpoint/shard_file.h"

#include <zlib.h>

#include <cstring>

#include <fmt/format.h>

#include "meshtrain/checkpoint/safetensors.h"
#include "meshtrain/core/dtype.h"

namespace meshtrain::checkpoint {

std::string shard_file_name(int rank) { return fmt::format("rank_{:05d}.safetensors", rank); }

uint32_t crc32_of(const char* data, int64_t n, uint32_t crc) {
  if (n == 0) return crc;  // zlib answers 0 for a null buffer
  return static_cast<uint32_t>(::crc32_z(crc, reinterpret_cast<const Bytef*>(data), static_cast<z_size_t>(n)));
}

int64_t ShardFile::bytes() const {
  int64_t n = static_cast<int64_t>(header.size());
  for (std::string_view d : data) n += static_cast<int64_t>(d.size());
  return n;
}

template <class T>
ShardFile shard_file(ShardedState<T>& state, int rank, bool copy) {
  ShardFile f;
  f.name = shard_file_name(rank);
  f.tensors = nlohmann::json::object();
  std::vector<StEntry> entries;
  int64_t at = 0;
  std::vector<std::pair<const void*, int64_t>> sources;
  auto add = [&](const std::string& key, StDtype dt, const void* src, int64_t n) {
    const int64_t bytes = n * st_dtype_bytes(dt);
    entries.push_back({key, dt, {n}, at, at + bytes});
    sources.emplace_back(src, bytes);
    at += bytes;
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
  f.header = st_header_bytes(entries, {{"format", "pt"}});
  if (copy) f.copy.resize(static_cast<size_t>(at));
  char* dst = f.copy.data();
  for (const auto& [src, bytes] : sources) {
    if (copy) {
      std::memcpy(dst, src, static_cast<size_t>(bytes));
      f.data.emplace_back(dst, static_cast<size_t>(bytes));
      dst += bytes;
    } else {
      f.data.emplace_back(static_cast<const char*>(src), static_cast<size_t>(bytes));
    }
  }
  return f;
}

template ShardFile shard_file(ShardedState<float>&, int, bool);
template ShardFile shard_file(ShardedState<bf16>&, int, bool);

}  // namespace meshtrain::checkpoint
