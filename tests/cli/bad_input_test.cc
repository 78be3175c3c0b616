// Bad input to `meshtrain train`: one clear line on stderr naming the
// problem and a non-zero exit, before any large allocation (the checks run
// first, so even a trillion-parameter shape fails in well under a second).
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int exit_code = 0;
  std::vector<std::string> err_lines;
  double seconds = 0;
};

Outcome run(const std::string& args, const std::string& launcher = "") {
  const fs::path err = fs::temp_directory_path() / ("mt-cli-" + std::to_string(getpid()) + ".err");
  const std::string cmd = "OMP_NUM_THREADS=1 " + launcher + " " + MESHTRAIN_BINARY + " " + args + " >/dev/null 2>" +
                          err.string();
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  Outcome o;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  std::ifstream f(err);
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) o.err_lines.push_back(line);
  fs::remove(err);
  return o;
}

fs::path scratch() {
  const fs::path d = fs::temp_directory_path() / ("mt-cli-data-" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

// llm.c token file: 256 int32 header (magic, version, count), uint16 tokens.
void write_raw(const fs::path& p, int32_t magic, int32_t version, int32_t count, const std::vector<uint16_t>& toks) {
  std::array<int32_t, 256> h{};
  h[0] = magic;
  h[1] = version;
  h[2] = count;
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(h.data()), sizeof(h));
  f.write(reinterpret_cast<const char*>(toks.data()), toks.size() * 2);
}

void expect_one_line_error(const Outcome& o, const std::string& needle) {
  EXPECT_NE(o.exit_code, 0);
  ASSERT_EQ(o.err_lines.size(), 1u) << (o.err_lines.empty() ? "" : o.err_lines[0] + " ...");
  EXPECT_NE(o.err_lines[0].find(needle), std::string::npos) << o.err_lines[0];
  EXPECT_LT(o.seconds, 20);
}

const std::string kTrain = "train --model tiny --train-iters 1 --quiet ";

TEST(BadInput, HiddenNotDivisibleByHeads) {
  expect_one_line_error(run(kTrain + "--mock-data --hidden-size 30"), "not divisible by num-attention-heads");
}
TEST(BadInput, SequenceLongerThanPositions) {
  expect_one_line_error(run(kTrain + "--mock-data --seq-length 32 --max-position-embeddings 16"),
                        "exceeds max-position-embeddings");
}
TEST(BadInput, ZeroOrNegativeSizes) {
  expect_one_line_error(run(kTrain + "--mock-data --num-layers 0"), "num-layers must be positive");
  expect_one_line_error(run(kTrain + "--mock-data --hidden-size -8"), "hidden-size must be positive");
  expect_one_line_error(run(kTrain + "--mock-data --micro-batch-size 0"), "micro-batch-size must be positive");
  expect_one_line_error(run(kTrain + "--mock-data --vocab-size -1"), "vocab-size must be positive");
}
TEST(BadInput, Device) {
  expect_one_line_error(run(kTrain + "--mock-data --device tpu"), "expected cpu or cuda");
  // Without the CUDA backend, or with it (the engine's GPU path is not
  // written yet), --device cuda is refused with the reason.
  expect_one_line_error(run(kTrain + "--mock-data --device cuda"), "--device cuda:");
}
TEST(BadInput, LlamaFlags) {
  expect_one_line_error(run(kTrain + "--mock-data --group-query-attention"), "needs --num-query-groups");
  expect_one_line_error(run(kTrain + "--mock-data --group-query-attention --num-query-groups 3"),
                        "not divisible by num-kv-heads");
  expect_one_line_error(run(kTrain + "--mock-data --normalization BatchNorm"), "normalization must be");
  expect_one_line_error(run(kTrain + "--mock-data --position-embedding-type alibi"), "position-embedding-type");
  expect_one_line_error(run(kTrain + "--mock-data --rotary-base 500000"), "--rotary-base needs rotary");
  expect_one_line_error(run(kTrain + "--mock-data --position-embedding-type rope --rotary-base 0"),
                        "rotary-base must be positive");
  expect_one_line_error(run(kTrain + "--mock-data --position-embedding-type rope --hidden-size 20 --num-attention-heads 4"),
                        "even head dimension");
}
TEST(BadInput, MissingDataFile) {
  expect_one_line_error(run(kTrain + "--data-path /nonexistent/tokens.bin"), "does not exist");
}
TEST(BadInput, UnknownModelPreset) {
  expect_one_line_error(run("train --model no-such-model --mock-data"), "not found");
}
TEST(BadInput, TruncatedTokenFile) {
  const fs::path p = scratch() / "truncated.bin";
  write_raw(p, 20240520, 1, 1000, std::vector<uint16_t>(600, 1));
  expect_one_line_error(run(kTrain + "--data-path " + p.string()), "truncated");
}
TEST(BadInput, CorruptHeader) {
  const fs::path p = scratch() / "corrupt.bin";
  write_raw(p, 12345, 1, 100, std::vector<uint16_t>(100, 1));
  expect_one_line_error(run(kTrain + "--data-path " + p.string()), "magic");
}
TEST(BadInput, TokensOutsideVocabulary) {
  const fs::path p = scratch() / "oov.bin";
  std::vector<uint16_t> t(100, 3);
  t[57] = 500;  // tiny's vocabulary is 200
  write_raw(p, 20240520, 1, 100, t);
  expect_one_line_error(run(kTrain + "--data-path " + p.string()), "500");
}
TEST(BadInput, PeakFromFile) {
  expect_one_line_error(run(kTrain + "--mock-data --peak-from /nonexistent/gemm.json"), "cannot open");
  const fs::path notjson = scratch() / "peak.txt", other = scratch() / "comm.json", nobf16 = scratch() / "gemm.json";
  std::ofstream(notjson) << "peak 12 TFLOP/s";
  std::ofstream(other) << R"({"bench": "comm", "results": {}})";
  std::ofstream(nobf16) << R"({"bench": "gemm", "peak": {"fp32": {"tflops_per_thread": 0.1}}})";
  expect_one_line_error(run(kTrain + "--mock-data --peak-from " + notjson.string()), "invalid JSON");
  expect_one_line_error(run(kTrain + "--mock-data --peak-from " + other.string()), "not the output of meshtrain bench gemm");
  expect_one_line_error(run(kTrain + "--mock-data --bf16 --peak-from " + nobf16.string()), "no bf16 peak");
  expect_one_line_error(run(kTrain + "--mock-data --peak-tflops 1 --peak-from " + nobf16.string()), "exclude each other");
}
TEST(BadInput, HugeShapeFailsFastBeforeAllocating) {
  const Outcome o = run("train --model 1t --num-attention-heads 7 --mock-data --quiet");
  expect_one_line_error(o, "not divisible by num-attention-heads");
  EXPECT_LT(o.seconds, 5);
}
TEST(BadInput, EveryRankExitsAndOnlyOneLineIsPrinted) {
  const fs::path p = scratch() / "oov2.bin";
  std::vector<uint16_t> t(100, 3);
  t[5] = 999;
  write_raw(p, 20240520, 1, 100, t);
  const Outcome o = run(kTrain + "--data-path " + p.string(), "timeout 60 mpirun --oversubscribe --allow-run-as-root -np 2");
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.exit_code, 124) << "timed out: a rank hung";
  ASSERT_GE(o.err_lines.size(), 1u);
  EXPECT_NE(o.err_lines[0].find("999"), std::string::npos) << o.err_lines[0];
  int mentions = 0;
  for (const auto& l : o.err_lines) mentions += l.find("meshtrain train: error") != std::string::npos;
  EXPECT_EQ(mentions, 1);
}

}  // namespace

