// The compute backends compiled into this build, for `meshtrain --version`
// and for choosing a device: "cpu" always, "cuda" when CMake found a CUDA
// toolkit (MESHTRAIN_CUDA=AUTO or ON). Whether a GPU is visible at run time
// is the GPU backend's question (kernels/gpu/runtime_api.h).
#pragma once

#include <string>

namespace meshtrain {

bool cuda_compiled();
// One line, e.g. "cpu (oneDNN), cuda (CUDA 13.0.88, architectures 90-real;90-virtual)".
std::string compiled_backends();

}  // namespace meshtrain
