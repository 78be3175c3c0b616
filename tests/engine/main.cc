// Engine tests run in one MPI process (a singleton world).
#include <mpi.h>

#include <gtest/gtest.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  return rc;
}
