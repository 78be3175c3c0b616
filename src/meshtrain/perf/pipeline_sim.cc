#include "meshtrain/perf/pipeline_sim.h"

#include <algorithm>
#include <stdexcept>

#include "meshtrain/core/error.h"

namespace meshtrain::perf {

PipelineTimeline simulate(const Schedule& sch, const PipelineCosts& c) {
  const int pp = sch.pp, vpp = sch.vpp, m = sch.num_micro_batches;
  MT_ASSERT(c.pp == pp && c.vpp == vpp);
  MT_ASSERT(int(c.forward_s.size()) == pp * vpp && int(c.backward_s.size()) == pp * vpp);
  MT_ASSERT(pp == 1 || int(c.transfer_s.size()) == pp);
  const int nv = pp * vpp;
  // Arrival time of the activation entering virtual stage v (fwd) and of the
  // gradient entering virtual stage v (bwd), per micro-batch; < 0: not sent.
  // Reused across calls: a planner simulates thousands of schedules.
  thread_local std::vector<double> fwd, bwd;
  fwd.assign(size_t(nv) * m, -1.0);
  bwd.assign(size_t(nv) * m, -1.0);
  auto tr = [&](int boundary) { return pp > 1 ? c.transfer_s[(boundary + pp) % pp] : 0.0; };

  PipelineTimeline out;
  out.stages.resize(pp);
  std::vector<size_t> pos(pp, 0);
  std::vector<double> clock(pp, 0.0);
  for (auto& st : out.stages) {
    st.last_backward_start_s.assign(vpp, 0.0);
    st.last_backward_end_s.assign(vpp, 0.0);
  }

  size_t remaining = 0;
  for (const auto& a : sch.stages) remaining += a.size();
  bool ascending = true;
  while (remaining > 0) {
    size_t progressed = 0;
    for (int i = 0; i < pp; ++i) {
      const int s = ascending ? i : pp - 1 - i;
      const auto& acts = sch.stages[s];
      StageTimeline& st = out.stages[s];
      double t = clock[s];
      size_t k = pos[s];
      for (; k < acts.size(); ++k) {
        const Action& a = acts[k];
        const int v = a.chunk * pp + s;
        bool blocked = false;
        switch (a.kind) {
          case ActionKind::recv_forward:
          case ActionKind::recv_backward: {
            const bool f = a.kind == ActionKind::recv_forward;
            const double arrival = (f ? fwd : bwd)[size_t(v) * m + a.micro_batch];
            if (arrival < 0) {
              blocked = true;
              break;
            }
            const double wait = std::max(0.0, arrival - t);
            const double transit = std::min(wait, tr(f ? s - 1 : s));
            st.transfer_wait_s += transit;
            st.bubble_s += wait - transit;
            t += wait;
            break;
          }
          case ActionKind::forward: {
            const double d = c.forward(s, a.chunk);
            t += d;
            st.busy_s += d;
            break;
          }
          case ActionKind::backward: {
            const double d = c.backward(s, a.chunk);
            st.last_backward_start_s[a.chunk] = t;
            t += d;
            st.last_backward_end_s[a.chunk] = t;
            st.busy_s += d;
            break;
          }
          case ActionKind::send_forward:
          case ActionKind::send_backward: {
            const bool f = a.kind == ActionKind::send_forward;
            const double d = tr(f ? s : s - 1);
            (f ? fwd : bwd)[size_t(f ? v + 1 : v - 1) * m + a.micro_batch] = t + d;
            if (c.blocking_sends) {
              t += d;
              st.transfer_wait_s += d;
            }
            break;
          }
        }
        if (blocked) break;
      }
      progressed += k - pos[s];
      remaining -= k - pos[s];
      pos[s] = k;
      clock[s] = t;
    }
    if (progressed == 0) throw std::logic_error("pipeline schedule deadlocks in simulation");
    ascending = !ascending;
  }
  for (int s = 0; s < pp; ++s) {
    out.stages[s].finish_s = clock[s];
    out.makespan_s = std::max(out.makespan_s, clock[s]);
  }
  return out;
}

PipelineTimeline extrapolate(const PipelineTimeline& a, const PipelineTimeline& b, double t) {
  MT_ASSERT(a.stages.size() == b.stages.size());
  auto lerp = [t](double x, double y) { return x + (y - x) * t; };
  PipelineTimeline r = a;
  r.makespan_s = lerp(a.makespan_s, b.makespan_s);
  for (size_t s = 0; s < a.stages.size(); ++s) {
    const StageTimeline &x = a.stages[s], &y = b.stages[s];
    StageTimeline& z = r.stages[s];
    z.finish_s = lerp(x.finish_s, y.finish_s);
    z.busy_s = lerp(x.busy_s, y.busy_s);
    z.transfer_wait_s = lerp(x.transfer_wait_s, y.transfer_wait_s);
    z.bubble_s = lerp(x.bubble_s, y.bubble_s);
    for (size_t c = 0; c < x.last_backward_end_s.size(); ++c) {
      z.last_backward_start_s[c] = lerp(x.last_backward_start_s[c], y.last_backward_start_s[c]);
      z.last_backward_end_s[c] = lerp(x.last_backward_end_s[c], y.last_backward_end_s[c]);
    }
  }
  return r;
}

}  // namespace meshtrain::perf
