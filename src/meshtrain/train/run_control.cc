#include "meshtrain/train/run_control.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace meshtrain {

namespace {

volatile std::sig_atomic_t g_term = 0;

extern "C" void on_term(int) { g_term = 1; }

RankIteration from_env(const char* name) {
  RankIteration r;
  if (const char* e = std::getenv(name)) std::sscanf(e, "%d:%d", &r.rank, &r.iteration);
  return r;
}

}  // namespace

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::none: return "none";
    case StopReason::finished: return "finished";
    case StopReason::exit_interval: return "exit_interval";
    case StopReason::exit_duration: return "exit_duration";
    case StopReason::signal: return "signal";
  }
  return "unknown";
}

void install_term_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
}

bool term_requested() { return g_term != 0; }

FaultInjection fault_injection_from_env() {
  return {from_env("MESHTRAIN_KILL_RANK_AT"), from_env("MESHTRAIN_KILL_DURING_SAVE"),
          from_env("MESHTRAIN_NAN_LOSS_AT")};
}

}  // namespace meshtrain
