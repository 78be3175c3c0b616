// Schedule: the order in which each pipeline stage runs forward and backward
// passes and moves activations and gradients. A schedule is data: a list of
// actions per stage, produced by a generator and walked by the engine's
// executor and by the performance model's simulator alike.
//
// Semantics. Stage s holds model chunks c = 0..vpp-1; chunk c of stage s is
// virtual stage v = c * pp + s (Megatron's interleaving), and the model's
// layers run through virtual stages 0..pp*vpp-1 in order. Micro-batches are
// numbered 0..m-1. For each stage the actions are executed in list order:
//   recv_forward(mb, c)  receive the input activation of (mb, c) from the
//                        previous virtual stage (absent on virtual stage 0)
//   forward(mb, c)       run chunk c forward on micro-batch mb
//   send_forward(mb, c)  send its output to the next virtual stage (absent
//                        on the last virtual stage)
//   recv_backward(mb, c) receive the gradient of its output (absent on the
//                        last virtual stage)
//   backward(mb, c)      run chunk c backward on mb
//   send_backward(mb, c) send the input gradient to the previous virtual
//                        stage (absent on virtual stage 0)
// Sends are non-blocking (completed before the step ends); receives block.
// Every generated schedule is deadlock-free under these semantics.
#pragma once

#include <string>
#include <vector>

#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain {

enum class ActionKind { recv_forward, forward, send_forward, recv_backward, backward, send_backward };

struct Action {
  ActionKind kind;
  int micro_batch;
  int chunk;
  bool operator==(const Action&) const = default;
};

// An action as one rank executed it (PipelineEngine's StepStats::actions).
struct ActionTime {
  Action action;
  double start_s = 0, end_s = 0;
};

struct Schedule {
  ScheduleKind kind;
  int pp = 1;
  int vpp = 1;
  int num_micro_batches = 1;
  std::vector<std::vector<Action>> stages;  // stages[s]: actions of stage s in order

  // Most micro-batch activations (forward done, backward not yet) held at once
  // by stage s, counted in chunk-micro-batches.
  int max_in_flight(int stage) const;
};

// pp >= 1, vpp >= 1 (vpp > 1 only for interleaved), m >= 1 (a multiple of pp
// for interleaved). Throws Error otherwise.
Schedule make_schedule(ScheduleKind kind, int pp, int vpp, int num_micro_batches);

// "recv_forward", "forward", "send_forward", "recv_backward", "backward",
// "send_backward".
const char* action_kind_name(ActionKind k);
std::string to_string(const Action& a);

}  // namespace meshtrain
