// Layout: what one rank holds. A pure function of (model, parallel config,
// the rank's tensor- and pipeline-parallel coordinates), written once and
// read by both the engine (which allocates and indexes from it) and the
// performance model (which counts bytes from it), so the two cannot drift.
//
// Parameters live in one flat buffer per rank, grouped into units: the word
// and the position embedding, each transformer block, the final LayerNorm,
// and the last stage's copy of the tied word embedding when pp > 1 (or the
// untied output matrix). The two word-embedding copies are units of equal
// shape, so their ZeRO shards line up for the embedding-group all-reduce of
// their gradients. A unit is what
// ZeRO shards, reduces and gathers as one piece: its segment is padded to a
// multiple of 16 x dp elements and data-parallel rank d owns the d-th
// 1/dp of it (dp: the ZeRO shard group, ParallelConfig::shard_size(), which
// is the whole DP group unless sharding is hybrid). Gradients use the same
// flat layout in fp32.
//
// Pipeline stages hold the layers parallel/stage_layers.h assigns them (an
// even split, Megatron-LM's first/last stage counts, or the embedding and
// the head counted as layers, Megatron-DeepSpeed's and Megatron-core's):
// chunk c of this stage is virtual stage c x pp + pp_rank and runs that
// virtual stage's chunk_layers(c) blocks, from first_layer(c) on. Chunks may
// differ in size, and a chunk may hold no block at all (only the embedding,
// or only the head).
//
// Tensor-parallel splits (Megatron): column-parallel weights (qkv, fc) split
// their rows (output features), row-parallel weights (proj, fc2) split their
// columns (input features); the word embedding splits its vocabulary rows.
// The qkv weight's rows are ordered (group, {R queries, k, v}, head_dim),
// R = heads / kv groups (for multi-head attention (head, {q,k,v}, head_dim)),
// so that a contiguous row block is a set of whole groups. With SwiGLU the
// gate (fc) and up (fc.up) weights are two tensors split by rows, stored
// adjacent, so each rank's slice is one [2 ffn/tp, h] matrix.
//
// Every parameter is initialised from a counter-based generator keyed by
// (seed, tensor stream, global element index), so any split of a tensor
// holds exactly the values of the serial run.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain {

enum class InitKind { normal, zeros, ones };

struct ParamSpec {
  std::string name;             // "layers.3.qkv.weight"
  int64_t rows = 0, cols = 1;   // full (unsplit) shape; cols == 1 for vectors
  int split = -1;               // tensor-parallel split: -1 replicated, 0 rows, 1 cols
  int64_t local_rows = 0, local_cols = 1;
  int64_t row_offset = 0, col_offset = 0;  // this rank's slice within the full tensor
  int64_t offset = 0;           // element offset of the slice in the rank's flat buffer
  InitKind init = InitKind::zeros;
  float init_std = 0.f;
  bool weight_decay = false;
  uint64_t stream = 0;          // same on every rank that holds part of this tensor
  // Replicated over TP but fed by a sequence shard under sequence
  // parallelism (LayerNorms, position embedding): its gradient is then a
  // partial sum that the TP group all-reduces.
  bool sequence_partial_grad = false;

  int64_t numel() const { return local_rows * local_cols; }
  bool tp_replicated() const { return split < 0; }
};

enum class UnitKind { embedding, block, head };

// The parameters a transformer block may hold, by index into Unit::slots.
// Which are present depends on the model (no biases with
// --disable-bias-linear, no norm biases with RMSNorm, the up projection only
// with SwiGLU, which stores it right after fc.weight / fc.bias so that the
// gate and up rows of this rank form one [2 ffn/tp, h] matrix, as
// Megatron's linear_fc1 does).
enum class BlockParam : uint8_t {
  ln1_weight, ln1_bias, qkv_weight, qkv_bias, proj_weight, proj_bias, ln2_weight, ln2_bias,
  fc_weight, fc_up_weight, fc_bias, fc_up_bias, fc2_weight, fc2_bias,
  count
};
// "qkv.weight": the suffix of the parameter's name.
const char* block_param_name(BlockParam b);

struct Unit {
  std::string name;  // "embedding.word", "layers.3", "head.lnf", "head.word"
  UnitKind kind = UnitKind::block;
  int layer = -1;  // global transformer layer for blocks, -1 otherwise
  int chunk = 0;   // model chunk (virtual stage index on this rank)
  std::vector<ParamSpec> params;
  int64_t offset = 0;        // element offset of the unit in the flat buffer
  int64_t numel = 0;         // sum of its parameters
  int64_t padded_numel = 0;  // numel rounded up to a multiple of 16 x dp
  // Blocks: index into params of each BlockParam, -1 where absent.
  std::array<int8_t, static_cast<size_t>(BlockParam::count)> slots{};
  int64_t shard_numel(int dp) const { return padded_numel / dp; }
  // A block's parameter; throws std::logic_error if this block has none.
  const ParamSpec& param(BlockParam b) const;
  // nullptr where the model has no such parameter.
  const ParamSpec* find_param(BlockParam b) const;
};

