#include "meshtrain/parallel/pipeline_engine.h"

#include <cstring>

#include "meshtrain/core/dtype.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/clock.h"

namespace meshtrain {

template <class T>
struct PipelineEngine<T>::ChunkStash {
  Buffer mem;                       // every block's stash, a chunk of the head alone its input, then the head's
  std::vector<BlockActs<T>> acts;   // per block of the chunk
  T* input = nullptr;               // where the chunk's input is received (none on virtual stage 0)
  T* head_dinput = nullptr;
  Buffer out;                       // forward output, until sent
  Buffer grad;                      // received output gradient
  T* dx = nullptr;                  // the gradient flowing backward
};

template <class T>
PipelineEngine<T>::PipelineEngine(const ModelConfig& m, const ParallelConfig& p, ProcessMesh& mesh, uint64_t seed,
                                  bool prefetch)
    : m_(m),
      p_(p),
      mesh_(mesh),
      layout_(Layout::build(m, p, mesh.coord().tp, mesh.coord().pp)),
      schedule_(make_schedule(p.schedule, p.pp, p.vpp, p.num_micro_batches())) {
  state_ = std::make_unique<ShardedState<T>>(layout_, p_, mesh_, seed);
  prefetch_ = prefetch;
  for (int c = 0; c < p.vpp; ++c) {
    std::vector<const Unit*>& order = gather_order_.emplace_back();
    if (layout_.has_embedding(c)) {
      order.push_back(&layout_.word_embedding());
      if (const Unit* pu = layout_.position_embedding()) order.push_back(pu);
    }
    first_block_.push_back(order.size());
    for (int i = 0; i < layout_.chunk_layers(c); ++i) order.push_back(&layout_.block(c, i));
    if (layout_.has_head(c)) {
      order.push_back(&layout_.final_norm());
      order.push_back(&layout_.output_weight());
    }
  }
  tp_ = TpContext{&mesh.tp_group(), p.sequence_parallel && p.tp > 1};
  bd_ = block_dims(m, p);
  const int vl = static_cast<int>(m.padded_vocab() / p.tp);
  ed_ = EmbeddingDims{p.micro_batch_size, m.seq_length, m.hidden_size, vl, mesh.coord().tp * vl, p.tp, tp_.sequence_parallel};
  hd_ = HeadDims{p.micro_batch_size, m.seq_length,        m.hidden_size,        vl, mesh.coord().tp * vl,
                 m.vocab_size,       p.tp,                tp_.sequence_parallel,
                 static_cast<int>(head_logits_rows(m, p)), m.rmsnorm,
                 static_cast<float>(m.norm_epsilon)};
  bool has_head = false;
  for (int c = 0; c < p.vpp; ++c) has_head |= layout_.has_head(c);
  const auto ws = rank_working_set(m, p, has_head);
  work_ = Buffer(MemCategory::activations, allocated_bytes(ws));
  work_map_ = TensorMap(ws, work_.data());
  block_tensors_ = block_stash(m, p, false);
  // row.out and gathered exist with sequence parallelism only.
  scratch_ = BlockScratch<T>{static_cast<T*>(work_map_.find(Act::row_out)), static_cast<T*>(work_map_.find(Act::gathered)),
                             work_map_.get<T>(Act::d_ln_out), work_map_.get<T>(Act::d_wide),
                             work_map_.get<T>(Act::d_attn_out), static_cast<T*>(work_map_.find(Act::d_act_out))};
  MT_ASSERT(!bd_.swiglu || scratch_.d_act != nullptr);
  discard_ = work_map_.get<T>(Act::discard);
  if (has_head) {
    float* stats = work_map_.get<float>(Act::lnf_stats);
    head_scratch_ = HeadScratch<T>{work_map_.get<T>(Act::logits), work_map_.get<float>(Act::row_stats),
                                   work_map_.get<T>(Act::lnf_out), stats, stats + bd_.Ns(),
                                   work_map_.get<T>(Act::d_lnf_out)};
  }
}

template <class T>
PipelineEngine<T>::~PipelineEngine() = default;

template <class T>
typename PipelineEngine<T>::ChunkStash& PipelineEngine<T>::stash(int mb, int c) {
  auto& slot = stashes_[mb * p_.vpp + c];
  if (slot) return *slot;
  slot = std::make_unique<ChunkStash>();
  const int L = layout_.chunk_layers(c);
  std::vector<std::vector<TensorSpec>> specs;
  int64_t bytes = 0;
  for (int i = 0; i < L; ++i) {
    specs.push_back(block_stash(m_, p_, block_is_recomputed(p_, i, L)));
    bytes += allocated_bytes(specs.back());
  }
  // A chunk of the head alone stashes its received input (what a recomputed
  // block stashes: the input only) for the head's forward.
  const bool head_only = L == 0 && layout_.has_head(c) && !layout_.has_embedding(c);
  const auto input_only = block_stash(m_, p_, true);
  if (head_only) bytes += allocated_bytes(input_only);
  const auto hs = head_stash(m_, p_);
  if (layout_.has_head(c)) bytes += allocated_bytes(hs);
  slot->mem = Buffer(MemCategory::activations, bytes, /*zero=*/false);
  char* base = slot->mem.template as<char>();
  for (int i = 0; i < L; ++i) {
    BlockActs<T> a;
    bind_acts(a, work_map_);  // recomputed pieces live in the working set
    bind_acts(a, TensorMap(specs[i], base));
    require_bound(a, block_tensors_);
    slot->acts.push_back(a);
    base += allocated_bytes(specs[i]);
  }
  if (L > 0) slot->input = slot->acts[0].input;
  if (head_only) {
    slot->input = TensorMap(input_only, base).template get<T>(Act::input);
    base += allocated_bytes(input_only);
  }
  if (layout_.has_head(c)) slot->head_dinput = reinterpret_cast<T*>(base);
  return *slot;
}

template <class T>
int PipelineEngine<T>::peer_rank(int c, bool next) const {
  const int s = mesh_.coord().pp;
  return next ? (s + 1) % p_.pp : (s + p_.pp - 1) % p_.pp;
}

template <class T>
int PipelineEngine<T>::tag(int mb, int c, bool grad) const {
  // MPI guarantees tags up to 32767 only (MPI_TAG_UB may be no larger), and
  // (mb * vpp + c) * 2 passes it from 16384 / vpp micro-batches on. Wrapping
  // is safe: equal tags from one sender match in the order sent (MPI's
  // non-overtaking rule), and each side handles one chunk's messages of one
  // direction in increasing micro-batch order; messages of different chunks
  // whose tags collide are ~16384 / vpp micro-batches apart, far more than
  // the interleaved schedule keeps in flight.
  return ((mb * p_.vpp + c) * 2 + (grad ? 1 : 0)) % 32768;
}

template <class T>
void PipelineEngine<T>::complete_sends(bool all) {
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (all) it->req.wait();
    if (all || it->req.test())
      it = sends_.erase(it);
    else
      ++it;
  }
}

