// Trial: one short training run of one layout and what came of it, as a
// line of the results file (results_file.h) records it.
//   status  "ok"         ran; tokens_per_s and memory_bytes are measured
//           "oom"        ran out of memory (the job said so)
//           "failed"     exited non-zero or wrote no report (reason: the exit
//                        code and the log's last error line)
//           "timeout"    killed after the trial time-out
//           "invalid"    refused before launch by validate() (reason: its message)
//           "no_fit"     not launched: the performance model says it does not fit
// Only "ok" trials are feasible; every other status carries its reason.
// `key` names the layout (describe() of the planner), so the same layout
// run twice (a repeat) shares it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain::tune {

struct Trial {
  ParallelConfig config;
  std::string key;
  std::string status;
  std::string reason;
  double tokens_per_s = 0;    // median over the measured iterations (the first excluded)
  double memory_bytes = 0;    // tracked peak of the most loaded rank
  double wall_s = 0;          // the job's wall time, launch included
  double predicted_tokens_per_s = 0;  // the model's figure when it was asked (0: not)
  std::string strategy;
  std::string commit;         // the meshtrain revision that ran it
  bool ok() const { return status == "ok"; }
};

std::string layout_key(const ParallelConfig& p);

void to_json(nlohmann::json& j, const Trial& t);
void from_json(const nlohmann::json& j, Trial& t);

}  // namespace meshtrain::tune