// Bytes of parameter-sized state on one rank, by memory category.
struct StateBytes {
  int64_t parameters = 0;  // working weights (bf16 or fp32); ZeRO-3: own shard only
  int64_t gradients = 0;   // fp32; ZeRO-2/3: own shard only
  int64_t optimizer = 0;   // Adam m and v (+ fp32 master weights in bf16 mode); ZeRO-1+: shard
};

class Layout {
 public:
  static Layout build(const ModelConfig& m, const ParallelConfig& p, int tp_rank, int pp_rank);

  const std::vector<Unit>& units() const { return units_; }
  // Setup and reporting only (a linear search): nullptr if absent.
  const Unit* find_unit(const std::string& name) const;
  // Position of u in units() (u must be one of them).
  size_t index(const Unit& u) const { return static_cast<size_t>(&u - units_.data()); }

  // Indexed accessors for the training path. Each throws std::logic_error
  // when this rank holds no such unit, so a caller cannot bind nothing.
  // The i-th block (0-based) of chunk c.
  const Unit& block(int chunk, int i) const;
  const Unit& word_embedding() const;  // first virtual stage only
  const Unit& final_norm() const;      // last virtual stage only
  // The matrix the head multiplies with: the untied output matrix, the last
  // stage's copy of the tied word embedding (pp > 1), or the word embedding
  // itself. Last virtual stage only.
  const Unit& output_weight() const;
  // The learned position table; nullptr when the model has none (or this
  // rank holds no first stage).
  const Unit* position_embedding() const { return position_ < 0 ? nullptr : &units_[position_]; }
  int64_t numel() const { return numel_; }              // padded flat size
  int64_t shard_numel() const { return numel_ / dp_; }  // this DP rank's share
  int64_t unpadded_numel() const;
  // Whether the output head multiplies with the word embedding (then, with
  // pp > 1, the first and the last stage each hold a copy whose gradients the
  // embedding group all-reduces) or with its own untied matrix.
  bool tied_embeddings() const { return tied_embeddings_; }

  // Virtual stage of chunk c on this rank, and the layers it runs.
  int virtual_stage(int chunk) const { return chunk * pp_ + pp_rank_; }
  int first_layer(int chunk) const { return first_layer_[static_cast<size_t>(chunk)]; }
  // Blocks (transformer layers) of chunk c on this rank; may be 0.
  int chunk_layers(int chunk) const { return chunk_layers_[static_cast<size_t>(chunk)]; }
  // Transformer layers of every pipeline stage (stage_layers.h), [pp].
  const std::vector<int>& stage_layers() const { return stage_layers_; }
  bool has_embedding(int chunk) const { return virtual_stage(chunk) == 0; }
  bool has_head(int chunk) const { return virtual_stage(chunk) == pp_ * vpp_ - 1; }

  // The closed form every allocation must match: bytes per parameter are
  // fp32: 4 (weights) + 4 (grads) + 8 (Adam m, v) = 16;
  // bf16: 2 (weights) + 4 (fp32 grads) + 4 (fp32 master) + 8 (m, v) = 18;
  // with ZeRO-1 the optimizer term, ZeRO-2 also the gradients, ZeRO-3 also
  // the weights count only this rank's 1/dp shard of each unit.
  StateBytes state_bytes(int zero_stage, bool bf16) const;

 private:
  const Unit& at(int index, const char* what) const;
  // build()'s parts: the layers of each chunk, then per chunk its units in
  // flat-buffer order (embedding, blocks, head), each appended padded.
  void place_chunks(const ModelConfig& m, const ParallelConfig& p, int pp_rank);
  void add_embedding(const ModelConfig& m, const ParallelConfig& p, int tp_rank, int chunk);
  void add_block(const ModelConfig& m, const ParallelConfig& p, int tp_rank, int chunk, int layer);
  void add_head(const ModelConfig& m, const ParallelConfig& p, int tp_rank, int chunk);
  int append(Unit u);  // its index
  std::vector<Unit> units_;
  std::vector<int> blocks_;  // [chunk_offset_[chunk] + i] -> units_ index
  std::vector<int> stage_layers_, first_layer_, chunk_layers_;  // [pp], [vpp], [vpp]
  std::vector<int> chunk_offset_;  // [vpp + 1]: the first block of each chunk in blocks_
  int word_ = -1, position_ = -1, final_norm_ = -1, output_ = -1;
  int64_t numel_ = 0;
  int dp_ = 1, pp_ = 1, vpp_ = 1, pp_rank_ = 0;
  bool tied_embeddings_ = true;
};

// Tensor stream ids: a pure function of the tensor's identity.
uint64_t param_stream(const std::string& name);

}  // namespace meshtrain
