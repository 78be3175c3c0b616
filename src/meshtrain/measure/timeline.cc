#include "meshtrain/measure/timeline.h"

#include <fmt/format.h>

namespace meshtrain {

std::vector<ComputeSpan> compute_spans(const std::vector<ActionTime>& actions) {
  std::vector<ComputeSpan> out;
  for (const ActionTime& t : actions) {
    const Action& a = t.action;
    if (a.kind != ActionKind::forward && a.kind != ActionKind::backward) continue;
    const bool fwd = a.kind == ActionKind::forward;
    out.push_back(ComputeSpan{fwd ? "forward" : "backward", t.start_s, t.end_s,
                              {{"action", fmt::format("{}{}.{}", fwd ? 'F' : 'B', a.micro_batch, a.chunk)},
                               {"micro_batch", a.micro_batch},
                               {"chunk", a.chunk}}});
  }
  return out;
}

}  // namespace meshtrain
