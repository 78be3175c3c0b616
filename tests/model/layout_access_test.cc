// The indexed accessors of Layout, Unit and TensorMap: each returns the unit,
// parameter or tensor that the name-based description holds, and fails
// loudly (std::logic_error) where a rank holds no such thing.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "meshtrain/model/activations.h"
#include "meshtrain/model/block.h"
#include "meshtrain/model/layout.h"

namespace meshtrain {
namespace {

// 8 layers, hidden 32, 4 heads.
ModelConfig tiny() { return load_model_config("tiny"); }

TEST(LayoutAccess, BlocksByChunkAndIndex) {
  ParallelConfig p;
  p.pp = 2;
  p.vpp = 2;
  const Layout L = Layout::build(tiny(), p, 0, 1);
  // Stage 1 of 2 with 2 chunks: virtual stages 1 and 3, layers 2-3 and 6-7.
  EXPECT_EQ(L.block(0, 0).name, "layers.2");
  EXPECT_EQ(L.block(0, 1).name, "layers.3");
  EXPECT_EQ(L.block(1, 0).name, "layers.6");
  EXPECT_EQ(L.block(1, 1).layer, 7);
  EXPECT_THROW(L.block(0, 2), std::logic_error);
  EXPECT_THROW(L.block(2, 0), std::logic_error);
  EXPECT_THROW(L.word_embedding(), std::logic_error);  // stage 0 holds it
  EXPECT_EQ(L.final_norm().name, "head.lnf");
  EXPECT_EQ(L.output_weight().name, "head.word");
  EXPECT_EQ(&L.units()[L.index(L.final_norm())], &L.final_norm());
}

TEST(LayoutAccess, OutputWeightFollowsTying) {
  ParallelConfig p;
  ModelConfig m = tiny();
  const Layout serial = Layout::build(m, p, 0, 0);
  EXPECT_EQ(&serial.output_weight(), &serial.word_embedding());
  ASSERT_NE(serial.position_embedding(), nullptr);
  EXPECT_EQ(serial.position_embedding()->name, "embedding.position");
  m.tied_embeddings = false;
  m.learned_positions = false;
  const Layout untied = Layout::build(m, p, 0, 0);
  EXPECT_EQ(untied.output_weight().name, "head.output");
  EXPECT_EQ(untied.position_embedding(), nullptr);
}

TEST(LayoutAccess, BlockParametersByIndexMatchTheirNames) {
  ParallelConfig p;
  p.tp = 2;
  const Layout L = Layout::build(tiny(), p, 1, 0);
  const Unit& u = L.block(0, 2);
  EXPECT_EQ(u.param(BlockParam::qkv_weight).name, "layers.2.qkv.weight");
  EXPECT_EQ(u.param(BlockParam::fc2_bias).name, "layers.2.fc2.bias");
  EXPECT_EQ(u.param(BlockParam::qkv_weight).local_rows, 3 * 32 / 2);
  // A GELU block has no up projection.
  EXPECT_EQ(u.find_param(BlockParam::fc_up_weight), nullptr);
  EXPECT_THROW(u.param(BlockParam::fc_up_weight), std::logic_error);
  // Not a block: no block parameters.
  EXPECT_EQ(L.word_embedding().find_param(BlockParam::ln1_weight), nullptr);
}

// tiny-llama (8 heads in 4 key/value groups of head_dim 4, ffn 64, no biases,
// RMSNorm) under TP 2: each rank holds 2 whole groups of qkv rows
// ((4 + 2 x 2) x 4 = 32), gate and up rows adjacent, no bias or norm bias;
// the serial layout holds exactly num_parameters() (padding aside).
TEST(LayoutAccess, LlamaBlockParameters) {
  const ModelConfig m = load_model_config("tiny-llama");
  ParallelConfig p;
  p.tp = 2;
  const Layout L = Layout::build(m, p, 1, 0);
  const Unit& u = L.block(0, 0);
  EXPECT_EQ(u.param(BlockParam::qkv_weight).local_rows, 32);
  EXPECT_EQ(u.param(BlockParam::qkv_weight).row_offset, 32);
  const ParamSpec& gate = u.param(BlockParam::fc_weight);
  const ParamSpec& up = u.param(BlockParam::fc_up_weight);
  EXPECT_EQ(gate.local_rows, 32);
  EXPECT_EQ(up.offset, gate.offset + gate.numel());
  EXPECT_EQ(up.row_offset, 32);
  for (BlockParam b : {BlockParam::ln1_bias, BlockParam::qkv_bias, BlockParam::proj_bias, BlockParam::ln2_bias,
                       BlockParam::fc_bias, BlockParam::fc_up_bias, BlockParam::fc2_bias})
    EXPECT_EQ(u.find_param(b), nullptr) << block_param_name(b);
  EXPECT_EQ(L.final_norm().params.size(), 1u);
  EXPECT_EQ(L.position_embedding(), nullptr);
  EXPECT_EQ(L.output_weight().name, "head.output");
  EXPECT_EQ(Layout::build(m, ParallelConfig{}, 0, 0).unpadded_numel(), m.num_parameters());
}

TEST(LayoutAccess, TensorMapGetFailsForAnAbsentTensor) {
  const std::vector<TensorSpec> specs = {{Act::input, 10, 4}, {Act::qkv, 3, 2}};
  std::vector<char> mem(static_cast<size_t>(allocated_bytes(specs)));
  const TensorMap m(specs, mem.data());
  EXPECT_EQ(m.get<char>(Act::input), mem.data());
  EXPECT_EQ(m.get<char>(Act::qkv), mem.data() + kTensorAlignment);
  EXPECT_EQ(m.find(Act::mid), nullptr);
  EXPECT_THROW(m.get<float>(Act::mid), std::logic_error);
}

TEST(LayoutAccess, RequireBoundNamesAnUnboundStashTensor) {
  ModelConfig m = tiny();
  ParallelConfig p;
  p.micro_batch_size = 1;
  p.recompute = Recompute::selective;
  const auto stash = block_stash(m, p, false);  // no attention output
  std::vector<char> mem(static_cast<size_t>(allocated_bytes(stash)));
  BlockActs<float> a;
  bind_acts(a, TensorMap(stash, mem.data()));
  p.recompute = Recompute::none;
  try {
    require_bound(a, block_stash(m, p, false));
    FAIL() << "an unbound attention output passed";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("attn.out"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace meshtrain
