#include "meshtrain/parallel/sharded_state.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "meshtrain/core/dtype.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/rng.h"
#include "meshtrain/kernels/adamw.h"
#include "meshtrain/kernels/tensor_ops.h"

namespace meshtrain {

template <class T>
float ShardedState<T>::init_value(const ParamSpec& s, int64_t i, uint64_t seed) {
  switch (s.init) {
    case InitKind::zeros: return 0.0f;
    case InitKind::ones: return 1.0f;
    case InitKind::normal: break;
  }
  const int64_t gi = s.row_offset + i / s.local_cols, gj = s.col_offset + i % s.local_cols;
  return s.init_std * normal01(seed, s.stream, static_cast<uint64_t>(gi * s.cols + gj));
}

template <class T>
ShardedState<T>::ShardedState(const Layout& layout, const ParallelConfig& p, ProcessMesh& mesh, uint64_t seed)
    : layout_(layout), p_(p), mesh_(mesh), seed_(seed), dp_rank_(mesh.zero_shard_rank()), shards_(p.shard_size()) {
  check(mesh.shape().shard_size() == shards_, "ZeRO shard group: the process mesh has {} ranks, the layout {}",
        mesh.shape().shard_size(), shards_);
  const int64_t N = layout.numel(), S = N / shards_;
  const int z = p.zero_stage;
  const int64_t opt_size = z >= 1 ? S : N;
  weights_ = Buffer(MemCategory::parameters, (z >= 3 ? S : N) * sizeof(T));
  grads_ = Buffer(MemCategory::gradients, (z >= 2 ? S : N) * sizeof(float));
  if constexpr (!std::is_same_v<T, float>) master_ = Buffer(MemCategory::optimizer, opt_size * sizeof(float));
  m_ = Buffer(MemCategory::optimizer, opt_size * sizeof(float));
  v_ = Buffer(MemCategory::optimizer, opt_size * sizeof(float));
  const auto& units = layout.units();
  unit_gather_.resize(units.size());
  unit_gathering_.resize(units.size());
  unit_grads_.resize(units.size());
  const bool tp0 = mesh.coord().tp == 0;
  for (const Unit& u : units) {
    opt_offset_.push_back(z >= 1 ? u.offset / shards_ : u.offset);
    shard_offset_.push_back(u.offset / shards_);
    const int64_t a = update_begin(u), b = a + update_size(u);
    const bool tied_copy = u.name == "head.word";
    for (const ParamSpec& s : u.params) {
      const int64_t lo = std::max(a, s.offset), hi = std::min(b, s.offset + s.numel());
      if (lo >= hi) continue;
      segments_.push_back({opt_offset_.back() + (lo - a), hi - lo, lo, s.weight_decay,
                           !tied_copy && (!s.tp_replicated() || tp0), &s,
                           static_cast<int>(&u - units.data())});
    }
  }
  init_weights();
}

template <class T>
int64_t ShardedState<T>::update_begin(const Unit& u) const {
  return p_.zero_stage >= 1 ? u.offset + dp_rank_ * u.shard_numel(shards_) : u.offset;
}
template <class T>
int64_t ShardedState<T>::update_size(const Unit& u) const {
  return p_.zero_stage >= 1 ? u.shard_numel(shards_) : u.padded_numel;
}
static size_t unit_index(const Layout& l, const Unit& u) { return static_cast<size_t>(&u - l.units().data()); }

template <class T>
float* ShardedState<T>::reduced_grads(const Unit& u) const {
  if (p_.zero_stage >= 2) return grads_.template as<float>() + u.offset / shards_;
  return grads_.template as<float>() + u.offset;  // stage 1: in-place reduce-scatter leaves the shard in front
}
template <class T>
T* ShardedState<T>::update_weights(const Unit& u) const {
  if (p_.zero_stage >= 3) return weights_.template as<T>() + u.offset / shards_;
  return weights_.template as<T>() + update_begin(u);
}

template <class T>
void ShardedState<T>::init_weights() {
  const bool stage3 = p_.zero_stage >= 3;
  for (const Unit& u : layout_.units()) {
    // The flat range this rank holds weights for, and where it lives.
    const int64_t a = stage3 ? update_begin(u) : u.offset;
    const int64_t b = a + (stage3 ? update_size(u) : u.padded_numel);
    T* dst = stage3 ? update_weights(u) : weights_.template as<T>() + u.offset;
    for (const ParamSpec& s : u.params) {
      const int64_t lo = std::max(a, s.offset), hi = std::min(b, s.offset + s.numel());
      for (int64_t f = lo; f < hi; ++f) dst[f - a] = from_f32<T>(init_value(s, f - s.offset, seed_));
    }
  }
  if constexpr (!std::is_same_v<T, float>) {  // fp32 master from the same generator
    for (const Segment& g : segments_) {
      for (const Unit& u : layout_.units()) {
        if (g.flat_offset < u.offset || g.flat_offset >= u.offset + u.padded_numel) continue;
        for (const ParamSpec& s : u.params) {
          if (g.flat_offset < s.offset || g.flat_offset >= s.offset + s.numel()) continue;
          for (int64_t k = 0; k < g.length; ++k)
            master_.template as<float>()[g.opt_offset + k] = init_value(s, g.flat_offset + k - s.offset, seed_);
        }
      }
    }
  }
}

template <class T>
const T* ShardedState<T>::weights(const Unit& u) const {
  if (p_.zero_stage < 3) return weights_.template as<T>() + u.offset;
  const Buffer& g = unit_gather_[unit_index(layout_, u)];
  MT_ASSERT(!g.empty());
  return g.template as<T>();
}

template <class T>
void ShardedState<T>::gather(const Unit& u) {
  if (p_.zero_stage < 3) return;
  const size_t i = unit_index(layout_, u);
  Buffer& g = unit_gather_[i];
  if (!g.empty()) {
    unit_gathering_[i].wait();  // a prefetch's, if one is in flight
    return;
  }
  mesh_.zero_shard_group().all_gather(Communicator::kInPlace, gather_buffer(u, g), u.shard_numel(shards_));
}

template <class T>
void ShardedState<T>::prefetch(const Unit& u) {
  if (p_.zero_stage < 3) return;
  const size_t i = unit_index(layout_, u);
  Buffer& g = unit_gather_[i];
  if (!g.empty()) return;
  unit_gathering_[i] =
      mesh_.zero_shard_group().iall_gather(Communicator::kInPlace, gather_buffer(u, g), u.shard_numel(shards_));
}

template <class T>
T* ShardedState<T>::gather_buffer(const Unit& u, Buffer& g) {
  const int64_t S = u.shard_numel(shards_);
  g = Buffer(MemCategory::comm_buffers, u.padded_numel * sizeof(T));
  std::memcpy(g.template as<T>() + dp_rank_ * S, update_weights(u), S * sizeof(T));
  return g.template as<T>();
}

template <class T>
void ShardedState<T>::release(const Unit& u) {
  if (p_.zero_stage < 3) return;
  const size_t i = unit_index(layout_, u);
  unit_gathering_[i].wait();  // never in flight here: gather() completed it
  unit_gather_[i].reset();
}

template <class T>
float* ShardedState<T>::grads(const Unit& u) {
  if (p_.zero_stage < 2) return grads_.template as<float>() + u.offset;
  Buffer& g = unit_grads_[unit_index(layout_, u)];
  MT_ASSERT(!g.empty());
  return g.template as<float>();
}

template <class T>
void ShardedState<T>::begin_backward(const Unit& u) {
  if (p_.zero_stage < 2) return;
  Buffer& g = unit_grads_[unit_index(layout_, u)];
  if (g.empty()) g = Buffer(MemCategory::comm_buffers, u.padded_numel * sizeof(float));
}

template <class T>
void ShardedState<T>::reduce_sequence_partials(const Unit& u, float* unit_grads) {
  if (!p_.sequence_parallel || p_.tp == 1) return;
  for (const ParamSpec& s : u.params)
    if (s.sequence_partial_grad) mesh_.tp_group().all_reduce(unit_grads + (s.offset - u.offset), s.numel());
}

template <class T>
void ShardedState<T>::end_backward(const Unit& u, bool last) {
  Communicator& group = mesh_.zero_shard_group();  // the DP group unless sharding is hybrid
  const int64_t S = u.shard_numel(shards_);
  const int idx = static_cast<int>(unit_index(layout_, u));
  if (p_.zero_stage < 2) {
    if (!last) return;
    float* g = grads_.template as<float>() + u.offset;
    reduce_sequence_partials(u, g);
    if (p_.dp == 1) return;
    Pending pd{p_.zero_stage == 0 ? group.iall_reduce(g, u.padded_numel)
                                  : group.ireduce_scatter(Communicator::kInPlace, g, S),
               idx, Buffer(), Buffer()};
    pending_.push_back(std::move(pd));
    return;
  }
  Buffer full = std::move(unit_grads_[idx]);
  reduce_sequence_partials(u, full.template as<float>());
  Buffer shard(MemCategory::comm_buffers, S * sizeof(float));
  Request r = group.ireduce_scatter(full.template as<float>(), shard.template as<float>(), S);
  pending_.push_back(Pending{std::move(r), idx, std::move(full), std::move(shard)});
  // Bound the gradient memory in flight: complete all but the newest two.
  complete_oldest(pending_, &ShardedState::complete);
}

template <class T>
void ShardedState<T>::complete_oldest(std::vector<Pending>& queue, void (ShardedState::*done)(Pending&)) {
  while (queue.size() > kReductionsInFlight) {
    (this->*done)(queue.front());
    queue.erase(queue.begin());
  }
}

template <class T>
void ShardedState<T>::add_shard(const Pending& o) {
  const Unit& u = layout_.units()[o.unit];
  kernels::accumulate(reduced_grads(u), o.shard.template as<float>(), u.shard_numel(shards_));
}

template <class T>
void ShardedState<T>::complete(Pending& o) {
  o.req.wait();
  const Unit& u = layout_.units()[o.unit];
  const int64_t S = u.shard_numel(shards_);
  // Hybrid sharding: the shard reduced in the group, summed over its replicas.
  Communicator* replicas = mesh_.zero_replica_group();
  if (o.shard.empty()) {  // stages 0, 1: reduced in place
    if (replicas && p_.zero_stage == 1) replicas->all_reduce(reduced_grads(u), S);
    return;
  }
  if (!replicas) {
    add_shard(o);
    return;
  }
  o.full.reset();  // the reduce-scatter is done with it
  o.req = replicas->iall_reduce(o.shard.template as<float>(), S);
  replicating_.push_back(std::move(o));
  complete_oldest(replicating_, &ShardedState::finish_replicated);
}

template <class T>
void ShardedState<T>::finish_replicated(Pending& o) {
  o.req.wait();
  add_shard(o);
}

template <class T>
void ShardedState<T>::finish_reductions() {
  for (Pending& o : pending_) complete(o);
  pending_.clear();
  for (Pending& o : replicating_) finish_replicated(o);
  replicating_.clear();
  // The two copies of the tied word embedding hold partial gradients. An
  // untied model has no second copy: the first stage must not wait in an
  // all-reduce the last stage never joins.
  if (p_.pp > 1 && layout_.tied_embeddings() && mesh_.in_embedding_group()) {
    for (const Unit& u : layout_.units())
      if (u.name == "embedding.word" || u.name == "head.word")
        mesh_.embedding_group().all_reduce(reduced_grads(u), update_size(u));
  }
}

template <class T>
double ShardedState<T>::grad_sq_norm_local() const {
  double sum = 0;
  if (mesh_.zero_replica() > 0) return sum;  // hybrid sharding: the first replica counts the shard
  for (const Unit& u : layout_.units()) {
    // Stage 0 holds the whole reduced gradient on every DP rank: count only
    // this rank's shard of it.
    const int64_t S = u.shard_numel(shards_);
    const int64_t own_lo = u.offset + dp_rank_ * S, own_hi = own_lo + S;
    const int64_t base = update_begin(u);
    const float* g = reduced_grads(u);
    for (const Segment& s : segments_) {
      if (!s.counted || s.flat_offset < u.offset || s.flat_offset >= u.offset + u.padded_numel) continue;
      const int64_t lo = std::max(s.flat_offset, own_lo), hi = std::min(s.flat_offset + s.length, own_hi);
      if (lo < hi) sum += kernels::squared_norm(g + (lo - base), hi - lo);
    }
  }
  return sum;
}

template <class T>
void ShardedState<T>::step(float lr, float grad_scale, int t, const AdamWConfig& c) {
  // One multi-tensor AdamW over every segment this rank updates; in bf16 the
  // fp32 master is updated and the bf16 working weight written from it.
  std::vector<kernels::AdamWTensor> tensors;
  for (const Unit& u : layout_.units()) {
    const int64_t base = update_begin(u);
    float* g = reduced_grads(u);
    T* w = update_weights(u);
    for (const Segment& s : segments_) {
      if (s.flat_offset < base || s.flat_offset >= base + update_size(u)) continue;
      const int64_t k = s.flat_offset - base;
      kernels::AdamWTensor x;
      x.m = m_.template as<float>() + s.opt_offset;
      x.v = v_.template as<float>() + s.opt_offset;
      x.grad = g + k;
      x.n = s.length;
      x.weight_decay = s.decay ? c.weight_decay : 0.0f;
      if constexpr (std::is_same_v<T, float>) {
        x.w = w + k;
      } else {
        x.w = master_.template as<float>() + s.opt_offset;
        x.lowp = w + k;
      }
      tensors.push_back(x);
    }
  }
  kernels::adamw_multi_tensor(tensors.data(), static_cast<int>(tensors.size()), adamw_step(lr, grad_scale, t, c));
  if ((p_.zero_stage == 1 || p_.zero_stage == 2) && shards_ > 1) {
    for (const Unit& u : layout_.units())
      mesh_.zero_shard_group().all_gather(Communicator::kInPlace, weights_.template as<T>() + u.offset,
                                          u.shard_numel(shards_));
  }
  std::memset(grads_.data(), 0, grads_.bytes());
}

template <class T>
void ShardedState<T>::discard_gradients() {
  std::memset(grads_.data(), 0, grads_.bytes());
}

template <class T>
const ParamSpec* ShardedState<T>::first_nonfinite_grad() const {
  for (const Segment& s : segments_) {
    const Unit& u = layout_.units()[s.unit];
    const float* g = reduced_grads(u) + (s.flat_offset - update_begin(u));
    for (int64_t i = 0; i < s.length; ++i)
      if (!std::isfinite(g[i])) return s.spec;
  }
  return nullptr;
}

template <class T>
std::vector<typename ShardedState<T>::OptimizerShard> ShardedState<T>::optimizer_shards() {
  std::vector<OptimizerShard> out;
  for (const Segment& s : segments_) {
    const Unit& u = layout_.units()[s.unit];
    float* master = nullptr;
    if constexpr (!std::is_same_v<T, float>) master = master_.template as<float>() + s.opt_offset;
    // Hybrid sharding: the first replica writes the shard.
    int64_t wb = 0, wl = s.counted && mesh_.zero_replica() == 0 ? s.length : 0;
    if (p_.zero_stage == 0 && wl > 0) {  // every DP rank holds the range: each writes 1/dp of it
      const int64_t chunk = (s.length + p_.dp - 1) / p_.dp;
      wb = std::min(s.length, dp_rank_ * chunk);
      wl = std::min(s.length, wb + chunk) - wb;
    }
    out.push_back({s.spec, s.flat_offset - s.spec->offset, s.length,
                   update_weights(u) + (s.flat_offset - update_begin(u)), master,
                   m_.template as<float>() + s.opt_offset, v_.template as<float>() + s.opt_offset, wb, wl});
  }
  return out;
}

template <class T>
T* ShardedState<T>::slice_weights(const ParamSpec& s) {
  return p_.zero_stage >= 3 ? nullptr : weights_.template as<T>() + s.offset;
}

template <class T>
float ShardedState<T>::weight_value(const ParamSpec& s, int64_t i) const {
  const int64_t f = s.offset + i;
  if (p_.zero_stage < 3) return to_f32(weights_.template as<T>()[f]);
  for (const Unit& u : layout_.units()) {
    if (f < update_begin(u) || f >= update_begin(u) + update_size(u)) continue;
    return to_f32(update_weights(u)[f - update_begin(u)]);
  }
  throw std::logic_error("weight_value: element not held by this rank");
}

template class ShardedState<float>;
template class ShardedState<bf16>;

}  // namespace meshtrain
