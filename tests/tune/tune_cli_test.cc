// `meshtrain tune` as a user runs it, with a stand-in launcher
// (fake_trial.sh) so that trials are fast and their figures known: a killed
// tune resumes without running a finished trial again; SIGTERM ends the
// trial job in flight; a trial that runs out of memory is recorded with its
// reason. And the `meshtrain train` line `plan --emit train` prints runs.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "../data/temp_dir.h"
#include "meshtrain/tune/results_file.h"

namespace meshtrain::tune {
namespace {

using data::testing::TempDir;

const std::string kFake = std::string("sh ") + MESHTRAIN_SOURCE_DIR + "/tests/tune/fake_trial.sh";

// tiny on 4 ranks, tp 1,2 x pp 1,2 x zero 0,1: 8 layouts.
std::string tune_args(const std::string& results, int budget) {
  return std::string(MESHTRAIN_BINARY) +
         " tune --model tiny --ranks 4 --tensor-model-parallel-size 1,2 --pipeline-model-parallel-size 1,2 "
         "--zero-stage 0,1 --micro-batch-size 1 --recompute-granularity none --no-sequence-parallel "
         "--strategy grid --repeat-band 0 --trial-iters 3 --budget-trials " +
         std::to_string(budget) + " --results " + results + " --launcher '" + kFake + "'";
}

std::vector<std::string> lines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream f(path);
  for (std::string l; std::getline(f, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

// `env` (VAR=value ...) then `cmd`, as its own process (exec'd by sh).
pid_t spawn(const std::string& env, const std::string& cmd) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", (env + " exec " + cmd + " >/dev/null 2>&1").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

bool wait_for(const std::function<bool()>& cond, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

bool alive(pid_t pid) { return kill(pid, 0) == 0; }

TEST(TuneCli, KilledTuneResumesWithoutRunningAFinishedTrialAgain) {
  TempDir d;
  const std::string results = d.file("r.jsonl");
  const std::string env1 = "FAKE_SLEEP=0.3 FAKE_LOG=" + d.file("log1") + " FAKE_PIDS=" + d.file("pids") + " ";
  const pid_t tune = spawn(env1, tune_args(results, 6));
  // Kill it (no chance to clean up) while its fourth trial runs.
  ASSERT_TRUE(wait_for([&] { return lines(d.file("log1")).size() >= 4; }, 60));
  kill(tune, SIGKILL);
  waitpid(tune, nullptr, 0);
  for (const std::string& p : lines(d.file("pids"))) kill(std::stoi(p), SIGKILL);  // the orphaned job
  const std::vector<Trial> before = read_results(results);
  ASSERT_GE(before.size(), 3u);
  ASSERT_LE(before.size(), 4u);

  const std::string env2 = "FAKE_LOG=" + d.file("log2") + " ";
  ASSERT_EQ(std::system((env2 + tune_args(results, 6) + " >/dev/null").c_str()), 0);
  const std::vector<Trial> after = read_results(results);
  ASSERT_EQ(after.size(), 6u);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i].key, before[i].key);
  std::set<std::string> keys;
  for (const Trial& t : after) keys.insert(t.key);
  EXPECT_EQ(keys.size(), 6u);  // none run twice, none lost
  EXPECT_EQ(lines(d.file("log2")).size(), 6 - before.size());
}

TEST(TuneCli, SigtermEndsTheTrialJobAndRecordsNothing) {
  TempDir d;
  const std::string results = d.file("r.jsonl");
  const std::string env = "FAKE_SLEEP=60 FAKE_PIDS=" + d.file("pids") + " ";
  const pid_t tune = spawn(env, tune_args(results, 2));
  ASSERT_TRUE(wait_for([&] { return !lines(d.file("pids")).empty(); }, 30));
  const pid_t job = std::stoi(lines(d.file("pids"))[0]);
  ASSERT_TRUE(alive(job));
  kill(tune, SIGTERM);
  int status = 0;
  ASSERT_TRUE(wait_for([&] { return waitpid(tune, &status, WNOHANG) == tune; }, 15));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << status;
  EXPECT_TRUE(wait_for([&] { return !alive(job); }, 10)) << "the trial job outlived the tune";
  if (alive(job)) kill(job, SIGKILL);
  EXPECT_TRUE(read_results(results).empty());
}

TEST(TuneCli, OutOfMemoryTrialIsRecordedWithItsReason) {
  TempDir d;
  const std::string results = d.file("r.jsonl");
  ASSERT_EQ(std::system(("FAKE_OOM_TP=2 " + tune_args(results, 8) + " >/dev/null").c_str()), 0);
  const std::vector<Trial> t = read_results(results);
  ASSERT_EQ(t.size(), 8u);
  int oom = 0;
  for (const Trial& x : t)
    if (x.config.tp == 2) {
      ++oom;
      EXPECT_EQ(x.status, "oom");
      EXPECT_NE(x.reason.find("out of memory"), std::string::npos) << x.reason;
      EXPECT_EQ(x.tokens_per_s, 0);
    } else {
      EXPECT_EQ(x.status, "ok");
      EXPECT_GT(x.tokens_per_s, 1000);
    }
  EXPECT_EQ(oom, 4);
}

TEST(TuneCli, EmittedTrainLineRuns) {
  TempDir d;
  const std::string out = d.file("line");
  const std::string plan = std::string(MESHTRAIN_BINARY) +
                           " plan --model tiny --system local --num-gpus 2 --global-batch-size 4 --fp32 --emit train > " +
                           out;
  ASSERT_EQ(std::system(plan.c_str()), 0);
  const std::vector<std::string> l = lines(out);
  ASSERT_EQ(l.size(), 1u);
  ASSERT_EQ(l[0].rfind("mpirun -np 2 meshtrain train --model tiny ", 0), 0u) << l[0];
  // The line as printed, with `meshtrain` found on PATH; only the data and
  // length of the run are added.
  const std::string bin_dir = std::filesystem::path(MESHTRAIN_BINARY).parent_path().string();
  const std::string run = "PATH=" + bin_dir + ":$PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                          "OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1 " +
                          l[0] + " --mock-data --train-iters 2 --quiet --report " + d.file("rep.json") + " > " +
                          d.file("train.log") + " 2>&1";
  EXPECT_EQ(std::system(run.c_str()), 0) << std::ifstream(d.file("train.log")).rdbuf();
  EXPECT_TRUE(std::filesystem::exists(d.file("rep.json")));
}

}  // namespace
}  // namespace meshtrain::tune
