#include "meshtrain/comm/mpi_types.h"

#include <algorithm>

#include "meshtrain/core/error.h"

namespace meshtrain {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

void bf16_reduce(ReduceOp op, const bf16* in, bf16* inout, int64_t n) {
  switch (op) {
    case ReduceOp::sum:
      for (int64_t i = 0; i < n; ++i) inout[i] = bf16(to_f32(in[i]) + to_f32(inout[i]));
      break;
    case ReduceOp::max:
      for (int64_t i = 0; i < n; ++i) inout[i] = bf16(std::max(to_f32(in[i]), to_f32(inout[i])));
      break;
    case ReduceOp::min:
      for (int64_t i = 0; i < n; ++i) inout[i] = bf16(std::min(to_f32(in[i]), to_f32(inout[i])));
      break;
  }
}

namespace {

template <ReduceOp Op>
void bf16_op_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_reduce(Op, static_cast<const bf16*>(in), static_cast<bf16*>(inout), *len);
}

struct Bf16Handles {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op sum = MPI_OP_NULL, max = MPI_OP_NULL, min = MPI_OP_NULL;
};

// Frees the handles when MPI_Finalize deletes MPI_COMM_SELF's attributes.
int free_handles(MPI_Comm, int, void* attr, void*) {
  auto* h = static_cast<Bf16Handles*>(attr);
  MPI_Op_free(&h->sum);
  MPI_Op_free(&h->max);
  MPI_Op_free(&h->min);
  MPI_Type_free(&h->type);
  return MPI_SUCCESS;
}

Bf16Handles* create_handles() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  check(initialized != 0, "bf16 MPI datatype requested before MPI_Init");
  static Bf16Handles h;
  MPI_Type_contiguous(2, MPI_BYTE, &h.type);
  MPI_Type_commit(&h.type);
  MPI_Op_create(&bf16_op_fn<ReduceOp::sum>, /*commute=*/1, &h.sum);
  MPI_Op_create(&bf16_op_fn<ReduceOp::max>, 1, &h.max);
  MPI_Op_create(&bf16_op_fn<ReduceOp::min>, 1, &h.min);
  int key = MPI_KEYVAL_INVALID;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &free_handles, &key, nullptr);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, &h);
  return &h;
}

const Bf16Handles& handles() {
  static Bf16Handles* h = create_handles();
  return *h;
}

}  // namespace

MPI_Datatype mpi_bf16() { return handles().type; }

MPI_Op mpi_op(ReduceOp op, MPI_Datatype type) {
  if (type == mpi_bf16()) {
    const Bf16Handles& h = handles();
    return op == ReduceOp::sum ? h.sum : op == ReduceOp::max ? h.max : h.min;
  }
  return op == ReduceOp::sum ? MPI_SUM : op == ReduceOp::max ? MPI_MAX : MPI_MIN;
}

int64_t mpi_type_bytes(MPI_Datatype type) {
  int size = 0;
  MPI_Type_size(type, &size);
  return size;
}

}  // namespace meshtrain
