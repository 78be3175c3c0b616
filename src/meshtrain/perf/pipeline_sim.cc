#include "meshtrain/perf/pipeline_sim.h"

#include <algorithm>
#include <stdexcept>

#include "meshtrain/core/error.h"

namespace meshtrain::perf {

namespace {

// Walks the stages' action lists in alternating sweeps, each stage as far as
// its data allow, with one clock per stage.
class Walk {
 public:
  Walk(const Schedule& sch, const PipelineCosts& c)
      : sch_(sch), c_(c), pp_(sch.pp), m_(sch.num_micro_batches), fwd_(buffer(0)), bwd_(buffer(1)),
        pos_(pp_, 0), clock_(pp_, 0.0) {
    const int nv = pp_ * sch.vpp;
    fwd_.assign(size_t(nv) * m_, -1.0);
    bwd_.assign(size_t(nv) * m_, -1.0);
    out_.stages.resize(pp_);
    for (auto& st : out_.stages) {
      st.last_backward_start_s.assign(sch.vpp, 0.0);
      st.last_backward_end_s.assign(sch.vpp, 0.0);
    }
  }

  PipelineTimeline run() {
    size_t remaining = 0;
    for (const auto& a : sch_.stages) remaining += a.size();
    bool ascending = true;
    while (remaining > 0) {
      size_t progressed = 0;
      for (int i = 0; i < pp_; ++i) progressed += advance(ascending ? i : pp_ - 1 - i);
      if (progressed == 0) throw std::logic_error("pipeline schedule deadlocks in simulation");
      remaining -= progressed;
      ascending = !ascending;
    }
    for (int s = 0; s < pp_; ++s) {
      out_.stages[s].finish_s = clock_[s];
      out_.makespan_s = std::max(out_.makespan_s, clock_[s]);
    }
    return std::move(out_);
  }

 private:
  // Reused across calls: a planner simulates thousands of schedules.
  static std::vector<double>& buffer(int which) {
    thread_local std::vector<double> b[2];
    return b[which];
  }

  double transfer(int boundary) const { return pp_ > 1 ? c_.transfer_s[(boundary + pp_) % pp_] : 0.0; }

  // Runs stage s's actions until one waits for data not yet sent; returns
  // how many ran.
  size_t advance(int s) {
    const auto& acts = sch_.stages[s];
    StageTimeline& st = out_.stages[s];
    double t = clock_[s];
    size_t k = pos_[s];
    while (k < acts.size() && act(acts[k], s, st, t)) ++k;
    const size_t ran = k - pos_[s];
    pos_[s] = k;
    clock_[s] = t;
    return ran;
  }

  // One action at time t; false (t unchanged) if it must wait.
  bool act(const Action& a, int s, StageTimeline& st, double& t) {
    const int v = a.chunk * pp_ + s;
    switch (a.kind) {
      case ActionKind::recv_forward:
      case ActionKind::recv_backward:
        return receive(a, s, v, st, t);
      case ActionKind::forward:
      case ActionKind::backward:
        compute(a, s, st, t);
        return true;
      case ActionKind::send_forward:
      case ActionKind::send_backward:
        send(a, s, v, st, t);
        return true;
    }
    return true;
  }

  // False if the data have not been sent yet. Waiting for data in transit
  // counts as transfer wait, the rest as bubble.
  bool receive(const Action& a, int s, int v, StageTimeline& st, double& t) const {
    const bool f = a.kind == ActionKind::recv_forward;
    const double arrival = (f ? fwd_ : bwd_)[size_t(v) * m_ + a.micro_batch];
    if (arrival < 0) return false;
    const double wait = std::max(0.0, arrival - t);
    const double transit = std::min(wait, transfer(f ? s - 1 : s));
    st.transfer_wait_s += transit;
    st.bubble_s += wait - transit;
    t += wait;
    return true;
  }

  void compute(const Action& a, int s, StageTimeline& st, double& t) const {
    if (a.kind == ActionKind::forward) {
      const double d = c_.forward(s, a.chunk);
      t += d;
      st.busy_s += d;
      return;
    }
    const double d = c_.backward(s, a.chunk);
    st.last_backward_start_s[a.chunk] = t;
    t += d;
    st.last_backward_end_s[a.chunk] = t;
    st.busy_s += d;
  }

  void send(const Action& a, int s, int v, StageTimeline& st, double& t) {
    const bool f = a.kind == ActionKind::send_forward;
    const double d = transfer(f ? s : s - 1);
    (f ? fwd_ : bwd_)[size_t(f ? v + 1 : v - 1) * m_ + a.micro_batch] = t + d;
    if (c_.blocking_sends) {
      t += d;
      st.transfer_wait_s += d;
    }
  }

  const Schedule& sch_;
  const PipelineCosts& c_;
  const int pp_, m_;
  // Arrival time of the activation entering virtual stage v (fwd) and of the
  // gradient entering virtual stage v (bwd), per micro-batch; < 0: not sent.
  std::vector<double>& fwd_;
  std::vector<double>& bwd_;
  std::vector<size_t> pos_;
  std::vector<double> clock_;
  PipelineTimeline out_;
};

}  // namespace

PipelineTimeline simulate(const Schedule& sch, const PipelineCosts& c) {
  MT_ASSERT(c.pp == sch.pp && c.vpp == sch.vpp);
  MT_ASSERT(int(c.forward_s.size()) == sch.pp * sch.vpp && int(c.backward_s.size()) == sch.pp * sch.vpp);
  MT_ASSERT(sch.pp == 1 || int(c.transfer_s.size()) == sch.pp);
  return Walk(sch, c).run();
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
