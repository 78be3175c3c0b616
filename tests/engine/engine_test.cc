// The serial engine against independent references: whole-model gradients
// against double-precision finite differences, memorisation of a small
// batch, bitwise reproducibility, bf16 against fp32, and the allocator's
// accounting against the closed form.
#include <cmath>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "meshtrain/core/memory.h"
#include "meshtrain/data/token_file.h"
#include "meshtrain/parallel/pipeline_engine.h"
#include "meshtrain/train/trainer.h"
#include "reference_gpt.h"

namespace meshtrain {
namespace {

ModelConfig small_model() {
  ModelConfig m;
  m.name = "gradcheck";
  m.num_layers = 2;
  m.hidden_size = 16;
  m.num_attention_heads = 2;
  m.seq_length = 8;
  m.max_position_embeddings = 8;
  m.vocab_size = 40;
  return m;
}

// One train step's gradients against central differences of the double
// reference loss, on a sample of every tensor's elements.
void check_model_gradient(const ModelConfig& m) {
  ParallelConfig p;
  p.micro_batch_size = 2;
  p.global_batch_size = 2;
  ProcessMesh mesh(p);
  PipelineEngine<float> eng(m, p, mesh, 7);
  const int N = 2 * m.seq_length;
  std::mt19937 rng(3);
  std::vector<int32_t> tok(N), tgt(N);
  for (int i = 0; i < N; ++i) tok[i] = rng() % m.vocab_size, tgt[i] = rng() % m.vocab_size;
  const StepStats st = eng.train_step(StepBatch{tok.data(), tgt.data(), 1}, 1.0f / N);

  testing::Weights W;
  for (const Unit& u : eng.layout().units())
    for (const ParamSpec& s : u.params) {
      const float* w = eng.state().weights(u) + (s.offset - u.offset);
      W[s.name].assign(w, w + s.numel());
    }
  const std::vector<int> tv(tok.begin(), tok.end()), gv(tgt.begin(), tgt.end());
  const double ref = testing::reference_loss(m, W, tv, gv, 2);
  EXPECT_NEAR(st.loss_sum / st.loss_tokens, ref, 1e-5 * ref);

  // Central differences in double, on a sample of every tensor's elements.
  const double eps = 1e-5;
  int checked = 0;
  double worst = 0;
  for (const Unit& u : eng.layout().units()) {
    const float* g = eng.state().grads(u);
    for (const ParamSpec& s : u.params) {
      std::vector<double>& w = W[s.name];
      for (int64_t i : {int64_t{0}, s.numel() / 3, s.numel() / 2, 2 * s.numel() / 3, s.numel() - 1}) {
        if ((s.name == "embedding.word" || s.name == "head.output") && i / m.hidden_size >= m.vocab_size)
          continue;  // padding rows
        const double keep = w[i];
        w[i] = keep + eps;
        const double lp = testing::reference_loss(m, W, tv, gv, 2);
        w[i] = keep - eps;
        const double lm = testing::reference_loss(m, W, tv, gv, 2);
        w[i] = keep;
        const double fd = (lp - lm) / (2 * eps);
        const double an = g[s.offset - u.offset + i];
        // fp32 forward/backward against a double reference: 1e-3 relative,
        // with an absolute floor well below the typical gradient (1e-2).
        EXPECT_NEAR(an, fd, 1e-3 * std::abs(fd) + 2e-6) << m.name << " " << s.name << "[" << i << "]";
        worst = std::max(worst, std::abs(an - fd) / (std::abs(fd) + 1e-6));
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 60);
  ::testing::Test::RecordProperty("worst_relative_error_" + m.name, std::to_string(worst));
}

TEST(ModelGradient, MatchesDoublePrecisionFiniteDifferences) { check_model_gradient(small_model()); }

// Llama blocks: RMSNorm, SwiGLU, rotary positions, grouped-query attention
// (2 query heads per key/value head), untied output, no biases.
TEST(ModelGradient, LlamaMatchesDoublePrecisionFiniteDifferences) {
  ModelConfig m = small_model();
  m.name = "gradcheck-llama";
  m.num_attention_heads = 4;
  m.num_kv_heads = 2;
  m.ffn_hidden_size = 24;
  m.gated_mlp = true;
  m.rmsnorm = true;
  m.set_position_embedding_type("rope");
  m.tied_embeddings = false;
  m.bias_linear = false;
  m.validate();
  check_model_gradient(m);
  // The mixed forms: SwiGLU with biases (the gate and up biases adjacent),
  // LayerNorm, multi-query attention, rotary base 500000, tied output.
  m.name = "gradcheck-mixed";
  m.num_kv_heads = 1;
  m.rmsnorm = false;
  m.bias_linear = true;
  m.tied_embeddings = true;
  m.rotary_base = 500000;
  m.validate();
  check_model_gradient(m);
}

// Llama 3.1's rope scaling, its bands placed so that the head's 4 frequency
// pairs fall in all three (kept, interpolated, divided), and a norm epsilon
// of 0.05 that weighs against the activations' mean square.
TEST(ModelGradient, RopeScalingAndNormEpsilonMatchDoubleReference) {
  ModelConfig m = small_model();
  m.name = "gradcheck-llama31";
  m.num_attention_heads = 2;
  m.num_kv_heads = 1;
  m.gated_mlp = true;
  m.rmsnorm = true;
  m.set_position_embedding_type("rope");
  m.rotary_base = 100;  // hd 8: inv_freq 1, 0.316, 0.1, 0.0316; wavelengths 6.3, 20, 63, 199
  m.rope_scaling = RopeScaling{RopeScaling::Type::llama3, 4.0, 1.0, 4.0, 64};  // bands 16 and 64
  m.norm_epsilon = 0.05;
  m.bias_linear = false;
  m.validate();
  check_model_gradient(m);
  m.name = "gradcheck-linear";
  m.rope_scaling = RopeScaling{RopeScaling::Type::linear, 2.0};
  m.rmsnorm = false;
  m.bias_linear = true;
  m.validate();
  check_model_gradient(m);
}

std::string write_tokens(const std::string& name, int n, int vocab, unsigned seed) {
  const auto dir = std::filesystem::temp_directory_path() / ("meshtrain-engine-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  std::vector<uint16_t> t(n);
  for (auto& x : t) x = static_cast<uint16_t>(rng() % vocab);
  const auto path = (dir / name).string();
  data::write_token_file(path, t);
  return path;
}

TrainOptions tiny_options() {
  TrainOptions o;
  o.model = load_model_config("tiny");
  o.parallel.micro_batch_size = 2;
  o.parallel.global_batch_size = 2;
  o.quiet = true;
  o.seed = 11;
  return o;
}

// Two sequences of 16 tokens, the whole data set, seen every step.
TrainOptions overfit_options(int iters) {
  TrainOptions o = tiny_options();
  o.data_path = write_tokens("overfit.bin", 2 * o.model.seq_length + 1, o.model.vocab_size, 5);
  o.train_iters = iters;
  o.lr = LrSchedule{3e-3f, 3e-4f, 10, iters};
  o.adam.weight_decay = 0;
  return o;
}

TEST(Training, OverfitsOneBatchToNearZeroLoss) {
  const TrainOptions o = overfit_options(200);
  ProcessMesh mesh(o.parallel);
  const TrainResult r = train(o, mesh);
  ASSERT_EQ(r.losses.size(), 200u);
  EXPECT_GT(r.losses.front(), 5.0);  // ln(200) = 5.30 at initialisation
  EXPECT_LT(r.losses.back(), 0.05);
  RecordProperty("final_loss", std::to_string(r.losses.back()));
}

TEST(Training, SameSeedIsBitwiseReproducible) {
  TrainOptions o = tiny_options();
  o.mock_data = true;
  o.train_iters = 4;
  ProcessMesh mesh(o.parallel);
  const TrainResult a = train(o, mesh);
  const TrainResult b = train(o, mesh);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.grad_norms, b.grad_norms);
  o.seed = 12;
  const TrainResult c = train(o, mesh);
  EXPECT_NE(a.losses, c.losses);
}

// bf16 weights, activations and matmuls with fp32 master weights, gradients
// and moments follow the fp32 run: within 2% (plus 0.02 absolute) of the
// fp32 loss at every one of 60 memorisation steps.
TEST(Training, Bf16TracksFp32) {
  TrainOptions o = overfit_options(60);
  ProcessMesh mesh(o.parallel);
  const TrainResult f = train(o, mesh);
  o.parallel.bf16 = true;
  const TrainResult b = train(o, mesh);
  ASSERT_EQ(f.losses.size(), b.losses.size());
  double worst = 0;
  for (size_t i = 0; i < f.losses.size(); ++i) {
    EXPECT_NEAR(b.losses[i], f.losses[i], 0.02 + 0.02 * f.losses[i]) << "iteration " << i;
    worst = std::max(worst, std::abs(b.losses[i] - f.losses[i]));
  }
  EXPECT_LT(f.losses.back(), 0.5 * f.losses.front());  // it did learn
  RecordProperty("worst_abs_loss_gap", std::to_string(worst));
}

// The same for the tiny Llama (RMSNorm, SwiGLU, rotary, grouped-query
// attention, untied, no biases): bf16 within 2% (plus 0.02) of fp32 at each
// of 40 memorisation steps, and the loss at least halves.
TEST(Training, LlamaBf16TracksFp32) {
  TrainOptions o = overfit_options(40);
  o.model = load_model_config("tiny-llama");
  ProcessMesh mesh(o.parallel);
  const TrainResult f = train(o, mesh);
  o.parallel.bf16 = true;
  const TrainResult b = train(o, mesh);
  ASSERT_EQ(f.losses.size(), b.losses.size());
  for (size_t i = 0; i < f.losses.size(); ++i)
    EXPECT_NEAR(b.losses[i], f.losses[i], 0.02 + 0.02 * f.losses[i]) << "iteration " << i;
  EXPECT_LT(f.losses.back(), 0.5 * f.losses.front());
}

// Parameter, gradient and optimizer bytes equal the closed form: 16 bytes a
// parameter in fp32 (4 + 4 + 4 + 4), 18 in bf16 mixed precision
// (2 + 4 + 4 master + 4 + 4), over the padded flat layout.
TEST(Memory, StateBytesMatchClosedForm) {
  const ModelConfig m = load_model_config("tiny");
  for (bool mixed : {false, true}) {
    for (int zero = 0; zero <= 3; ++zero) {
      ParallelConfig p;
      p.bf16 = mixed;
      p.zero_stage = zero;
      ProcessMesh mesh(p);
      const MemorySnapshot before = MemoryTracker::global().snapshot();
      auto run = [&](auto tag) {
        using T = decltype(tag);
        PipelineEngine<T> eng(m, p, mesh, 1);
        const MemorySnapshot after = MemoryTracker::global().snapshot();
        auto delta = [&](MemCategory c) { return after.current[int(c)] - before.current[int(c)]; };
        const int64_t n = eng.layout().numel();
        const StateBytes sb = eng.layout().state_bytes(zero, mixed);
        EXPECT_EQ(delta(MemCategory::parameters), sb.parameters);
        EXPECT_EQ(delta(MemCategory::gradients), sb.gradients);
        EXPECT_EQ(delta(MemCategory::optimizer), sb.optimizer);
        EXPECT_EQ(sb.parameters + sb.gradients + sb.optimizer, (mixed ? 18 : 16) * n);
        // Padding: each unit rounds up to 16 elements at most.
        EXPECT_GE(n, m.num_parameters());
        EXPECT_LT(n - m.num_parameters(), 16 * int64_t(eng.layout().units().size()));
      };
      if (mixed)
        run(bf16{});
      else
        run(float{});
    }
  }
}

}  // namespace
}  // namespace meshtrain
