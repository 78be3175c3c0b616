#include "meshtrain/model/layout.h"

#include <cmath>

#include "meshtrain/core/error.h"

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

const ParamSpec& Unit::param(const std::string& suffix) const {
  for (const auto& p : params)
    if (p.name.size() >= suffix.size() && p.name.compare(p.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return p;
  throw std::logic_error("no parameter '" + suffix + "' in unit");
}

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

Layout Layout::build(const ModelConfig& m, const ParallelConfig& p, int tp_rank, int pp_rank) {
  MT_ASSERT(m.num_layers % (p.pp * p.vpp) == 0);
  Layout L;
  L.dp_ = p.dp;
  L.pp_ = p.pp;
  L.vpp_ = p.vpp;
  L.pp_rank_ = pp_rank;
  L.layers_per_chunk_ = m.num_layers / (p.pp * p.vpp);
  L.tied_embeddings_ = m.tied_embeddings;
  const int64_t h = m.hidden_size, f = m.ffn(), v = m.padded_vocab();
  const float std = 0.02f;
  // GPT-2 / Megatron: output projections scaled by 1/sqrt(2 * layers).
  const float out_std = 0.02f / std::sqrt(2.0f * m.num_layers);

  auto finish = [&](Unit u) {
    const int64_t align = 16 * static_cast<int64_t>(p.dp);
    u.padded_numel = (u.numel + align - 1) / align * align;
    u.offset = L.numel_;
    for (auto& s : u.params) s.offset += u.offset;
    L.numel_ += u.padded_numel;
    L.units_.push_back(std::move(u));
  };

  for (int c = 0; c < p.vpp; ++c) {
    auto unit = [&](std::string name, UnitKind kind, int layer) { return Unit{std::move(name), kind, layer, c, {}, 0, 0, 0}; };
    if (L.has_embedding(c)) {
      Unit u = unit("embedding.word", UnitKind::embedding, -1);
      UnitBuilder{u, p.tp, tp_rank}.add("embedding.word", v, h, 0, InitKind::normal, std, true);
      finish(std::move(u));
      if (m.learned_positions) {
        Unit q = unit("embedding.position", UnitKind::embedding, -1);
        UnitBuilder{q, p.tp, tp_rank}.add_sequence_replicated("embedding.position", m.max_positions(), h,
                                                              InitKind::normal, std, true);
        finish(std::move(q));
      }
    }
    for (int l = L.first_layer(c); l < L.first_layer(c) + L.layers_per_chunk_; ++l) {
      const std::string n = "layers." + std::to_string(l) + ".";
      Unit u = unit(n.substr(0, n.size() - 1), UnitKind::block, l);
      UnitBuilder b{u, p.tp, tp_rank};
      b.add_sequence_replicated(n + "ln1.weight", h, 1, InitKind::ones, 0, false);
      b.add_sequence_replicated(n + "ln1.bias", h, 1, InitKind::zeros, 0, false);
      b.add(n + "qkv.weight", 3 * h, h, 0, InitKind::normal, std, true);
      b.add(n + "qkv.bias", 3 * h, 1, 0, InitKind::zeros, 0, false);
      b.add(n + "proj.weight", h, h, 1, InitKind::normal, out_std, true);
      b.add(n + "proj.bias", h, 1, -1, InitKind::zeros, 0, false);
      b.add_sequence_replicated(n + "ln2.weight", h, 1, InitKind::ones, 0, false);
      b.add_sequence_replicated(n + "ln2.bias", h, 1, InitKind::zeros, 0, false);
      b.add(n + "fc.weight", f, h, 0, InitKind::normal, std, true);
      b.add(n + "fc.bias", f, 1, 0, InitKind::zeros, 0, false);
      b.add(n + "fc2.weight", h, f, 1, InitKind::normal, out_std, true);
      b.add(n + "fc2.bias", h, 1, -1, InitKind::zeros, 0, false);
      finish(std::move(u));
    }
    if (L.has_head(c)) {
      Unit u = unit("head.lnf", UnitKind::head, -1);
      UnitBuilder b{u, p.tp, tp_rank};
      b.add_sequence_replicated("head.lnf.weight", h, 1, InitKind::ones, 0, false);
      b.add_sequence_replicated("head.lnf.bias", h, 1, InitKind::zeros, 0, false);
      finish(std::move(u));
      if (!m.tied_embeddings) {
        Unit o = unit("head.output", UnitKind::head, -1);
        UnitBuilder{o, p.tp, tp_rank}.add("head.output", v, h, 0, InitKind::normal, std, true);
        finish(std::move(o));
      } else if (p.pp > 1) {  // the last stage's copy of the tied word embedding
        Unit w = unit("head.word", UnitKind::head, -1);
        UnitBuilder{w, p.tp, tp_rank}.add("head.word", v, h, 0, InitKind::normal, std, true, "embedding.word");
        finish(std::move(w));
      }
    }
  }
  return L;
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
