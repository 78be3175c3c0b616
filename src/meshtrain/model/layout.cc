#include "meshtrain/model/layout.h"

#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "meshtrain/core/error.h"
#include "meshtrain/parallel/stage_layers.h"

namespace meshtrain {

uint64_t param_stream(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

const Unit* Layout::find_unit(const std::string& name) const {
  for (const auto& u : units_)
    if (u.name == name) return &u;
  return nullptr;
}

const char* block_param_name(BlockParam b) {
  static constexpr const char* kNames[] = {"ln1.weight", "ln1.bias",     "qkv.weight", "qkv.bias",   "proj.weight",
                                           "proj.bias",  "ln2.weight",   "ln2.bias",   "fc.weight",  "fc.up.weight",
                                           "fc.bias",    "fc.up.bias",   "fc2.weight", "fc2.bias"};
  static_assert(std::size(kNames) == static_cast<size_t>(BlockParam::count));
  return kNames[static_cast<size_t>(b)];
}

const ParamSpec* Unit::find_param(BlockParam b) const {
  const int i = slots[static_cast<size_t>(b)];
  return kind == UnitKind::block && i >= 0 ? &params[static_cast<size_t>(i)] : nullptr;
}

const ParamSpec& Unit::param(BlockParam b) const {
  if (const ParamSpec* s = find_param(b)) return *s;
  throw std::logic_error(fmt::format("internal error: unit {} has no parameter {}", name, block_param_name(b)));
}

const Unit& Layout::at(int index, const char* what) const {
  if (index < 0) throw std::logic_error(fmt::format("internal error: this rank holds no {}", what));
  return units_[static_cast<size_t>(index)];
}

const Unit& Layout::block(int chunk, int i) const {
  if (chunk < 0 || chunk >= vpp_ || i < 0 || i >= chunk_layers(chunk))
    throw std::logic_error(fmt::format("internal error: no block {} in chunk {} (vpp {}, {} blocks in the chunk)", i,
                                       chunk, vpp_, chunk < 0 || chunk >= vpp_ ? 0 : chunk_layers(chunk)));
  return units_[static_cast<size_t>(blocks_[static_cast<size_t>(chunk_offset_[static_cast<size_t>(chunk)] + i)])];
}

const Unit& Layout::word_embedding() const { return at(word_, "word embedding"); }
const Unit& Layout::final_norm() const { return at(final_norm_, "final norm"); }
const Unit& Layout::output_weight() const { return at(output_, "output weight"); }

namespace {

// Appends a parameter: `split` says which dimension tensor parallelism cuts.
struct UnitBuilder {
  Unit& u;
  int tp, tp_rank;
  void add(std::string name, int64_t rows, int64_t cols, int split, InitKind init, float std, bool decay,
           std::string stream_name = "") {
    ParamSpec s;
    s.stream = param_stream(stream_name.empty() ? name : stream_name);
    s.name = std::move(name);
    s.rows = rows;
    s.cols = cols;
    s.split = split;
    s.local_rows = split == 0 ? rows / tp : rows;
    s.local_cols = split == 1 ? cols / tp : cols;
    s.row_offset = split == 0 ? tp_rank * s.local_rows : 0;
    s.col_offset = split == 1 ? tp_rank * s.local_cols : 0;
    s.init = init;
    s.init_std = std;
    s.weight_decay = decay;
    s.offset = u.numel;  // relative to the unit for now
    u.numel += s.numel();
    u.params.push_back(std::move(s));
  }
  // A replicated tensor applied to sequence shards under sequence parallelism
  // (a LayerNorm's weight and bias, the position table).
  void add_sequence_replicated(std::string name, int64_t rows, int64_t cols, InitKind init, float std, bool decay) {
    add(std::move(name), rows, cols, -1, init, std, decay);
    u.params.back().sequence_partial_grad = true;
  }
};

}  // namespace

namespace {

constexpr float kInitStd = 0.02f;
// GPT-2 / Megatron: output projections scaled by 1/sqrt(2 * layers).
float output_init_std(const ModelConfig& m) { return kInitStd / std::sqrt(2.0f * m.num_layers); }

Unit new_unit(std::string name, UnitKind kind, int layer, int chunk) {
  Unit u;
  u.name = std::move(name);
  u.kind = kind;
  u.layer = layer;
  u.chunk = chunk;
  u.slots.fill(-1);
  return u;
}

}  // namespace

Layout Layout::build(const ModelConfig& m, const ParallelConfig& p, int tp_rank, int pp_rank) {
  Layout L;
  L.place_chunks(m, p, pp_rank);
  L.tied_embeddings_ = m.tied_embeddings;
  for (int c = 0; c < p.vpp; ++c) {
    if (L.has_embedding(c)) L.add_embedding(m, p, tp_rank, c);
    for (int l = L.first_layer(c); l < L.first_layer(c) + L.chunk_layers(c); ++l) L.add_block(m, p, tp_rank, c, l);
    if (L.has_head(c)) L.add_head(m, p, tp_rank, c);
  }
  return L;
}

void Layout::place_chunks(const ModelConfig& m, const ParallelConfig& p, int pp_rank) {
  dp_ = p.shard_size();
  pp_ = p.pp;
  vpp_ = p.vpp;
  pp_rank_ = pp_rank;
  const std::vector<int> virtual_layers = virtual_stage_layers(m.num_layers, p);
  stage_layers_ = meshtrain::stage_layers(m.num_layers, p);
  chunk_offset_.push_back(0);
  for (int c = 0; c < p.vpp; ++c) {
    chunk_layers_.push_back(virtual_layers[static_cast<size_t>(virtual_stage(c))]);
    first_layer_.push_back(virtual_stage_first_layer(virtual_layers, virtual_stage(c)));
    chunk_offset_.push_back(chunk_offset_.back() + chunk_layers_.back());
  }
}

// Appends u at the end of the flat buffer, padded to 16 x dp elements.
int Layout::append(Unit u) {
  const int64_t align = 16 * static_cast<int64_t>(dp_);
  u.padded_numel = (u.numel + align - 1) / align * align;
  u.offset = numel_;
  for (auto& s : u.params) s.offset += u.offset;
  numel_ += u.padded_numel;
  units_.push_back(std::move(u));
  return static_cast<int>(units_.size()) - 1;
}

void Layout::add_embedding(const ModelConfig& m, const ParallelConfig& p, int tp_rank, int c) {
  const int64_t h = m.hidden_size;
  Unit u = new_unit("embedding.word", UnitKind::embedding, -1, c);
  UnitBuilder{u, p.tp, tp_rank}.add("embedding.word", m.padded_vocab(), h, 0, InitKind::normal, kInitStd, true);
  word_ = append(std::move(u));
  if (m.learned_positions) {
    Unit q = new_unit("embedding.position", UnitKind::embedding, -1, c);
    UnitBuilder{q, p.tp, tp_rank}.add_sequence_replicated("embedding.position", m.max_positions(), h,
                                                          InitKind::normal, kInitStd, true);
    position_ = append(std::move(q));
  }
}

// One transformer block: its parameters in the engine's order, each slot
// recorded for Unit::param().
void Layout::add_block(const ModelConfig& m, const ParallelConfig& p, int tp_rank, int c, int l) {
  const int64_t h = m.hidden_size, f = m.ffn();
  // qkv rows: per key/value group its query heads, its key and its value,
  // hd rows each (Megatron's layout), so a TP slice is whole groups.
  const int64_t qkv = (int64_t{m.num_attention_heads} + 2 * m.kv_heads()) * m.head_dim();
  const float std = kInitStd, out_std = output_init_std(m);
  const std::string n = "layers." + std::to_string(l);
  Unit u = new_unit(n, UnitKind::block, l, c);
  UnitBuilder b{u, p.tp, tp_rank};
  auto add = [&](BlockParam which, int64_t rows, int64_t cols, int split, InitKind init, float sd, bool decay) {
    u.slots[static_cast<size_t>(which)] = static_cast<int8_t>(u.params.size());
    b.add(n + "." + block_param_name(which), rows, cols, split, init, sd, decay);
  };
  // Norm weights and biases: replicated, fed by sequence shards.
  auto norm = [&](BlockParam which, InitKind init) {
    u.slots[static_cast<size_t>(which)] = static_cast<int8_t>(u.params.size());
    b.add_sequence_replicated(n + "." + block_param_name(which), h, 1, init, 0, false);
  };
  // Llama blocks: RMSNorm has no bias, --disable-bias-linear drops the
  // matmul biases, SwiGLU adds the up projection after the gate (fc).
  const bool bias = m.bias_linear, ln_bias = !m.rmsnorm;
  norm(BlockParam::ln1_weight, InitKind::ones);
  if (ln_bias) norm(BlockParam::ln1_bias, InitKind::zeros);
  add(BlockParam::qkv_weight, qkv, h, 0, InitKind::normal, std, true);
  if (bias) add(BlockParam::qkv_bias, qkv, 1, 0, InitKind::zeros, 0, false);
  add(BlockParam::proj_weight, h, h, 1, InitKind::normal, out_std, true);
  if (bias) add(BlockParam::proj_bias, h, 1, -1, InitKind::zeros, 0, false);
  norm(BlockParam::ln2_weight, InitKind::ones);
  if (ln_bias) norm(BlockParam::ln2_bias, InitKind::zeros);
  add(BlockParam::fc_weight, f, h, 0, InitKind::normal, std, true);
  if (m.gated_mlp) add(BlockParam::fc_up_weight, f, h, 0, InitKind::normal, std, true);
  if (bias) add(BlockParam::fc_bias, f, 1, 0, InitKind::zeros, 0, false);
  if (bias && m.gated_mlp) add(BlockParam::fc_up_bias, f, 1, 0, InitKind::zeros, 0, false);
  add(BlockParam::fc2_weight, h, f, 1, InitKind::normal, out_std, true);
  if (bias) add(BlockParam::fc2_bias, h, 1, -1, InitKind::zeros, 0, false);
  // The engine multiplies with [gate | up] of this rank as one matrix.
  if (m.gated_mlp) {
    MT_ASSERT(u.param(BlockParam::fc_up_weight).offset ==
              u.param(BlockParam::fc_weight).offset + u.param(BlockParam::fc_weight).numel());
    if (bias)
      MT_ASSERT(u.param(BlockParam::fc_up_bias).offset ==
                u.param(BlockParam::fc_bias).offset + u.param(BlockParam::fc_bias).numel());
  }
  blocks_.push_back(append(std::move(u)));
}

// The final norm, then the output matrix: its own (untied), the last
// stage's copy of the tied word embedding, or with one stage and tied
// weights the word embedding itself.
void Layout::add_head(const ModelConfig& m, const ParallelConfig& p, int tp_rank, int c) {
  const int64_t h = m.hidden_size, v = m.padded_vocab();
  Unit u = new_unit("head.lnf", UnitKind::head, -1, c);
  UnitBuilder b{u, p.tp, tp_rank};
  b.add_sequence_replicated("head.lnf.weight", h, 1, InitKind::ones, 0, false);
  if (!m.rmsnorm) b.add_sequence_replicated("head.lnf.bias", h, 1, InitKind::zeros, 0, false);
  final_norm_ = append(std::move(u));
  if (!m.tied_embeddings) {
    Unit o = new_unit("head.output", UnitKind::head, -1, c);
    UnitBuilder{o, p.tp, tp_rank}.add("head.output", v, h, 0, InitKind::normal, kInitStd, true);
    output_ = append(std::move(o));
  } else if (p.pp > 1) {
    Unit w = new_unit("head.word", UnitKind::head, -1, c);
    UnitBuilder{w, p.tp, tp_rank}.add("head.word", v, h, 0, InitKind::normal, kInitStd, true, "embedding.word");
    output_ = append(std::move(w));
  } else {
    output_ = word_;
  }
}

int64_t Layout::unpadded_numel() const {
  int64_t n = 0;
  for (const auto& u : units_) n += u.numel;
  return n;
}

StateBytes Layout::state_bytes(int zero_stage, bool bf16) const {
  const int64_t full = numel_, shard = numel_ / dp_;
  StateBytes b;
  b.parameters = (zero_stage >= 3 ? shard : full) * (bf16 ? 2 : 4);
  b.gradients = (zero_stage >= 2 ? shard : full) * 4;
  b.optimizer = (zero_stage >= 1 ? shard : full) * (bf16 ? 12 : 8);
  return b;
}

}  // namespace meshtrain
