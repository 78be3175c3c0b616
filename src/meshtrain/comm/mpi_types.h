// MPI datatypes and reduction operators for the element types the engine
// moves. MPI has no bfloat16, so bf16 travels as a committed contiguous
// 2-byte datatype and is reduced by user-defined operators (MPI_Op_create)
// that convert each pair to fp32, combine, and round back to bf16 (round to
// nearest even). Every pairwise step rounds, as NCCL's bf16 reductions do;
// the operators are commutative, so every rank of an all-reduce obtains the
// same bits.
//
// The bf16 datatype and operators are created on first use (after MPI_Init)
// and freed when MPI_Finalize runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <mpi.h>

#include "meshtrain/core/dtype.h"

namespace meshtrain {

enum class ReduceOp : uint8_t { sum, max, min };
std::string_view reduce_op_name(ReduceOp op);

// The datatype of bf16 elements.
MPI_Datatype mpi_bf16();

// The datatype of one element of T: float, double, int32_t, int64_t,
// uint8_t, std::byte, bf16. uint16_t is deliberately absent: bf16 values
// travel as bf16, so that their sums go through fp32, not integer addition.
template <typename T> inline MPI_Datatype mpi_datatype() {
  static_assert(sizeof(T*) == 0, "no MPI datatype for this element type");
  return MPI_DATATYPE_NULL;
}
template <> inline MPI_Datatype mpi_datatype<float>() { return MPI_FLOAT; }
template <> inline MPI_Datatype mpi_datatype<double>() { return MPI_DOUBLE; }
template <> inline MPI_Datatype mpi_datatype<int32_t>() { return MPI_INT32_T; }
template <> inline MPI_Datatype mpi_datatype<int64_t>() { return MPI_INT64_T; }
template <> inline MPI_Datatype mpi_datatype<uint8_t>() { return MPI_UINT8_T; }
template <> inline MPI_Datatype mpi_datatype<std::byte>() { return MPI_BYTE; }
template <> inline MPI_Datatype mpi_datatype<bf16>() { return mpi_bf16(); }

// The datatype of the engine's activation/parameter types.
inline MPI_Datatype mpi_datatype(DType t) { return t == DType::f32 ? MPI_FLOAT : mpi_bf16(); }

// The operator that applies `op` to elements of `type`: MPI's predefined
// operator for predefined types, the user-defined one for bf16.
MPI_Op mpi_op(ReduceOp op, MPI_Datatype type);

// Size in bytes of one element of `type`.
int64_t mpi_type_bytes(MPI_Datatype type);

// The bf16 reduction kernels the operators run, exposed for tests:
// inout[i] = op(in[i], inout[i]) computed in fp32 and rounded to bf16.
void bf16_reduce(ReduceOp op, const bf16* in, bf16* inout, int64_t n);

}  // namespace meshtrain