template <class T>
void PipelineEngine<T>::gather_ahead(int c, size_t k, bool backward) {
  const std::vector<const Unit*>& order = gather_order_[c];
  ShardedState<T>& S = *state_;
  S.gather(*order[k]);
  if (!prefetch_) return;
  if (!backward && k + 1 < order.size()) S.prefetch(*order[k + 1]);
  if (backward && k > first_block_[c]) S.prefetch(*order[k - 1]);
}

// The caller has gathered the head's units.
template <class T>
void PipelineEngine<T>::head_forward(ChunkStash& cs, const T* x, int mb, const StepBatch& batch, bool train,
                                     StepStats& st) {
  ShardedState<T>& S = *state_;
  const int64_t N = bd_.N();
  const Unit& lu = layout_.final_norm();
  const Unit& wu = layout_.output_weight();
  HeadGrads g;
  if (train) {
    S.begin_backward(lu);
    S.begin_backward(wu);
    // The final norm's weight, then its bias (LayerNorm only).
    g = HeadGrads{S.grads(lu), m_.rmsnorm ? nullptr : S.grads(lu) + m_.hidden_size, S.grads(wu)};
  }
  const T* lw = S.weights(lu);
  const double loss = head_forward_backward(train ? cs.head_dinput : nullptr, g, x, lw,
                                            m_.rmsnorm ? nullptr : lw + m_.hidden_size, S.weights(wu),
                                            batch.targets + mb * N, dloss_, head_scratch_, hd_, tp_);
  if (train) {
    S.end_backward(lu, ++backward_count_[layout_.index(lu)] == expected_[layout_.index(lu)]);
    S.end_backward(wu, ++backward_count_[layout_.index(wu)] == expected_[layout_.index(wu)]);
  }
  S.release(lu);
  S.release(wu);
  if (mesh_.coord().tp == 0) {
    st.loss_sum += loss;
    st.loss_tokens += N;
  }
  cs.dx = cs.head_dinput;
}

