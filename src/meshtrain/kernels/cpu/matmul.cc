#include "meshtrain/kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include <dnnl.hpp>

#include "meshtrain/kernels/cpu/common.h"
#include "meshtrain/kernels/flops.h"
#include "meshtrain/kernels/kernel_clock.h"

namespace meshtrain::kernels {

namespace {

using dnnl::memory;
using dims = memory::dims;

enum class Variant : uint8_t {
  forward,               // out = inp . W^T
  forward_bias,          // out = inp . W^T + bias
  backward_data,         // dinp = dout . W
  backward_data_acc,     // dinp += dout . W
  backward_weights_acc,  // dweight (fp32) += dout^T . inp
};

struct Key {
  int M, K, N;
  DType dtype;
  Variant variant;
  int ld = 0;  // backward_weights_acc: row stride of dout (0: N)
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = static_cast<uint64_t>(k.M) * 0x9e3779b97f4a7c15ull;
    h ^= static_cast<uint64_t>(k.K) + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.N) + 0x85ebca77c2b2ae63ull + (h << 6) + (h >> 2);
    h ^= (static_cast<uint64_t>(k.dtype) << 8 | static_cast<uint64_t>(k.variant)) + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.ld) + 0x27d4eb2f165667c5ull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};

struct Entry {
  dnnl::matmul prim;
  memory::desc src, wei, bias, dst;
};

// The one piece of state of the kernels: the oneDNN engine, its stream and
// the primitives created so far.
struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::unordered_map<Key, Entry, KeyHash> cache;
  std::mutex mutex;
};

constexpr int kWeightGradBlock = 8192;

Context& context() {
  static Context ctx;
  return ctx;
}

memory::data_type dnnl_type(DType t) { return t == DType::f32 ? memory::data_type::f32 : memory::data_type::bf16; }

// Row-major [rows, cols] with a leading dimension; transposed = the matrix
// stored as [cols, rows] row-major and read as its transpose.
memory::desc matrix(int rows, int cols, memory::data_type dt, bool transposed) {
  const memory::dim r = rows, c = cols;
  return memory::desc(dims{r, c}, dt, transposed ? dims{1, r} : dims{c, 1});
}

Entry make_entry(const Key& k, const dnnl::engine& engine) {
  const auto dt = dnnl_type(k.dtype);
  Entry e;
  dnnl::primitive_attr attr;
  switch (k.variant) {
    case Variant::forward:
    case Variant::forward_bias:
      e.src = matrix(k.M, k.K, dt, false);
      e.wei = matrix(k.K, k.N, dt, true);  // W [N, K] read as W^T [K, N]
      e.dst = matrix(k.M, k.N, dt, false);
      if (k.variant == Variant::forward_bias) e.bias = memory::desc(dims{1, k.N}, dt, dims{k.N, 1});
      break;
    case Variant::backward_data:
    case Variant::backward_data_acc:
      e.src = matrix(k.M, k.N, dt, false);  // dout
      e.wei = matrix(k.N, k.K, dt, false);  // W
      e.dst = matrix(k.M, k.K, dt, false);  // dinp
      break;
    case Variant::backward_weights_acc:
      // dout [M, ld] (its columns n0 .. n0+N) read as dout^T [N, M]
      e.src = memory::desc(dims{k.N, k.M}, dt, dims{1, k.ld > 0 ? k.ld : k.N});
      e.wei = matrix(k.M, k.K, dt, false);  // inp
      e.dst = matrix(k.N, k.K, memory::data_type::f32, false);
      break;
  }
  if (k.variant == Variant::backward_data_acc || k.variant == Variant::backward_weights_acc) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  const dnnl::matmul::desc desc = k.variant == Variant::forward_bias
                                         ? dnnl::matmul::desc(e.src, e.wei, e.bias, e.dst)
                                         : dnnl::matmul::desc(e.src, e.wei, e.dst);
  e.prim = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, engine));
  return e;
}

