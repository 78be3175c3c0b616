// What ends a run early, and the faults tests inject.
//
// SIGTERM (as Slurm sends before the wall-time limit) only sets a flag when
// --exit-signal-handler installed the handler; the loop reads it after each
// step, agrees on it with every rank (in the step's loss reduction), saves
// and exits 0. The duration limit is agreed on the same way.
//
// Fault injection, from the environment (tests only):
//   MESHTRAIN_KILL_RANK_AT="R:I"     rank R kills itself (SIGKILL) at iteration I
//   MESHTRAIN_KILL_DURING_SAVE="R:I" rank R kills itself after writing its
//                                    shard of the checkpoint of iteration I,
//                                    before the checkpoint is committed
//   MESHTRAIN_NAN_LOSS_AT="R:I"      rank R's loss of iteration I is NaN
#pragma once

namespace meshtrain {

enum class StopReason { none, finished, exit_interval, exit_duration, signal };
const char* stop_reason_name(StopReason r);

// Installs the SIGTERM handler (idempotent); term_requested() then says
// whether SIGTERM arrived.
void install_term_handler();
bool term_requested();

struct RankIteration {
  int rank = -1, iteration = -1;
  bool at(int r, int it) const { return rank == r && iteration == it; }
};
struct FaultInjection {
  RankIteration kill, kill_during_save, nan_loss;
};
FaultInjection fault_injection_from_env();

}  // namespace meshtrain