namespace {

// A rank killed mid-run: every other rank must exit non-zero within 30 s
// (mpirun ends the job when one process dies; the communication watchdog
// covers launchers that do not), and the output names the failed rank.
TEST(Failure, KilledRankEndsTheJobWithoutHanging) {
  const fs::path out = fs::temp_directory_path() / ("mt-kill-" + std::to_string(getpid()) + ".out");
  const std::string cmd =
      "MESHTRAIN_KILL_RANK_AT=1:3 MESHTRAIN_COMM_TIMEOUT_S=20 OMP_NUM_THREADS=1 timeout 60 mpirun --oversubscribe "
      "--allow-run-as-root -np 4 " + std::string(MESHTRAIN_BINARY) +
      " train --model tiny --mock-data --train-iters 200 --tensor-model-parallel-size 2 --quiet > " + out.string() +
      " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  std::ifstream f(out);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  fs::remove(out);
  EXPECT_NE(code, 0);
  EXPECT_NE(code, 124) << "timed out: the surviving ranks hung";
  EXPECT_LT(seconds, 45);
  EXPECT_NE(text.find("rank 1"), std::string::npos) << text;
  // meshtrain's own line names the rank (before, only mpirun's did).
  EXPECT_NE(text.find("error: rank 1 (pid "), std::string::npos) << text;
}

}  // namespace

