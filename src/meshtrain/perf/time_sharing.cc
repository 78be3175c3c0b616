#include "meshtrain/perf/time_sharing.h"

#include <algorithm>

namespace meshtrain::perf {

int ranks_per_node(const SystemSpec& s, int num_gpus) { return std::min(num_gpus, s.devices_per_node); }

TimeShared time_shared_step(const StepCosts& c, const ParallelConfig& p, const SystemSpec& s, int num_gpus) {
  TimeShared r;
  const int rpn = ranks_per_node(s, num_gpus);
  if (!s.oversubscribed(rpn)) return r;
  const double share = double(rpn) / s.cores_per_node;
  const int mb = p.num_micro_batches();
  double compute = 0, optimizer = 0, most_comm = -1;
  for (int st = 0; st < c.pp; ++st) {
    double tp = 0, dp = 0, pp = 0;
    for (int k = 0; k < c.vpp; ++k) {
      const ChunkCost& cc = c.chunk(st, k);
      compute += mb * (cc.forward_compute_s + cc.backward_compute_s);
      tp += mb * (cc.forward_tp_s + cc.backward_tp_s);
      dp += mb * (cc.forward_dp_s + cc.backward_dp_s) + c.grad_reduce_s[st][k];
    }
    optimizer += c.optimizer_s[st];
    dp += c.param_gather_s[st];
    if (c.pp > 1) {
      // Activations out to the next stage and gradients back to the previous,
      // once per micro-batch and chunk (the first and last stage of a plain
      // pipeline have one neighbour).
      const bool wraps = c.vpp > 1;
      const double out = (st + 1 < c.pp || wraps) ? c.transfer_s[st] : 0;
      const double back = (st > 0 || wraps) ? c.transfer_s[(st + c.pp - 1) % c.pp] : 0;
      pp = double(mb) * c.vpp * (out + back);
    }
    if (st == 0 || st == c.pp - 1) pp += c.embedding_sync_s;
    if (tp + dp + pp > most_comm) most_comm = tp + dp + pp, r.tp_s = tp, r.dp_s = dp, r.pp_s = pp;
  }
  r.compute_s = share * compute / c.pp;
  r.optimizer_s = share * optimizer / c.pp;
  r.step_s = r.compute_s + r.optimizer_s + r.tp_s + r.pp_s + r.dp_s;
  return r;
}

}  // namespace meshtrain::perf
