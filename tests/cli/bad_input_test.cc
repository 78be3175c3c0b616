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
}

}  // namespace
