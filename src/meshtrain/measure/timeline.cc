#include "meshtrain/measure/timeline.h"

#include <algorithm>

#include <fmt/format.h>

#include "meshtrain/measure/trace.h"

namespace meshtrain {

namespace {

bool is_compute(ActionKind k) { return k == ActionKind::forward || k == ActionKind::backward; }

ComputeSpan span_of(const std::vector<Action>& acts, double start, double end) {
  ComputeSpan s;
  bool f = false, b = false;
  std::string list;
  for (const Action& a : acts) {
    (a.kind == ActionKind::forward ? f : b) = true;
    if (!list.empty()) list += ' ';
    list += fmt::format("{}{}.{}", a.kind == ActionKind::forward ? 'F' : 'B', a.micro_batch, a.chunk);
  }
  s.name = f && b ? "forward+backward" : f ? "forward" : "backward";
  s.start_s = start;
  s.end_s = std::max(start, end);
  s.args = {{"actions", list}};
  if (acts.size() == 1) {
    s.args["micro_batch"] = acts[0].micro_batch;
    s.args["chunk"] = acts[0].chunk;
  }
  return s;
}

}  // namespace

std::vector<ComputeSpan> compute_spans(const std::vector<Action>& actions, const std::vector<TimedCall>& p2p,
                                       double t0, double t1) {
  const size_t n_p2p = std::count_if(actions.begin(), actions.end(), [](const Action& a) { return !is_compute(a.kind); });
  std::vector<ComputeSpan> out;
  if (n_p2p != p2p.size()) {
    std::vector<Action> all;
    for (const Action& a : actions)
      if (is_compute(a.kind)) all.push_back(a);
    if (!all.empty()) out.push_back(span_of(all, t0, t1));
    return out;
  }
  double cur = t0;
  size_t k = 0;
  std::vector<Action> pending;
  for (const Action& a : actions) {
    if (is_compute(a.kind)) {
      pending.push_back(a);
      continue;
    }
    const TimedCall& c = p2p[k++];
    if (!pending.empty()) out.push_back(span_of(pending, cur, c.start_s));
    pending.clear();
    cur = c.blocking ? c.end_s : c.start_s;
  }
  if (!pending.empty()) out.push_back(span_of(pending, cur, t1));
  return out;
}

void StepTracer::on_comm(const CommEvent& e) {
  if (writer_) writer_->on_comm(e);
  if (e.group != "pp") return;
  switch (e.op) {
    case CommOp::send:
    case CommOp::recv: p2p_.push_back(TimedCall{e.start_s, e.end_s, true}); break;
    case CommOp::isend:
    case CommOp::irecv: p2p_.push_back(TimedCall{e.start_s, e.end_s, false}); break;
    default: break;
  }
}

std::vector<TimedCall> StepTracer::take_p2p() {
  std::vector<TimedCall> out = std::move(p2p_);
  p2p_.clear();
  std::stable_sort(out.begin(), out.end(), [](const TimedCall& a, const TimedCall& b) { return a.start_s < b.start_s; });
  return out;
}

}  // namespace meshtrain
