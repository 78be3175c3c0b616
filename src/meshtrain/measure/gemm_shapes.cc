#include "meshtrain/measure/gemm_shapes.h"

#include "meshtrain/core/error.h"
#include "meshtrain/model/activations.h"
#include "meshtrain/parallel/parallel_config.h"

namespace meshtrain {

std::vector<GemmShape> layer_gemm_shapes(const ModelConfig& m, int tp, int micro_batch, bool bf16) {
  check(tp >= 1 && micro_batch >= 1, "tp and micro-batch size must be positive");
  check(m.num_attention_heads % tp == 0 && m.kv_heads() % tp == 0,
        "num-attention-heads {} (kv heads {}) is not divisible by tp {}", m.num_attention_heads, m.kv_heads(), tp);
  check(m.ffn() % tp == 0, "ffn-hidden-size {} is not divisible by tp {}", m.ffn(), tp);
  check(m.padded_vocab() % tp == 0, "padded vocabulary {} is not divisible by tp {}", m.padded_vocab(), tp);
  ParallelConfig p;
  p.tp = tp;
  p.micro_batch_size = micro_batch;
  p.global_batch_size = micro_batch;
  p.bf16 = bf16;
  const int M = micro_batch * m.seq_length, h = m.hidden_size, hd = m.head_dim();
  const int qkv = (m.num_attention_heads + 2 * m.kv_heads()) * hd / tp;
  const int rows = static_cast<int>(head_logits_rows(m, p));
  std::vector<GemmShape> out{
      {"qkv", tp, micro_batch, M, h, qkv, 1},
      {"proj", tp, micro_batch, M, h / tp, h, 1},
      {"fc", tp, micro_batch, M, h, m.ffn() / tp, 1},
      {"fc2", tp, micro_batch, M, m.ffn() / tp, h, 1},
      {"logits", tp, micro_batch, rows, h, static_cast<int>(m.padded_vocab() / tp), (M + rows - 1) / rows},
  };
  return out;
}

}  // namespace meshtrain