namespace {

// ------------------------------------------------ values in range, no wrap --
// Each of these was accepted (or crashed) before: every flag and field now
// has its range checked before anything runs.
TEST(BadValues, OptimizerAndScheduleFlags) {
  expect_one_line_error(run(kTrain + "--mock-data --lr inf"), "--lr must be a finite number >= 0");
  expect_one_line_error(run(kTrain + "--mock-data --adam-beta1 1.5"), "--adam-beta1 must be in [0, 1)");
  expect_one_line_error(run(kTrain + "--mock-data --adam-beta2 1"), "--adam-beta2 must be in [0, 1)");
  expect_one_line_error(run(kTrain + "--mock-data --adam-eps 0"), "--adam-eps must be a finite number > 0");
  expect_one_line_error(run(kTrain + "--mock-data --weight-decay -5"), "--weight-decay must be a finite number >= 0");
  expect_one_line_error(run(kTrain + "--mock-data --lr-warmup-iters -1"), "--lr-warmup-iters must not be negative");
  expect_one_line_error(run(kTrain + "--mock-data --lr-decay-iters -3"), "--lr-decay-iters must not be negative");
  expect_one_line_error(run(kTrain + "--mock-data --lr 0.001 --min-lr 0.01"), "--min-lr 0.01 is above --lr 0.001");
}
TEST(BadValues, RunFlags) {
  // --log-interval 0 was a SIGFPE (it % 0) after the first step.
  expect_one_line_error(run("train --model tiny --quiet --mock-data --log-interval 0 --train-iters 3"),
                        "--log-interval must be at least 1");
  expect_one_line_error(run(kTrain + "--mock-data --log-interval -1"), "--log-interval must be at least 1");
  // --train-iters 0 printed inf TFLOP/s.
  expect_one_line_error(run("train --model tiny --mock-data --quiet --train-iters 0"), "--train-iters must be at least 1");
  expect_one_line_error(run(kTrain + "--mock-data --peak-tflops nan"), "--peak-tflops must be a finite number");
}
TEST(BadValues, CombinationsThatWereSilentlyIgnored) {
  const fs::path p = scratch() / "tokens.bin";
  write_raw(p, 20240520, 1, 100, std::vector<uint16_t>(100, 1));
  // --mock-data beside --data-path ignored the file.
  expect_one_line_error(run(kTrain + "--mock-data --data-path " + p.string()), "--mock-data and --data-path exclude");
  // --eval-iters without validation data skipped validation.
  expect_one_line_error(run(kTrain + "--eval-iters 2 --data-path " + p.string()), "no validation data");
}
TEST(BadValues, IntegerFlagsDoNotWrapOrTruncate) {
  expect_one_line_error(run(kTrain + "--mock-data --hidden-size 4294967360"), "hidden-size");
  expect_one_line_error(run(kTrain + "--mock-data --num-layers 2.7"), "num-layers");
}

fs::path write_text(const std::string& name, const std::string& text) {
  const fs::path p = scratch() / name;
  std::ofstream(p) << text;
  return p;
}

TEST(BadValues, ModelFileFieldsAreIntegersInRange) {
  // 4294967360 trained as 64, 2.7 as 2.
  const fs::path wrap = write_text("wrap.json", R"({"num_layers": 2, "hidden_size": 4294967360,
      "num_attention_heads": 4, "seq_length": 16, "vocab_size": 200})");
  const fs::path frac = write_text("frac.json", R"({"num_layers": 2.7, "hidden_size": 32,
      "num_attention_heads": 4, "seq_length": 16, "vocab_size": 200})");
  const fs::path type = write_text("type.json", R"({"num_layers": "2", "hidden_size": 32,
      "num_attention_heads": 4, "seq_length": 16, "vocab_size": 200, "gated_mlp": 1})");
  expect_one_line_error(run("train --mock-data --quiet --model " + wrap.string()),
                        "model field 'hidden_size' = 4294967360 is out of range");
  expect_one_line_error(run("train --mock-data --quiet --model " + frac.string()),
                        "model field 'num_layers' must be an integer (got 2.7)");
  expect_one_line_error(run("train --mock-data --quiet --model " + type.string()), "must be an integer");
  expect_one_line_error(run("predict --system frontier --num-gpus 8 --model " + wrap.string()), "out of range");
}

