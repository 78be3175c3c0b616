// One rank's shard of a checkpoint: its bytes (views of the training state
// for a synchronous save, which writes before training continues; a copy in
// host memory, the snapshot, for an asynchronous one) and the
// ShardedTensor records of what it holds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/parallel/sharded_state.h"

namespace meshtrain::checkpoint {

struct ShardFile {
  std::string name;          // "rank_00003.safetensors"
  std::string header;        // length + JSON header (safetensors.h)
  std::vector<std::string_view> data;  // the tensors, in header order
  std::vector<char> copy;    // what `data` views when copied
  int64_t bytes() const;     // header and data
  nlohmann::json tensors;    // tensor -> {global_shape, shard: {global_offset, local_shape, flattened_range}}
};

std::string shard_file_name(int rank);

// The ranges this rank writes (OptimizerShard::write_begin/length) of
// `state`: views of it, or (`copy`) a snapshot.
template <class T>
ShardFile shard_file(ShardedState<T>& state, int rank, bool copy);

// CRC-32 (zlib) of a byte string, continuing from `crc`.
uint32_t crc32_of(const char* data, int64_t n, uint32_t crc = 0);

}  // namespace meshtrain::checkpoint
