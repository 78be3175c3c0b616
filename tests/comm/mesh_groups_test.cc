#include "meshtrain/comm/mesh_groups.h"

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"

namespace meshtrain {
namespace {

using Groups = std::vector<std::vector<int>>;

ParallelConfig shape(int tp, int dp, int pp) {
  ParallelConfig p;
  p.tp = tp;
  p.dp = dp;
  p.pp = pp;
  return p;
}

// Megatron-LM's documented example: 16 GPUs, tp 2, pp 4 (dp 2).
TEST(MeshGroups, MegatronSixteenGpuExample) {
  const ParallelConfig p = shape(2, 2, 4);
  EXPECT_EQ(mesh_groups(p, GroupKind::tp),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(mesh_groups(p, GroupKind::dp),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(mesh_groups(p, GroupKind::pp), (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(mesh_groups(p, GroupKind::embedding), (Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}}));
  EXPECT_EQ(mesh_groups(p, GroupKind::mp), (Groups{{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15}}));
  EXPECT_EQ(mesh_groups(p, GroupKind::world).size(), 1u);
  EXPECT_EQ(mesh_groups(p, GroupKind::world)[0].size(), 16u);
}

TEST(MeshGroups, EmbeddingWithoutPipelineIsTheRankItself) {
  const ParallelConfig p = shape(2, 2, 1);
  EXPECT_EQ(mesh_groups(p, GroupKind::embedding), (Groups{{0}, {1}, {2}, {3}}));
  EXPECT_EQ(mesh_group_of(p, GroupKind::embedding, 3), (std::vector<int>{3}));
}

TEST(MeshGroups, EveryRankIsInExactlyOneGroupOfEachKind) {
  for (auto [tp, dp, pp] : {std::tuple{1, 1, 1}, {2, 1, 4}, {4, 2, 1}, {1, 8, 1}, {2, 3, 2}}) {
    const ParallelConfig p = shape(tp, dp, pp);
    for (GroupKind k : {GroupKind::tp, GroupKind::dp, GroupKind::pp, GroupKind::mp, GroupKind::world}) {
      std::vector<int> seen(p.world(), 0);
      for (const auto& g : mesh_groups(p, k))
        for (int r : g) ++seen[r];
      for (int r = 0; r < p.world(); ++r) EXPECT_EQ(seen[r], 1) << group_name(k) << " rank " << r;
    }
  }
}

TEST(MeshGroups, MiddleStageHasNoEmbeddingGroup) {
  const ParallelConfig p = shape(1, 1, 4);
  EXPECT_TRUE(mesh_group_of(p, GroupKind::embedding, 1).empty());
  EXPECT_EQ(mesh_group_of(p, GroupKind::embedding, 3), (std::vector<int>{0, 3}));
}

TEST(MeshGroups, Names) {
  for (int i = 0; i < kNumGroupKinds; ++i) {
    const auto k = static_cast<GroupKind>(i);
    EXPECT_EQ(parse_group_kind(group_name(k)), k);
  }
  EXPECT_THROW(parse_group_kind("sp"), Error);
}

TEST(MeshGroups, DescribeListsGroups) {
  const std::string d = describe_mesh(shape(2, 2, 2));
  EXPECT_NE(d.find("world 8 = tp 2 x dp 2 x pp 2"), std::string::npos) << d;
  EXPECT_NE(d.find("tp groups (4):"), std::string::npos) << d;
  EXPECT_NE(d.find("[0 1] [2 3] [4 5] [6 7]"), std::string::npos) << d;
  EXPECT_NE(d.find("dp groups (4):"), std::string::npos) << d;
  EXPECT_NE(d.find("[0 2] [1 3] [4 6] [5 7]"), std::string::npos) << d;
  EXPECT_NE(d.find("pp groups (4):"), std::string::npos) << d;
  EXPECT_NE(d.find("[0 4] [1 5] [2 6] [3 7]"), std::string::npos) << d;
  const std::string cut = describe_mesh(shape(1, 100, 1), 3);
  EXPECT_NE(cut.find("[0] [1] [2] ... (97 more)"), std::string::npos) << cut;
}

}  // namespace
}  // namespace meshtrain
