// NCCL through the Transport interface with one rank (the most one GPU
// takes): every call runs NCCL and must leave the data as a one-rank
// collective does. Several ranks need several GPUs: not checked here.
#include <mpi.h>

#include "meshtrain/comm/mpi_types.h"
#include "meshtrain/kernels/gpu/nccl_transport.h"

#include "gpu_testing.h"

namespace meshtrain {
namespace {

using namespace mt_test;

// MPI (singleton) for NCCL's id exchange, finalised after the last test.
class MpiEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Finalize();
  }
};
const auto* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

void ensure_mpi() {
  int init = 0;
  MPI_Initialized(&init);
  if (!init) MPI_Init(nullptr, nullptr);
}

TEST(GpuNccl, OneRankCollectivesThroughTheTransport) {
  MT_REQUIRE_GPU();
  ensure_mpi();
  gpu::NcclTransport nccl;
  const int64_t n = 1001;
  const vecf x = randn(n, 1);
  DeviceVec<float> a(x), b(n);
  EXPECT_EQ(nccl.all_reduce(a.get(), n, MPI_FLOAT, ReduceOp::sum, MPI_COMM_SELF), MPI_SUCCESS);
  EXPECT_TRUE(bitwise_equal(a.host(), x));
  EXPECT_EQ(nccl.reduce_scatter(a.get(), b.get(), n, MPI_FLOAT, ReduceOp::max, MPI_COMM_SELF), MPI_SUCCESS);
  EXPECT_TRUE(bitwise_equal(b.host(), x));
  DeviceVec<float> c(n);
  EXPECT_EQ(nccl.reduce_scatter(MPI_IN_PLACE, a.get(), n, MPI_FLOAT, ReduceOp::sum, MPI_COMM_SELF), MPI_SUCCESS);
  EXPECT_EQ(nccl.all_gather(a.get(), c.get(), n, MPI_FLOAT, MPI_COMM_SELF), MPI_SUCCESS);
  EXPECT_TRUE(bitwise_equal(c.host(), x));
  const std::vector<bf16> h = to_bf16(x);
  DeviceVec<bf16> d(h);
  EXPECT_EQ(nccl.broadcast(d.get(), n, mpi_bf16(), 0, MPI_COMM_SELF), MPI_SUCCESS);
  EXPECT_EQ(nccl.all_reduce(d.get(), n, mpi_bf16(), ReduceOp::sum, MPI_COMM_SELF), MPI_SUCCESS);
  EXPECT_TRUE(bitwise_equal(d.host(), h));
}

}  // namespace
}  // namespace meshtrain
