#include "meshtrain/parallel/schedule.h"

#include <algorithm>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {

// One compute step of a stage: (micro-batch, chunk, forward or backward).
struct Step {
  bool forward;
  int micro_batch;
  int chunk;
};

// Appends a compute step with the communication around it: a forward is
// preceded by the receive of its input and followed by the send of its
// output; a backward likewise with gradients. Receives sit right before the
// compute that needs them, so a stage blocks only on data it must have.
void append(std::vector<Action>& out, const Step& st, int stage, int pp, int vpp) {
  const int v = st.chunk * pp + stage;
  const int last = pp * vpp - 1;
  if (st.forward) {
    if (v > 0) out.push_back({ActionKind::recv_forward, st.micro_batch, st.chunk});
    out.push_back({ActionKind::forward, st.micro_batch, st.chunk});
    if (v < last) out.push_back({ActionKind::send_forward, st.micro_batch, st.chunk});
  } else {
    if (v < last) out.push_back({ActionKind::recv_backward, st.micro_batch, st.chunk});
    out.push_back({ActionKind::backward, st.micro_batch, st.chunk});
    if (v > 0) out.push_back({ActionKind::send_backward, st.micro_batch, st.chunk});
  }
}

// GPipe (Huang et al. 2019): every forward, then every backward.
std::vector<Step> gpipe_steps(int m) {
  std::vector<Step> steps;
  for (int i = 0; i < m; ++i) steps.push_back({true, i, 0});
  for (int i = 0; i < m; ++i) steps.push_back({false, i, 0});
  return steps;
}

// 1F1B, PipeDream-Flush (Narayanan et al. 2021): pp - s - 1 warm-up
// forwards, then alternate one forward and one backward, then drain.
std::vector<Step> one_f_one_b_steps(int stage, int pp, int m) {
  const int warmup = std::min(pp - stage - 1, m);
  std::vector<Step> steps;
  for (int i = 0; i < warmup; ++i) steps.push_back({true, i, 0});
  for (int i = 0; i < m - warmup; ++i) {
    steps.push_back({true, warmup + i, 0});
    steps.push_back({false, i, 0});
  }
  for (int i = m - warmup; i < m; ++i) steps.push_back({false, i, 0});
  return steps;
}

// Interleaved 1F1B, in the order of Megatron-LM's
// forward_backward_pipelining_with_interleaving: virtual step k of m * vpp
// runs chunk (k mod pp*vpp) / pp (reversed for backward) on micro-batch
// (k / (pp*vpp)) * pp + k mod pp, i.e. groups of pp micro-batches per chunk.
std::vector<Step> interleaved_steps(int stage, int pp, int vpp, int m) {
  const int total = m * vpp;
  const int group = pp * vpp;
  auto chunk_of = [&](int k, bool forward) {
    const int c = (k % group) / pp;
    return forward ? c : vpp - 1 - c;
  };
  auto micro_batch_of = [&](int k) { return (k / group) * pp + k % pp; };
  int warmup = total;  // m == pp: all forwards first (Megatron does the same)
  if (m != pp) warmup = std::min((pp - stage - 1) * 2 + (vpp - 1) * pp, total);
  std::vector<Step> steps;
  for (int k = 0; k < warmup; ++k) steps.push_back({true, micro_batch_of(k), chunk_of(k, true)});
  for (int k = 0; k < total - warmup; ++k) {
    const int f = k + warmup;
    steps.push_back({true, micro_batch_of(f), chunk_of(f, true)});
    steps.push_back({false, micro_batch_of(k), chunk_of(k, false)});
  }
  for (int k = total - warmup; k < total; ++k) steps.push_back({false, micro_batch_of(k), chunk_of(k, false)});
  return steps;
}

}  // namespace

Schedule make_schedule(ScheduleKind kind, int pp, int vpp, int num_micro_batches) {
  const int m = num_micro_batches;
  check(pp >= 1, "pipeline-model-parallel-size must be positive (got {})", pp);
  check(vpp >= 1, "virtual pipeline chunks must be positive (got {})", vpp);
  check(m >= 1, "micro-batches per step must be positive (got {})", m);
  if (kind == ScheduleKind::interleaved)
    check(m % pp == 0, "micro-batches per step {} is not a multiple of pipeline-model-parallel-size {} (interleaved)",
          m, pp);
  else
    check(vpp == 1, "virtual pipeline chunks need the interleaved schedule");

  Schedule s{kind, pp, vpp, m, std::vector<std::vector<Action>>(pp)};
  for (int stage = 0; stage < pp; ++stage) {
    std::vector<Step> steps;
    switch (kind) {
      case ScheduleKind::gpipe: steps = gpipe_steps(m); break;
      case ScheduleKind::one_f_one_b: steps = one_f_one_b_steps(stage, pp, m); break;
      case ScheduleKind::interleaved: steps = interleaved_steps(stage, pp, vpp, m); break;
    }
    auto& out = s.stages[stage];
    out.reserve(steps.size() * 3);
    for (const Step& st : steps) append(out, st, stage, pp, vpp);
  }
  return s;
}

int Schedule::max_in_flight(int stage) const {
  MT_ASSERT(stage >= 0 && stage < static_cast<int>(stages.size()));
  int now = 0, peak = 0;
  for (const Action& a : stages[stage]) {
    if (a.kind == ActionKind::forward) peak = std::max(peak, ++now);
    if (a.kind == ActionKind::backward) --now;
  }
  return peak;
}

const char* action_kind_name(ActionKind k) {
  static const char* names[] = {"recv_forward", "forward", "send_forward", "recv_backward", "backward", "send_backward"};
  return names[static_cast<int>(k)];
}

std::string to_string(const Action& a) {
  return fmt::format("{}(mb={}, chunk={})", action_kind_name(a.kind), a.micro_batch, a.chunk);
}

}  // namespace meshtrain
