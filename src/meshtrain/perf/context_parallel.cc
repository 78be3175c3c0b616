#include "meshtrain/perf/context_parallel.h"

namespace meshtrain::perf {

CostView cost_view(const ModelConfig& m, const ParallelConfig& p) {
  CostView v{m, p};
  if (p.cp == 1) return v;
  v.model.max_position_embeddings = m.max_positions();  // the table stays whole
  v.model.seq_length = m.seq_length / p.cp;
  v.parallel.dp = p.dp * p.cp;
  if (p.zero_shard > 0) v.parallel.zero_shard = p.zero_shard * p.cp;  // torchtitan's dp_shard x cp mesh
  v.parallel.global_batch_size = p.global_batch_size * p.cp;
  return v;
}

double kv_chunk_bytes(const ModelConfig& m, const ParallelConfig& p) {
  const double tokens = double(p.micro_batch_size) * m.seq_length;
  return 2 * tokens * double(m.kv_heads()) * m.head_dim() / p.tp * (p.bf16 ? 2 : 4);
}

}  // namespace meshtrain::perf
