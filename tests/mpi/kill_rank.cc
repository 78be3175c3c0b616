// Failure injection for the multi-rank failure tests. Every rank of a
// (tp 2, pp 1) mesh runs steps of all-reduces; at step 3 rank 1 fails in the
// way the first argument names:
//   sigkill   raise(SIGKILL): the process dies without a word
//   exit      _exit(3): the process ends non-zero without MPI_Finalize
//   throw     throws Error, caught by run_or_abort, which calls abort_all
//   hang      waits in a receive that is never sent, while its peers wait in
//             the next all-reduce; the watchdog must end the job
//   stop      raise(SIGSTOP): the process is stopped; the watchdog of a peer
//             must end the job and name it
// In every mode the job must end non-zero within seconds; the test wrapper
// (expect_failure.sh) checks how long it took and what was printed.
#include <mpi.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "meshtrain/comm/abort.h"
#include "meshtrain/comm/process_mesh.h"
#include "meshtrain/core/error.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  const int code = meshtrain::run_or_abort([&] {
    meshtrain::check(mode == "sigkill" || mode == "exit" || mode == "throw" || mode == "hang" ||
                         mode == "stop",
                     "usage: kill_rank sigkill|exit|throw|hang|stop");
    meshtrain::ProcessMesh mesh(2, 1);
    std::vector<float> grad(1024, 1.0f);
    for (int step = 0; step < 1000; ++step) {
      if (step == 3 && mesh.rank() == 1) {
        if (mode == "sigkill") std::raise(SIGKILL);
        if (mode == "stop") std::raise(SIGSTOP);
        if (mode == "exit") _exit(3);
        if (mode == "throw") throw meshtrain::Error("injected failure at step 3");
        if (mode == "hang") mesh.world().recv(grad.data(), 1, 0, /*tag=*/77);
      }
      mesh.tp_group().all_reduce(grad.data(), 1024);
      mesh.world().all_reduce(grad.data(), 1024, meshtrain::ReduceOp::max);
      usleep(10000);
    }
    return 0;
  });
  // Reaching here means the failure did not end the job.
  std::fprintf(stderr, "kill_rank: rank survived mode '%s'\n", mode.c_str());
  MPI_Finalize();
  return code == 0 ? 0 : code;
}
