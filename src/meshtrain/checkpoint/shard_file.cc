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

template <class T>
ShardFile snapshot_shards(ShardedState<T>& state, int rank) {
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
    if (!sh.writer) continue;
    const ParamSpec& s = *sh.spec;
    add(s.name + "/weight", wdt, sh.weights, sh.length);
    if (sh.master) add(s.name + "/master", StDtype::f32, sh.master, sh.length);
    add(s.name + "/exp_avg", StDtype::f32, sh.m, sh.length);
    add(s.name + "/exp_avg_sq", StDtype::f32, sh.v, sh.length);
    f.tensors[s.name] = {{"global_shape", {s.rows, s.cols}},
                         {"shard",
                          {{"global_offset", {s.row_offset, s.col_offset}},
                           {"local_shape", {s.local_rows, s.local_cols}},
                           {"flattened_range", {sh.begin, sh.begin + sh.length}}}}};
  }
  f.header = st_header_bytes(entries, {{"format", "pt"}});
  f.data.resize(static_cast<size_t>(at));
  char* dst = f.data.data();
  for (const auto& [src, bytes] : sources) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    dst += bytes;
  }
  return f;
}

template ShardFile snapshot_shards(ShardedState<float>&, int);
template ShardFile snapshot_shards(ShardedState<bf16>&, int);

}  // namespace meshtrain::checkpoint
