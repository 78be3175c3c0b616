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

nlohmann::json timeline_iteration_json(int iteration, double origin_s, const std::vector<ActionTime>& actions) {
  nlohmann::json list = nlohmann::json::array();
  for (const ActionTime& t : actions)
    list.push_back({{"kind", action_kind_name(t.action.kind)},
                    {"micro_batch", t.action.micro_batch},
                    {"chunk", t.action.chunk},
                    {"start_s", t.start_s - origin_s},
                    {"end_s", t.end_s - origin_s}});
  return {{"iteration", iteration}, {"actions", std::move(list)}};
}

}  // namespace meshtrain