template <class T>
void PipelineEngine<T>::forward(int mb, int c, const StepBatch& batch, bool train, StepStats& st) {
  const double t0 = now_s();
  ChunkStash& cs = stash(mb, c);
  const int64_t N = bd_.N(), Ns = bd_.Ns(), h = bd_.h;
  const int L = layout_.chunk_layers(c);
  ShardedState<T>& S = *state_;
  const bool head = layout_.has_head(c);
  if (!head) cs.out = Buffer(MemCategory::comm_buffers, Ns * h * sizeof(T), /*zero=*/false);
  const size_t b = first_block_[c];
  if (layout_.has_embedding(c)) {
    const Unit& wu = layout_.word_embedding();
    const Unit* pu = layout_.position_embedding();
    for (size_t k = 0; k < b; ++k) gather_ahead(c, k, false);
    // A chunk of the embedding alone sends its output on.
    embedding_forward(L > 0 ? cs.acts[0].input : cs.out.template as<T>(), scratch_.row_out, batch.tokens + mb * N,
                      S.weights(wu), pu ? S.weights(*pu) : nullptr, ed_, tp_);
    S.release(wu);
    if (pu) S.release(*pu);
  }
  for (int i = 0; i < L; ++i) {
    const Unit& u = layout_.block(c, i);
    T* out = i + 1 < L ? cs.acts[i + 1].input : head ? discard_ : cs.out.template as<T>();
    gather_ahead(c, b + size_t(i), false);
    block_forward(block_weights(u, S.weights(u)), cs.acts[i], out, scratch_, bd_, tp_);
    S.release(u);
  }
  // The head's input: the last block's output, or what a chunk of the head
  // alone received.
  if (head) {
    for (size_t k = b + size_t(L); k < gather_order_[c].size(); ++k) gather_ahead(c, k, false);
    head_forward(cs, L > 0 ? discard_ : cs.input, mb, batch, train, st);
  }
  const double dt = now_s() - t0;
  st.compute_s += dt;
  st.forward_s += dt;
}

template <class T>
void PipelineEngine<T>::backward(int mb, int c, const StepBatch& batch, StepStats& st) {
  const double t0 = now_s();
  ChunkStash& cs = stash(mb, c);
  ShardedState<T>& S = *state_;
  const int L = layout_.chunk_layers(c);
  MT_ASSERT(cs.dx != nullptr);
  auto done = [&](const Unit& u) {
    const size_t i = layout_.index(u);
    S.end_backward(u, ++backward_count_[i] == expected_[i]);
  };
  for (int i = L - 1; i >= 0; --i) {
    const Unit& u = layout_.block(c, i);
    gather_ahead(c, first_block_[c] + size_t(i), true);
    S.begin_backward(u);
    const BlockWeights<T> w = block_weights(u, S.weights(u));
    const BlockActs<T>& a = cs.acts[i];
    if (block_is_recomputed(p_, i, L))
      block_forward(w, a, discard_, scratch_, bd_, tp_);
    else if (p_.recompute == Recompute::selective)
      block_recompute_attention(a, bd_);
    block_backward(w, block_grads(u, S.grads(u)), a, cs.dx, scratch_, bd_, tp_);
    done(u);
    S.release(u);
  }
  if (layout_.has_embedding(c)) {
    const Unit& wu = layout_.word_embedding();
    const Unit* pu = layout_.position_embedding();
    S.begin_backward(wu);
    if (pu) S.begin_backward(*pu);
    embedding_backward(S.grads(wu), pu ? S.grads(*pu) : nullptr, scratch_.gathered, cs.dx,
                       batch.tokens + mb * bd_.N(), ed_, tp_);
    done(wu);
    if (pu) done(*pu);
  }
  const double dt = now_s() - t0;
  st.compute_s += dt;
  st.backward_s += dt;
}

// Per-step bookkeeping: the stashes, and how many backward contributions
// each unit's gradient waits for before its data-parallel reduction posts.
template <class T>
void PipelineEngine<T>::begin_step(float dloss) {
  dloss_ = dloss;
  stashes_.clear();
  stashes_.resize(static_cast<size_t>(p_.num_micro_batches()) * p_.vpp);
  const size_t nu = layout_.units().size();
  backward_count_.assign(nu, 0);
  expected_.assign(nu, p_.num_micro_batches());
  // Serial-like layouts (one pipeline stage, tied embeddings): the head and
  // the embedding both add to the one word-embedding unit. A first stage
  // without the head must not wait for a head contribution that never comes
  // (it would never post its data-parallel reduction).
  bool has_embedding = false, has_head = false;
  for (int c = 0; c < p_.vpp; ++c) {
    has_embedding |= layout_.has_embedding(c);
    has_head |= layout_.has_head(c);
  }
  if (has_embedding && has_head && &layout_.output_weight() == &layout_.word_embedding())
    expected_[layout_.index(layout_.word_embedding())] *= 2;
}

// recv_forward: the previous virtual stage's output into the stash's input.
template <class T>
void PipelineEngine<T>::recv_forward(const Action& a, StepStats& st) {
  ChunkStash& cs = stash(a.micro_batch, a.chunk);
  MT_ASSERT(cs.input != nullptr);
  const double t0 = now_s();
  mesh_.pp_group().recv(cs.input, boundary_count(), peer_rank(a.chunk, false), tag(a.micro_batch, a.chunk, false));
  st.idle_s += now_s() - t0;
}

