// Distributed checkpoints (docs/CHECKPOINTS.md).
//
// Every rank writes its own shard file in parallel, in the safetensors
// layout (safetensors.h): for each parameter range it is the one writer of
// (ShardedState::OptimizerShard), "<tensor>/weight" (bf16 or fp32, the
// working weights), "<tensor>/master" (fp32, bf16 runs only),
// "<tensor>/exp_avg" and "<tensor>/exp_avg_sq" (fp32 Adam moments), each a
// flat range of the rank's slice of the tensor. Rank 0 writes
// metadata.json: format and version, the writer's commit, iteration,
// consumed samples, skipped steps, the RNG state (the counter-based
// generator's seed: initial values and data order are functions of the seed
// and the iteration), the model and parallel configuration, the dtypes, each
// tensor's global shape and shards as Megatron's ShardedTensor describes
// them (file, global_offset, local_shape, flattened_range), and every file's
// size, CRC-32 and CRC-32 per 1 MiB block. The folder is staged and
// committed as checkpoint_dir.h says; files are written and read at the
// disk's bandwidth as shard_io.h says.
//
// Loading reshards: each rank reads, for each parameter of its own layout,
// only the byte ranges of the saved shards that hold rows of its slice
// (whole rows of the saved slice: a column split reads the rest of the row),
// checks the blocks it read against their CRCs, and scatters them by global
// element index, so a checkpoint loads under any TP, PP, DP, ZeRO stage,
// world size or precision. Weights are restored as the working dtype of the
// fp32 master (bf16(master) is what training keeps), so a same-layout
// resume continues bit-identically.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/comm/process_mesh.h"
#include "meshtrain/checkpoint/shard_io.h"
#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/sharded_state.h"

namespace meshtrain {

// Version 2: per-block CRC-32s of each file (version 1 had whole-file ones
// only, which forced every byte to be read before a load).
inline constexpr int kCheckpointFormatVersion = 2;

struct CheckpointMeta {
  int iteration = 0;            // completed optimizer steps
  int64_t consumed_samples = 0;
  int skipped_steps = 0;        // non-finite steps skipped (Adam's step count is iteration - skipped)
  uint64_t seed = 0;
  std::string path;             // the folder (on load)
  int64_t bytes_read = 0;       // by this rank (on load)
};

// One save as the training rank saw it (bytes and times: the slowest rank).
struct SaveRecord {
  int iteration = 0;
  std::string path;
  int64_t bytes = 0;        // all shard files and the metadata (0 until committed)
  double wait_s = 0;        // waiting for the previous asynchronous save to finish (counted in that one's stall)
  double snapshot_s = 0;    // copying this rank's shard to host memory (--async-save only)
  double write_s = 0;       // writing, checksumming and syncing the shard files
  double commit_s = 0;      // metadata, rename, latest, pruning
  double stall_s = 0;       // the time training waited for this save (asynchronous: snapshot, agreements, joins)
  bool async = false;
  nlohmann::json to_json() const;
  std::string summary() const;  // one line for the console
};

// Writes checkpoints into one folder. Collective: every rank calls save(),
// advance() and wait() together.
class CheckpointWriter {
 public:
  CheckpointWriter(std::string dir, int keep_last, bool async);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Synchronous: writes straight from the state and commits before
  // returning. Asynchronous: waits for the previous save if it is still
  // being written (the only case in which a save waits for disk), copies
  // the rank's shard into a host buffer kept between saves (the snapshot),
  // starts writing it in a background thread and returns; advance() then
  // commits it (the step calls it once every rank has written, and rank 0
  // commits in the background too), or the next save() or wait() does. On any rank's failure (disk full, ...) every rank throws the
  // same AgreedError, the staged folder is removed and `latest` keeps naming
  // the previous checkpoint. `die_before_commit` (fault injection): this
  // rank kills itself after writing its shard.
  // Asynchronous saves: allocates the snapshot buffer for this rank's
  // shard of `state` and faults its pages in, so that the first save costs
  // what the others do (synchronous: nothing).
  template <class T>
  void prepare(ShardedState<T>& state, int rank);

  template <class T>
  SaveRecord save(const CheckpointMeta& meta, const nlohmann::json& run, ShardedState<T>& state, ProcessMesh& mesh,
                  bool die_before_commit);

  // This rank's part of the pending save, for the training step's
  // agreement: its background write, then (rank 0) the background commit.
  enum class WriteState { none, writing, written, failed };
  WriteState write_state() const;
  // Collective, when no rank's state is `writing`: moves the pending save
  // one phase on: from written shards to the commit (started on rank 0),
  // from the commit to done, when it returns the save's record (else one
  // with iteration -1). Throws AgreedError when a rank failed.
  SaveRecord advance(ProcessMesh& mesh);
  // Collective: finishes the pending save, waiting for its writes and
  // commit; returns its record, or one with iteration -1 when none was
  // pending. Throws AgreedError when a rank failed.
  SaveRecord wait(ProcessMesh& mesh);
  // Every save so far; an asynchronous one gains its write and commit
  // figures when committed.
  const std::vector<SaveRecord>& records() const { return records_; }

  struct Pending;  // a save between snapshot and commit (checkpoint_save.cc)

 private:
  void publish(ProcessMesh& mesh);
  SaveRecord finalize(ProcessMesh& mesh);
  std::string dir_;
  int keep_last_;
  bool async_;
  checkpoint::IoBuffer snapshot_;  // the asynchronous saves' copy of the shard, allocated once
  std::unique_ptr<Pending> pending_;
  std::vector<SaveRecord> records_;
};

// Collective over `world`, before any large allocation: resolves `dir`
// (checkpoint_dir.h), reads the metadata, checks its format version, that
// its tensors and shapes are this model's and cover every element, the seed,
// that every shard file exists with its recorded size and block checksums,
// and (each file on one rank) its header. Throws AgreedError("bad
// checkpoint DIR: ...") on every rank. The data's checksums are checked as
// load_checkpoint reads it: a mismatch is the same error, raised after the
// model is allocated but before anything is written.
void verify_checkpoint(const std::string& dir, const ModelConfig& m, uint64_t seed, Communicator& world);

// Collective: loads the verified checkpoint into `state` (any layout).
template <class T>
CheckpointMeta load_checkpoint(const std::string& dir, const ModelConfig& m, ShardedState<T>& state, ProcessMesh& mesh);

}  // namespace meshtrain
