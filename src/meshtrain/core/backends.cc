#include "meshtrain/core/backends.h"

namespace meshtrain {

bool cuda_compiled() {
#ifdef MESHTRAIN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::string compiled_backends() {
  std::string s = "cpu (oneDNN)";
#ifdef MESHTRAIN_WITH_CUDA
  s += ", cuda (CUDA " MESHTRAIN_CUDA_VERSION ", architectures " MESHTRAIN_CUDA_ARCHS ", cuBLASLt, NCCL)";
#endif
  return s;
}

}  // namespace meshtrain
