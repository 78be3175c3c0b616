// One rank's shard of a checkpoint: its safetensors header, its bytes (views
// of the training state for a synchronous save, which writes before training
// continues; one contiguous copy in host memory, the snapshot, for an
// asynchronous one) and the ShardedTensor records of what it holds.
//
// The F32 entries come first and the BF16 ones after them, so that every
// entry starts at a multiple of its element size in the file (the header is
// padded to 8 bytes): a reader may split any entry at a block boundary.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/checkpoint/shard_io.h"
#include "meshtrain/parallel/sharded_state.h"

namespace meshtrain::checkpoint {

struct ShardFile {
  std::string name;                    // "rank_00003.safetensors"
  std::string header;                  // length + JSON header (safetensors.h); empty once snapshotted
  std::vector<std::string_view> data;  // the tensors, in header order; once snapshotted, the whole file
  std::vector<std::string_view> parts() const;  // the file's bytes: header, then data
  int64_t bytes() const;                        // header and data
  nlohmann::json tensors;  // tensor -> {global_shape, shard: {global_offset, local_shape, flattened_range}}
};

std::string shard_file_name(int rank);

// The ranges this rank writes (OptimizerShard::write_begin/length) of
// `state`, as views of it.
template <class T>
ShardFile shard_file(ShardedState<T>& state, int rank);

// Copies the whole file (header and data) into `keep`, reallocated only
// when too small (capacity: the file rounded up to kIoAlign), and makes
// `f.data` one view of it (the header moved in), as write_shard_file()
// writes in place.
void snapshot(ShardFile& f, IoBuffer& keep);

}  // namespace meshtrain::checkpoint
