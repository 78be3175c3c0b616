// One rank's shard of a checkpoint as bytes in host memory: the snapshot a
// save writes (synchronously, or from a background thread), and the
// ShardedTensor records of what it holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/parallel/sharded_state.h"

namespace meshtrain::checkpoint {

struct ShardFile {
  std::string name;          // "rank_00003.safetensors"
  std::string header;        // length + JSON header (safetensors.h)
  std::vector<char> data;    // the tensors, in header order
  nlohmann::json tensors;    // tensor -> {global_shape, shard: {global_offset, local_shape, flattened_range}}
};

std::string shard_file_name(int rank);

// Copies the ranges this rank writes (OptimizerShard::writer) out of `state`.
template <class T>
ShardFile snapshot_shards(ShardedState<T>& state, int rank);

// CRC-32 (zlib) of a byte string, continuing from `crc`.
uint32_t crc32_of(const char* data, int64_t n, uint32_t crc = 0);

}  // namespace meshtrain::checkpoint
