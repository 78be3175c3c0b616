#include "meshtrain/tune/trial.h"

#include "meshtrain/tune/planner.h"

namespace meshtrain::tune {

std::string layout_key(const ParallelConfig& p) { return describe(p); }

void to_json(nlohmann::json& j, const Trial& t) {
  j = nlohmann::json{{"key", t.key},
                     {"config", t.config},
                     {"status", t.status},
                     {"reason", t.reason},
                     {"tokens_per_s", t.tokens_per_s},
                     {"memory_bytes", t.memory_bytes},
                     {"wall_s", t.wall_s},
                     {"predicted_tokens_per_s", t.predicted_tokens_per_s},
                     {"strategy", t.strategy},
                     {"commit", t.commit}};
}

void from_json(const nlohmann::json& j, Trial& t) {
  t.config = j.at("config").get<ParallelConfig>();
  t.key = j.value("key", layout_key(t.config));
  t.status = j.at("status").get<std::string>();
  t.reason = j.value("reason", "");
  t.tokens_per_s = j.value("tokens_per_s", 0.0);
  t.memory_bytes = j.value("memory_bytes", 0.0);
  t.wall_s = j.value("wall_s", 0.0);
  t.predicted_tokens_per_s = j.value("predicted_tokens_per_s", 0.0);
  t.strategy = j.value("strategy", "");
  t.commit = j.value("commit", "");
}

}  // namespace meshtrain::tune