// send_forward: the chunk's output to the next virtual stage (non-blocking;
// the buffer travels with the request).
template <class T>
void PipelineEngine<T>::send_forward(const Action& a, bool train) {
  ChunkStash& cs = stash(a.micro_batch, a.chunk);
  const int next_chunk = mesh_.coord().pp == p_.pp - 1 ? a.chunk + 1 : a.chunk;
  Request r = mesh_.pp_group().isend(cs.out.template as<T>(), boundary_count(), peer_rank(a.chunk, true),
                                     tag(a.micro_batch, next_chunk, false));
  sends_.push_back(Send{std::move(r), std::move(cs.out)});
  if (!train) stashes_[a.micro_batch * p_.vpp + a.chunk].reset();
  complete_sends(false);
}

// recv_backward: the next virtual stage's input gradient, into a buffer of
// its own (cs.grad, read by backward as cs.dx).
template <class T>
void PipelineEngine<T>::recv_backward(const Action& a, StepStats& st) {
  ChunkStash& cs = stash(a.micro_batch, a.chunk);
  cs.grad = Buffer(MemCategory::comm_buffers, boundary_count() * sizeof(T), /*zero=*/false);
  cs.dx = cs.grad.template as<T>();
  const double t0 = now_s();
  mesh_.pp_group().recv(cs.dx, boundary_count(), peer_rank(a.chunk, true), tag(a.micro_batch, a.chunk, true));
  st.idle_s += now_s() - t0;
}

// send_backward: the chunk's input gradient to the previous virtual stage.
template <class T>
void PipelineEngine<T>::send_backward(const Action& a) {
  auto& slot = stashes_[a.micro_batch * p_.vpp + a.chunk];
  const int prev_chunk = mesh_.coord().pp == 0 ? a.chunk - 1 : a.chunk;
  const int64_t count = boundary_count();
  // The gradient lives in the received buffer, or in the stash (head): the
  // stash is freed now, not when the send completes, so the head's gradient
  // is sent from a copy.
  Buffer buf = std::move(slot->grad);
  if (buf.empty()) {
    buf = Buffer(MemCategory::comm_buffers, count * sizeof(T), /*zero=*/false);
    std::memcpy(buf.data(), slot->dx, count * sizeof(T));
  }
  Request r = mesh_.pp_group().isend(buf.template as<T>(), count, peer_rank(a.chunk, false),
                                     tag(a.micro_batch, prev_chunk, true));
  sends_.push_back(Send{std::move(r), std::move(buf)});
  slot.reset();
  complete_sends(false);
}

// One action of this stage's list.
template <class T>
void PipelineEngine<T>::execute(const Action& a, const StepBatch& batch, bool train, StepStats& st) {
  switch (a.kind) {
    case ActionKind::recv_forward:
      recv_forward(a, st);
      break;
    case ActionKind::forward:
      forward(a.micro_batch, a.chunk, batch, train, st);
      if (!train && layout_.has_head(a.chunk)) stashes_[a.micro_batch * p_.vpp + a.chunk].reset();
      break;
    case ActionKind::send_forward:
      send_forward(a, train);
      break;
    case ActionKind::recv_backward:
      recv_backward(a, st);
      break;
    case ActionKind::backward:
      backward(a.micro_batch, a.chunk, batch, st);
      if (layout_.has_embedding(a.chunk)) stashes_[a.micro_batch * p_.vpp + a.chunk].reset();
      break;
    case ActionKind::send_backward:
      send_backward(a);
      break;
  }
}

template <class T>
void PipelineEngine<T>::run(const StepBatch& batch, bool train, float dloss, StepStats& st) {
  MT_ASSERT(batch.num_micro_batches == p_.num_micro_batches());
  begin_step(dloss);
  const auto& actions = schedule_.stages[mesh_.coord().pp];
  st.actions.reserve(actions.size());
  for (const Action& a : actions) {
    const bool bwd_action = a.kind == ActionKind::recv_backward || a.kind == ActionKind::backward ||
                            a.kind == ActionKind::send_backward;
    if (!train && bwd_action) continue;
    const double a0 = now_s();
    execute(a, batch, train, st);
    st.actions.push_back(ActionTime{a, a0, now_s()});
  }
  complete_sends(true);
  stashes_.clear();
  if (train) state_->finish_reductions();
}

template <class T>
StepStats PipelineEngine<T>::train_step(const StepBatch& batch, float dloss) {
  StepStats st;
  run(batch, true, dloss, st);
  return st;
}

template <class T>
StepStats PipelineEngine<T>::eval_step(const StepBatch& batch) {
  StepStats st;
  run(batch, false, 0.0f, st);
  return st;
}

template class PipelineEngine<float>;
template class PipelineEngine<bf16>;

}  // namespace meshtrain