void run(const Key& k, const void* src, const void* wei, const void* bias, void* dst) {
  Context& ctx = context();
  const Entry* e;
  {
    std::lock_guard<std::mutex> lock(ctx.mutex);
    auto it = ctx.cache.find(k);
    if (it == ctx.cache.end()) it = ctx.cache.emplace(k, make_entry(k, ctx.engine)).first;
    e = &it->second;  // stable: unordered_map never moves its nodes
  }
  std::unordered_map<int, memory> args;
  args.reserve(4);
  args.emplace(DNNL_ARG_SRC, memory(e->src, ctx.engine, const_cast<void*>(src)));
  args.emplace(DNNL_ARG_WEIGHTS, memory(e->wei, ctx.engine, const_cast<void*>(wei)));
  args.emplace(DNNL_ARG_DST, memory(e->dst, ctx.engine, dst));
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, memory(e->bias, ctx.engine, const_cast<void*>(bias)));
  e->prim.execute(ctx.stream, args);
  ctx.stream.wait();
}

// dbias[N] += column sums of dout[M, N]: per fixed block of rows into
// partials, then the blocks added in order (deterministic).
template <class T>
void column_sums_into(float* dbias, const T* dout, int M, int N) {
  constexpr int kRows = 256;
  const int nblocks = cpu::ceil_div(M, kRows);
  cpu::Scratch partials = cpu::make_scratch(static_cast<size_t>(nblocks) * N);
#pragma omp parallel for schedule(static)
  for (int b = 0; b < nblocks; ++b) {
    float* p = partials.get() + static_cast<size_t>(b) * N;
    for (int n = 0; n < N; ++n) p[n] = 0.0f;
    const int m1 = (b + 1) * kRows < M ? (b + 1) * kRows : M;
    for (int m = b * kRows; m < m1; ++m) {
      const T* row = dout + static_cast<size_t>(m) * N;
#pragma omp simd
      for (int n = 0; n < N; ++n) p[n] += cpu::ld(row[n]);
    }
  }
  cpu::reduce_partials_into(dbias, partials.get(), nblocks, N);
}

}  // namespace

template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int M, int K, int N) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // empty reduction: out = bias or 0
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) out[static_cast<size_t>(m) * N + n] = bias ? bias[n] : cpu::st<T>(0.0f);
    return;
  }
  const KernelTimer timer(KernelKind::matmul, double(matmul_forward_flops(M, K, N)));
  const Key k{M, K, N, dtype_of<T>(), bias ? Variant::forward_bias : Variant::forward};
  run(k, inp, weight, bias, out);
}

template <class T>
void matmul_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight, int M,
                     int K, int N, bool accumulate_dinp) {
  if (M <= 0 || N <= 0 || K < 0) return;
  // One 2MKN product for each gradient computed.
  const int products = (dinp != nullptr) + (dweight != nullptr);
  const KernelTimer timer(KernelKind::matmul, double(products * matmul_forward_flops(M, K, N)));
  if (K > 0) {
    if (dinp != nullptr) {
      const Key k{M, K, N, dtype_of<T>(), accumulate_dinp ? Variant::backward_data_acc : Variant::backward_data};
      run(k, dout, weight, nullptr, dinp);
    }
    if (dweight != nullptr) {
      // Wide outputs (the logits' vocabulary) in column blocks: oneDNN 2.6
      // runs the transposed-source product 20-30% faster on blocks of
      // kWeightGradBlock rows of dweight than on all 50k at once. Each
      // row of dweight is computed alone either way.
      for (int n0 = 0; n0 < N; n0 += kWeightGradBlock) {
        const int nb = std::min(kWeightGradBlock, N - n0);
        const Key k{M, K, nb, dtype_of<T>(), Variant::backward_weights_acc, N};
        run(k, dout + n0, inp, nullptr, dweight + static_cast<size_t>(n0) * K);
      }
    }
  }
  if (dbias != nullptr) column_sums_into(dbias, dout, M, N);
}

size_t matmul_cache_size() {
  Context& ctx = context();
  std::lock_guard<std::mutex> lock(ctx.mutex);
  return ctx.cache.size();
}

#define MT_INSTANTIATE(T)                                                                                   \
  template void matmul_forward<T>(T*, const T*, const T*, const T*, int, int, int);                         \
  template void matmul_backward<T>(T*, float*, float*, const T*, const T*, const T*, int, int, int, bool);
MT_INSTANTIATE(float)
MT_INSTANTIATE(bf16)
#undef MT_INSTANTIATE

}  // namespace meshtrain::kernels
