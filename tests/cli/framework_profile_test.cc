// `predict --framework-profile` costs a layout as `validate` costs a
// published row of that framework: the same prediction, to the last digit.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

// Standard output of `meshtrain <args>` as JSON (null when the command fails).
nlohmann::json run_json(const std::string& args) {
  const fs::path out = fs::temp_directory_path() / ("mt-profile-" + std::to_string(getpid()) + ".json");
  const std::string cmd = std::string(MESHTRAIN_BINARY) + " " + args + " >" + out.string() + " 2>/dev/null";
  const int status = std::system(cmd.c_str());
  std::stringstream ss;
  ss << std::ifstream(out).rdbuf();
  fs::remove(out);
  if (status != 0) return nullptr;
  return nlohmann::json::parse(ss.str());
}

TEST(FrameworkProfileCli, PredictMatchesValidateOfTheSameRow) {
  // 26 layers on 4 stages with the embedding and the head counted (28 items:
  // DeepSpeed's balanced partition, 7 each); the BF16_Optimizer's fp32
  // all-reduce; the profile's efficiency data.
  const fs::path csv = fs::temp_directory_path() / ("mt-profile-" + std::to_string(getpid()) + ".csv");
  std::ofstream(csv) << "id,source,system,layers,hidden,heads,ffn,seq_len,vocab,num_gpus,tp,pp,vpp,zero_stage,"
                        "global_batch,micro_batch,recompute,seq_parallel,flash_attn,tokens_per_s_per_gpu,precision,"
                        "profile\n"
                        "r,s,dgx-a100-80gb,26,2048,16,8192,2048,50304,16,2,4,1,1,64,2,full,no,no,1000,bf16,"
                        "megatron-deepspeed-2022\n";
  const nlohmann::json v = run_json("validate " + csv.string() + " --json");
  fs::remove(csv);
  ASSERT_FALSE(v.is_null());
  const std::string layout =
      "predict --system dgx-a100-80gb --num-gpus 16 --num-layers 26 --hidden-size 2048 --num-attention-heads 16 "
      "--ffn-hidden-size 8192 --seq-length 2048 --vocab-size 50304 --tensor-model-parallel-size 2 "
      "--pipeline-model-parallel-size 4 --zero-stage 1 --recompute-granularity full --micro-batch-size 2 "
      "--global-batch-size 64 --bf16 --json";
  // validate fills the row's blank counting with the profile's recipe (the
  // embedding and the head counted); predict takes the counting it is given.
  const nlohmann::json p = run_json(layout +
                                    " --pipeline-layer-counting embedding-head"
                                    " --framework-profile megatron-deepspeed-2022");
  ASSERT_FALSE(p.is_null());
  EXPECT_EQ(p["config"]["pipeline_stage_partition"], "balanced");
  EXPECT_EQ(p["framework_profile"], "megatron-deepspeed-2022");
  EXPECT_EQ(v["rows"][0]["filled"]["stage_counting"], "embedding-head");
  EXPECT_DOUBLE_EQ(p["tokens_per_s"].get<double>(), v["rows"][0]["prediction"]["tokens_per_s"].get<double>());
  EXPECT_DOUBLE_EQ(p["memory_bytes_per_gpu"]["total"].get<double>(),
                   v["rows"][0]["prediction"]["memory_bytes_per_gpu"]["total"].get<double>());
  const nlohmann::json blocks = run_json(layout + " --framework-profile megatron-deepspeed-2022");
  ASSERT_FALSE(blocks.is_null());
  EXPECT_EQ(blocks["config"]["pipeline_stage_partition"], "balanced");
  // The engine (no profile) refuses 26 layers on 4 stages.
  EXPECT_TRUE(run_json(layout).is_null());
}

}  // namespace

namespace {

// Standard output of `meshtrain <args>` as text.
std::string run_text(const std::string& args) {
  const fs::path out = fs::temp_directory_path() / ("mt-profile-" + std::to_string(getpid()) + ".txt");
  const std::string cmd = std::string(MESHTRAIN_BINARY) + " " + args + " >" + out.string() + " 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) return "";
  std::stringstream ss;
  ss << std::ifstream(out).rdbuf();
  fs::remove(out);
  return ss.str();
}

// The text report: a CP line under the step's breakdown only with CP; the
// throughput interval only where the system file states its error.
TEST(FrameworkProfileCli, PredictTextShowsCpCommAndTheIntervalWhereTheyApply) {
  const std::string cp = run_text(
      "predict --model llama3-8b --seq-length 32768 --max-position-embeddings 32768 --system dgx-h100 "
      "--num-gpus 8 --tensor-model-parallel-size 2 --context-parallel-size 4 --global-batch-size 4 --bf16 "
      "--use-flash-attn --sequence-parallel --zero-stage 1 --recompute-granularity full "
      "--framework-profile megatron-core-2024");
  ASSERT_FALSE(cp.empty());
  EXPECT_NE(cp.find("  cp comm "), std::string::npos) << cp;
  EXPECT_NE(cp.find("  interval "), std::string::npos) << cp;
  EXPECT_LT(cp.find("  cp comm "), cp.find("throughput")) << cp;
  const std::string local = run_text("predict --model tiny --system local --num-gpus 2 --tensor-model-parallel-size 2");
  ASSERT_FALSE(local.empty());
  EXPECT_EQ(local.find("  cp comm "), std::string::npos) << local;
  EXPECT_EQ(local.find("  interval "), std::string::npos) << local;
}

}  // namespace

namespace {

// --data-parallel-shard-size: hybrid sharding priced under a profile that
// has it, shown in the layout line, refused under one that has not.
TEST(FrameworkProfileCli, PredictPricesHybridShardingUnderAProfileThatHasIt) {
  const std::string layout =
      "predict --model llama2-7b --system ibm-a100-80gb-400g --num-gpus 128 --micro-batch-size 2 --zero-stage 3 "
      "--bf16 --use-flash-attn --data-parallel-shard-size 8";
  const nlohmann::json j = run_json(layout + " --framework-profile torchtitan-2024 --json");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["config"]["data_parallel_shard_size"], 8);
  const std::string text = run_text(layout + " --framework-profile torchtitan-2024");
  EXPECT_NE(text.find("dp=128 (shard 8 x replicate 16)"), std::string::npos) << text;
  EXPECT_TRUE(run_json(layout + " --framework-profile megatron-core-2024 --json").is_null());  // no hybrid sharding
  EXPECT_FALSE(run_json(layout + " --json").is_null());  // this project's engine runs it
}

}  // namespace
