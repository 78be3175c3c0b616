// Dense layers on cuBLASLt (contract: kernels/matmul.h, row-major).
//
// cuBLASLt is column-major; a row-major X[M, K] is the column-major X^T[K, M]
// with leading dimension K, so (ld = leading dimension, col-major shapes):
//   forward  out^T[N, M]  = W^T'[N, K] x inp^T[K, M]    A = W   (op T, K x N, ld K)
//                                                        B = inp (op N, K x M, ld K)
//            bias[N] broadcast over columns: the BIAS epilogue
//   dinp     dinp^T[K, M] = W^T[K, N] x dout^T[N, M]    A = W   (op N, K x N, ld K)
//                                                        B = dout (op N, N x M, ld N), beta 0 or 1
//   dweight  dW^T[K, N]  += inp^T[K, M] x dout[M, N]    A = inp (op N, K x M, ld K)
//                                                        B = dout (op T, N x M, ld N), D fp32, beta 1
// fp32: CUBLAS_COMPUTE_32F (true fp32, no TF32). bf16: bf16 A and B, fp32
// accumulation and scale, output bf16 (forward, dinp) or fp32 (dweight).
// The bias gradient is a column sum of dout in row order (deterministic).
//
// Plans (descriptors, layouts and the heuristic's first algorithm) are cached
// per (shape, variant, dtype, operand alignment). Workspace: 32 MiB on the
// device, tracked as workspace, held for the life of the process.
#include <cublasLt.h>

#include <map>
#include <string>
#include <memory>
#include <tuple>

#include "meshtrain/core/memory.h"
#include "meshtrain/kernels/gpu/gpu_compat.h"
#include "meshtrain/kernels/gpu/kernels.h"

namespace meshtrain::gpu {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

void check_blas(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) throw_gpu_error(cublasLtGetStatusString(s), call, file, line);
}
#define BLAS_CHECK(call) check_blas((call), #call, __FILE__, __LINE__)

enum class Variant : int { forward, forward_bias, dinp, dweight };

struct PlanKey {
  Variant variant;
  int M, K, N;
  bool bf16;
  float beta;
  int align;  // the smallest alignment, bytes, of the operand pointers (<= 256)
  auto tie() const { return std::tie(variant, M, K, N, bf16, beta, align); }
  bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
};

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
  }
};

struct Blas {
  cublasLtHandle_t handle = nullptr;
  Buffer workspace;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  Blas() {
    BLAS_CHECK(cublasLtCreate(&handle));
    workspace = Buffer(MemCategory::workspace, kWorkspaceBytes, false, Device::cuda);
  }
};
Blas& blas() {
  static Blas b;  // lives until exit; the handle is not destroyed (the driver may be gone by then)
  return b;
}

int alignment_of(const void* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  int a = 256;
  while (a > 1 && (u % a) != 0) a /= 2;
  return a;
}

cublasLtMatrixLayout_t layout(cudaDataType_t t, int rows, int cols, int ld) {
  cublasLtMatrixLayout_t l;
  BLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld));
  return l;
}