const std::string kPredict =
    "predict --model 1.4b --num-gpus 16 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
    "--micro-batch-size 1 --global-batch-size 16 --bf16 --json ";

TEST(BadValues, SizeProductsDoNotOverflow) {
  // ffn was -589934592, parameters -4.7e18, "fits": true, exit 0.
  expect_one_line_error(run(kPredict + "--system frontier --hidden-size 2000000000"), "hidden-size 2000000000 is too large");
  expect_one_line_error(run(kPredict + "--system frontier --hidden-size 2000000000 --ffn-hidden-size 2000000000"),
                        "overflows 64 bits");
}

// A copy of frontier.json with one field replaced.
fs::path system_with(const std::string& name, const std::string& from, const std::string& to) {
  std::ifstream in(std::string(MESHTRAIN_SOURCE_DIR) + "/configs/systems/frontier.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return write_text(name, text);
}

TEST(BadValues, SystemFileFigures) {
  std::ifstream in(std::string(MESHTRAIN_SOURCE_DIR) + "/configs/systems/frontier.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A negative link latency aborted on an uncaught std::logic_error.
  const size_t lat = text.find("\"latency_us\": ");
  ASSERT_NE(lat, std::string::npos);
  const size_t end = text.find_first_of(",}\n", lat + 14);
  const std::string latency = text.substr(lat, end - lat);
  expect_one_line_error(run(kPredict + "--system " + system_with("neglat.json", latency, "\"latency_us\": -5").string()),
                        "latency must be finite and not negative");
  expect_one_line_error(
      run(kPredict + "--system " +
          system_with("negstep.json", "\"network\": {", "\"network\": {\"ring_step_us\": -5,").string()),
      "network ring_step_us must be finite and not negative");
  // Efficiency 0 gave null figures, -1 faster-than-possible ones.
  const size_t eff = text.find("\"flash_attention_efficiency\": ");
  ASSERT_NE(eff, std::string::npos);
  const std::string flash = text.substr(eff, text.find_first_of(",}\n", eff + 30) - eff);
  for (const char* v : {"0", "-1", "1.5", "1e-320"})
    expect_one_line_error(
        run(kPredict + "--system " +
            system_with("eff.json", flash, std::string("\"flash_attention_efficiency\": ") + v).string()),
        "is not in [1e-06, 1]");
  expect_one_line_error(run(kPredict + "--system " +
                            system_with("devs.json", "\"devices_per_node\": 8", "\"devices_per_node\": 8.5").string()),
                        "system field 'devices_per_node' must be an integer");
}

TEST(BadValues, PlanFixedKnobs) {
  // Found by the mutation run: plan --tensor-model-parallel-size 0 was a SIGFPE.
  const std::string plan = "plan --model 1.4b --system dgx-h100 --num-gpus 16 --global-batch-size 64 --top 1 ";
  expect_one_line_error(run(plan + "--tensor-model-parallel-size 0"), "--tensor-model-parallel-size must be at least 1");
  expect_one_line_error(run(plan + "--pipeline-model-parallel-size -2"), "--pipeline-model-parallel-size must be at least 1");
}

TEST(BadValues, FrameworkProfile) {
  const std::string predict = "predict --model 1.4b --system dgx-h100 --num-gpus 16 --tensor-model-parallel-size 2 ";
  expect_one_line_error(run(predict + "--framework-profile megatron-lm-1999"),
                        "unknown framework profile 'megatron-lm-1999' (known: megatron-lm-2021");
  expect_one_line_error(run(predict + "--sequence-parallel --framework-profile megatron-deepspeed-2021"),
                        "--framework-profile: megatron-deepspeed-2021 has no sequence parallelism");
  expect_one_line_error(run(predict + "--zero-stage 3 --framework-profile megatron-lm-2022"),
                        "--framework-profile: megatron-lm-2022 runs ZeRO stage 0 only");
  const std::string plan = "plan --model 1.4b --system dgx-h100 --num-gpus 16 --global-batch-size 64 --top 1 ";
  expect_one_line_error(run(plan + "--framework-profile nemo-24"), "unknown framework profile 'nemo-24'");
}

TEST(BadValues, PeakFromFileWithWrongTypes) {
  // The wrong JSON types aborted on an uncaught nlohmann type_error.
  const fs::path a = write_text("peak-a.json", R"({"bench": 7, "peak": {}})");
  const fs::path b = write_text("peak-b.json", R"({"bench": "gemm", "peak": {"fp32": {"tflops_per_thread": "fast"}}})");
  const fs::path c = write_text("peak-c.json", R"([1, 2, 3])");
  expect_one_line_error(run(kTrain + "--mock-data --peak-from " + a.string()), "not the output of meshtrain bench gemm");
  expect_one_line_error(run(kTrain + "--mock-data --peak-from " + b.string()), "is not a number");
  expect_one_line_error(run(kTrain + "--mock-data --peak-from " + c.string()), "not the output of meshtrain bench gemm");
}

// ------------------------------------------------------------- memory --
TEST(Memory, TooLargeForThisNodeEndsBeforeAllocating) {
  // 175B parameters on one rank: terabytes. Was the kernel's OOM kill (137).
  const Outcome o = run("train --model 175b --mock-data --quiet --train-iters 1");
  expect_one_line_error(o, "not enough memory: the run needs");
  EXPECT_NE(o.err_lines[0].find("available"), std::string::npos) << o.err_lines[0];
  EXPECT_NE(o.err_lines[0].find("largest item: optimizer states"), std::string::npos) << o.err_lines[0];
  EXPECT_NE(o.err_lines[0].find("--no-memory-check"), std::string::npos) << o.err_lines[0];
  EXPECT_LT(o.seconds, 10);
}
TEST(Memory, EveryRankOfTheNodeCountsAndTheHintFitsTheLayout) {
  // 2 ranks of data parallelism without ZeRO: ZeRO-1 is the hint.
  const Outcome o = run("train --model 175b --mock-data --quiet --train-iters 1",
                        "timeout 60 mpirun --oversubscribe --allow-run-as-root -np 2");
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.exit_code, 124) << "a rank hung";
  ASSERT_GE(o.err_lines.size(), 1u);
  int mentions = 0;  // meshtrain's line once; mpirun adds its own
  for (const auto& l : o.err_lines) mentions += l.find("meshtrain train: error") != std::string::npos;
  EXPECT_EQ(mentions, 1);
  EXPECT_NE(o.err_lines[0].find("(2 ranks, up to"), std::string::npos) << o.err_lines[0];
  EXPECT_NE(o.err_lines[0].find("try --zero-stage 1"), std::string::npos) << o.err_lines[0];
}
TEST(Memory, AnAllocationThatFailsNamesItsSize) {
  // Past the check: the allocation's own message names the bytes (was a bare std::bad_alloc).
  const Outcome o = run("train --model 175b --mock-data --quiet --train-iters 1 --no-memory-check");
  EXPECT_NE(o.exit_code, 0);
  ASSERT_GE(o.err_lines.size(), 1u);
  EXPECT_NE(o.err_lines[0].find("cannot allocate"), std::string::npos) << o.err_lines[0];
}

// ------------------------------------------------------------- outputs --
TEST(Outputs, AnUnwritableReportFailsBeforeTraining) {
  // Was found only after every iteration had run.
  const Outcome o = run("train --model tiny --mock-data --quiet --train-iters 100000 --report /nonexistent/dir/r.json");
  expect_one_line_error(o, "cannot write run report /nonexistent/dir/r.json");
  EXPECT_LT(o.seconds, 10);
  expect_one_line_error(run(kTrain + "--mock-data --trace " + scratch().string()), "cannot write trace");
}
TEST(Outputs, LinksAndDevicesAreWrittenNotReplaced) {
  const fs::path dir = scratch(), target = dir / "report-target.json", link = dir / "report-link.json";
  fs::remove(link);
  fs::remove(target);
  fs::create_symlink(target, link);
  const Outcome o = run(kTrain + "--mock-data --report " + link.string());
  EXPECT_EQ(o.exit_code, 0) << (o.err_lines.empty() ? "" : o.err_lines[0]);
  EXPECT_TRUE(fs::is_symlink(link)) << "--report replaced the link";
  EXPECT_GT(fs::file_size(target), 100u);
  // plan --csv /dev/full replaced the machine's /dev/full with a file.
  const std::string plan = "plan --model 1.4b --system dgx-h100 --num-gpus 8 --global-batch-size 16 --top 1 --csv ";
  expect_one_line_error(run(plan + "/dev/full"), "cannot write plan table /dev/full: No space left on device");
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
  EXPECT_EQ(run(plan + "/dev/null").exit_code, 0);
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_EQ(run(kTrain + "--mock-data --report /dev/null").exit_code, 0);
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

}  // namespace
