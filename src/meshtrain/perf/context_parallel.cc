#include "meshtrain/perf/context_parallel.h"

namespace meshtrain::perf {

CostView cost_view(const ModelConfig& m, const ParallelConfig& p) {
  CostView v{m, p};
  if (p.cp == 1) return v;
  v.model.max_position_embeddings = m.max_positions();  // the table stays whole
  v.model.seq_length = m.seq_length / p.cp;
  v.parallel.dp = p.dp * p.cp;
  v.parallel.global_batch_size = p.global_batch_size * p.cp;
  return v;
}

}  // namespace meshtrain::perf