std::unique_ptr<Plan> make_plan(const PlanKey& k) {
  auto p = std::make_unique<Plan>();
  const cudaDataType_t in = k.bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cudaDataType_t outt = (k.variant == Variant::dweight) ? CUDA_R_32F : in;
  BLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  int m = 0, n = 0;  // D is m x n (column-major)
  switch (k.variant) {
    case Variant::forward:
    case Variant::forward_bias:
      ta = CUBLAS_OP_T, m = k.N, n = k.M;
      p->a = layout(in, k.K, k.N, k.K);
      p->b = layout(in, k.K, k.M, k.K);
      break;
    case Variant::dinp:
      m = k.K, n = k.M;
      p->a = layout(in, k.K, k.N, k.K);
      p->b = layout(in, k.N, k.M, k.N);
      break;
    case Variant::dweight:
      tb = CUBLAS_OP_T, m = k.K, n = k.N;
      p->a = layout(in, k.K, k.M, k.K);
      p->b = layout(in, k.N, k.M, k.N);
      break;
  }
  p->c = layout(outt, m, n, m);
  BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (k.variant == Variant::forward_bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    const cudaDataType_t bt = in;
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
  }
  cublasLtMatmulPreference_t pref;
  BLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kWorkspaceBytes;
  const uint32_t align = static_cast<uint32_t>(k.align);
  BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(blas().handle, p->desc, p->a, p->b, p->c, p->c, pref, 1,
                                                           &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    throw std::runtime_error("cuBLASLt has no algorithm for matmul M=" + std::to_string(k.M) + " K=" +
                             std::to_string(k.K) + " N=" + std::to_string(k.N) + (k.bf16 ? " bf16" : " fp32") +
                             " variant " + std::to_string(static_cast<int>(k.variant)));
  p->algo = result.algo;
  return p;
}

void run(const PlanKey& key, const void* A, const void* B, void* C, const void* bias) {
  Blas& b = blas();
  auto it = b.plans.find(key);
  if (it == b.plans.end()) it = b.plans.emplace(key, make_plan(key)).first;
  Plan& p = *it->second;
  if (bias) BLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float alpha = 1.0f, beta = key.beta;
  BLAS_CHECK(cublasLtMatmul(b.handle, p.desc, &alpha, A, p.a, B, p.b, &beta, C, p.c, C, p.c, &p.algo,
                            b.workspace.data(), kWorkspaceBytes, stream()));
}

int min_alignment(std::initializer_list<const void*> ptrs) {
  int a = 256;
  for (const void* p : ptrs)
    if (p) a = std::min(a, alignment_of(p));
  return a;
}

// dbias[n] += sum over rows of dout[:, n], rows in order.
template <class T>
__global__ void bias_grad_kernel(float* dbias, const T* dout, int M, int N) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  float s = 0;
  for (int r = 0; r < M; ++r) s += ld(dout[int64_t{r} * N + n]);
  dbias[n] += s;
}

}  // namespace

template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int M, int K, int N) {
  if (int64_t{M} * N == 0) return;
  constexpr bool lowp = std::is_same_v<T, bf16>;
  const PlanKey key{bias ? Variant::forward_bias : Variant::forward, M, K, N, lowp, 0.0f,
                    min_alignment({out, inp, weight, bias})};
  run(key, weight, inp, out, bias);
}

template <class T>
void matmul_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp, const T* weight, int M,
                     int K, int N, bool accumulate_dinp) {
  if (int64_t{M} * N == 0) return;
  constexpr bool lowp = std::is_same_v<T, bf16>;
  if (dinp) {
    const PlanKey key{Variant::dinp, M, K, N, lowp, accumulate_dinp ? 1.0f : 0.0f,
                      min_alignment({dinp, dout, weight})};
    run(key, weight, dout, dinp, nullptr);
  }
  const PlanKey wkey{Variant::dweight, M, K, N, lowp, 1.0f, min_alignment({dweight, dout, inp})};
  run(wkey, inp, dout, dweight, nullptr);
  if (dbias) {
    bias_grad_kernel<<<(N + 255) / 256, 256, 0, stream()>>>(dbias, dout, M, N);
    GPU_CHECK_LAUNCH();
  }
}

template void matmul_forward<float>(float*, const float*, const float*, const float*, int, int, int);
template void matmul_forward<bf16>(bf16*, const bf16*, const bf16*, const bf16*, int, int, int);
template void matmul_backward<float>(float*, float*, float*, const float*, const float*, const float*, int, int, int,
                                     bool);
template void matmul_backward<bf16>(bf16*, float*, float*, const bf16*, const bf16*, const bf16*, int, int, int,
                                    bool);

}  // namespace meshtrain::gpu
