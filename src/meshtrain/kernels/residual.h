// Residual additions, elementwise over n elements in fp32.
//
//   residual_forward  out = a + b   (out may alias a or b)
//   add_inplace       acc += x
//
// The backward of a residual is the identity on both branches: the caller
// passes the same gradient on (and uses add_inplace where two gradients meet).
#pragma once

#include <cstddef>

#include "meshtrain/core/dtype.h"

namespace meshtrain::kernels {

template <class T>
void residual_forward(T* out, const T* a, const T* b, size_t n);
template <class T>
void add_inplace(T* acc, const T* x, size_t n);

}  // namespace meshtrain::kernels
