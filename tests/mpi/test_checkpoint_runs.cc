// Checkpoint, resume and fault tests: each launches `meshtrain train` (tiny
// model, mock data) under mpirun and checks what it left behind.
//
//   Resume.SameLayoutBitwise   TP2 x PP2 x DP2 (ZeRO-1), stopped by
//                              --exit-interval 3, resumed: losses and final
//                              weights bit-identical to the uninterrupted run;
//   Resume.OtherLayouts        that checkpoint loaded serially, TP4, PP2 x DP2
//                              (ZeRO-2), DP4 (ZeRO-3, and hybrid over blocks
//                              of 2): within 1e-5;
//   Resume.FromAHybridShardedRun  a hybrid-sharded run's checkpoint (ZeRO-2
//                              over blocks of 2 of DP 4) loaded serially:
//                              within 1e-5;
//   Resume.AsyncSaveBitwise    --async-save --keep-last 2: every save committed,
//                              the oldest pruned, the snapshot buffer counted
//                              as host memory, a resume from the second one
//                              bitwise;
//   Fault.SigkillDuringSave    a rank killed after writing its shard of the
//                              second checkpoint: `latest` names the first,
//                              resuming from it is bitwise;
//   Fault.SigtermSaves         SIGTERM to every rank with --exit-signal-handler:
//                              exit 0, a checkpoint of the last step;
//   BadCheckpoint.*            wrong shape, missing shard, truncated file,
//                              checksum mismatch, unknown version: one error
//                              line, non-zero exit, the folder unchanged;
//   NonFinite.*                the NaN stop (nothing saved after it), a skipped
//                              step, the skip budget exhausted;
//   Fault.DiskFull             a small tmpfs fills during the second save: the
//                              first checkpoint stays loadable; the same with
//                              --async-save (the background write fails).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "shell.h"

namespace {

namespace fs = std::filesystem;

fs::path scratch() {
  static const fs::path d = fs::temp_directory_path() / fmt::format("mt-ckpt-runs-{}", getpid());
  fs::create_directories(d);
  return d;
}

using meshtrain::testing::Outcome;

Outcome sh(const std::string& cmd) { return meshtrain::testing::run_shell(cmd, scratch() / "out.txt"); }

// mpirun -np N meshtrain train (tiny, mock data, global batch 4) + args.
std::string train(int np, const std::string& args, const std::string& env = "") {
  return fmt::format("{} OMP_NUM_THREADS=1 MESHTRAIN_COMM_TIMEOUT_S=60 {} -np {} {} train --model tiny --mock-data "
                     "--global-batch-size 4 --seed 7 --quiet {}",
                     env, MT_MPIRUN, np, MESHTRAIN_BINARY, args);
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<float> floats(const fs::path& p) {
  const std::string s = read_file(p);
  std::vector<float> v(s.size() / 4);
  std::memcpy(v.data(), s.data(), v.size() * 4);
  return v;
}

const std::string kTp2Pp2Dp2 = "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --zero-stage 1";

// The uninterrupted 8-rank run of 6 iterations, and a checkpoint of its
// first 3 (run once, shared by the resume tests).
struct Reference {
  fs::path dir = scratch() / "ref";
  nlohmann::json report;
  Reference() {
    fs::create_directories(dir);
    const Outcome a = sh(train(8, kTp2Pp2Dp2 + fmt::format(" --train-iters 6 --report {} --dump-weights {}",
                                                          (dir / "full.json").string(), (dir / "full.bin").string())));
    EXPECT_EQ(a.rc, 0) << a.output;
    report = read_json(dir / "full.json");
    const Outcome b = sh(train(8, kTp2Pp2Dp2 + fmt::format(" --train-iters 6 --save {} --exit-interval 3",
                                                          (dir / "ckpt").string())));
    EXPECT_EQ(b.rc, 0) << b.output;
  }
};
const Reference& reference() {
  static const Reference r;
  return r;
}

// Resumes from `ckpt` under `layout` on `np` ranks; returns the report.
nlohmann::json resume(int np, const std::string& layout, const fs::path& ckpt, const std::string& tag) {
  const fs::path rep = scratch() / (tag + ".json"), w = scratch() / (tag + ".bin");
  const Outcome o = sh(train(np, layout + fmt::format(" --train-iters 6 --load {} --report {} --dump-weights {}",
                                                      ckpt.string(), rep.string(), w.string())));
  EXPECT_EQ(o.rc, 0) << o.output;
  return read_json(rep);
}

TEST(Resume, SameLayoutBitwise) {
  const Reference& ref = reference();
  EXPECT_EQ(read_file(ref.dir / "ckpt" / "latest"), "iter_0000003\n");
  const nlohmann::json r = resume(8, kTp2Pp2Dp2, ref.dir / "ckpt", "same");
  EXPECT_EQ(r["resumed_from_iteration"], 3);
  ASSERT_EQ(r["losses"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r["losses"][i].get<double>(), ref.report["losses"][3 + i].get<double>()) << "iteration " << 4 + i;
    EXPECT_EQ(r["grad_norms"][i].get<double>(), ref.report["grad_norms"][3 + i].get<double>());
  }
  EXPECT_EQ(read_file(scratch() / "same.bin"), read_file(ref.dir / "full.bin"));
}

TEST(Resume, OtherLayouts) {
  const Reference& ref = reference();
  const std::vector<float> want = floats(ref.dir / "full.bin");
  const std::vector<std::pair<int, std::string>> layouts = {
      {1, ""},
      {4, "--tensor-model-parallel-size 4"},
      {4, "--pipeline-model-parallel-size 2 --zero-stage 2"},
      {4, "--zero-stage 3"},
      {4, "--zero-stage 3 --data-parallel-shard-size 2"},  // hybrid sharding: each block loads its shards
      {3, "--pipeline-model-parallel-size 3 --pipeline-stage-partition balanced"},  // 3, 3, 2 layers
  };
  int k = 0;
  for (const auto& [np, layout] : layouts) {
    SCOPED_TRACE(fmt::format("np {} {}", np, layout));
    const std::string tag = fmt::format("other{}", k++);
    const nlohmann::json r = resume(np, layout, ref.dir / "ckpt", tag);
    ASSERT_EQ(r["losses"].size(), 3u);
    for (int i = 0; i < 3; ++i) {
      const double a = r["losses"][i], b = ref.report["losses"][3 + i];
      EXPECT_LE(std::abs(a - b) / std::abs(b), 1e-5) << a << " vs " << b;
    }
    const std::vector<float> got = floats(scratch() / (tag + ".bin"));
    ASSERT_EQ(got.size(), want.size());
    double diff = 0, norm = 0;
    for (size_t i = 0; i < got.size(); ++i) diff += double(got[i] - want[i]) * (got[i] - want[i]), norm += double(want[i]) * want[i];
    EXPECT_LE(std::sqrt(diff / norm), 1e-5);
  }
}

// Hybrid sharding writes each shard once (its first replica): saved from
// ZeRO-2 over blocks of 2 of 4 DP ranks, the checkpoint resumes serially.
TEST(Resume, FromAHybridShardedRun) {
  const Reference& ref = reference();
  const fs::path d = scratch() / "hsdp";
  fs::create_directories(d);
  const Outcome s = sh(train(4, fmt::format("--zero-stage 2 --data-parallel-shard-size 2 --train-iters 6 --save {} "
                                            "--exit-interval 3",
                                            (d / "ckpt").string())));
  ASSERT_EQ(s.rc, 0) << s.output;
  const nlohmann::json r = resume(1, "", d / "ckpt", "hsdp_serial");
  ASSERT_EQ(r["losses"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const double a = r["losses"][i], b = ref.report["losses"][3 + i];
    EXPECT_LE(std::abs(a - b) / std::abs(b), 1e-5) << a << " vs " << b;
  }
}

TEST(Fault, SigkillDuringSave) {
  const fs::path d = scratch() / "kill";
  fs::create_directories(d);
  const std::string layout = "--tensor-model-parallel-size 2 --zero-stage 2";
  const Outcome full = sh(train(4, layout + fmt::format(" --train-iters 6 --report {}", (d / "full.json").string())));
  ASSERT_EQ(full.rc, 0) << full.output;
  const Outcome killed = sh(train(4, layout + fmt::format(" --train-iters 6 --save {} --save-interval 2", (d / "c").string()),
                                  "MESHTRAIN_KILL_DURING_SAVE=1:4"));
  EXPECT_NE(killed.rc, 0);
  EXPECT_EQ(read_file(d / "c" / "latest"), "iter_0000002\n");
  EXPECT_FALSE(fs::exists(d / "c" / "iter_0000004"));
  const Outcome res = sh(train(4, layout + fmt::format(" --train-iters 6 --load {} --report {}", (d / "c").string(),
                                                       (d / "res.json").string())));
  ASSERT_EQ(res.rc, 0) << res.output;
  const nlohmann::json a = read_json(d / "full.json"), b = read_json(d / "res.json");
  EXPECT_EQ(b["resumed_from_iteration"], 2);
  ASSERT_EQ(b["losses"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b["losses"][i].get<double>(), a["losses"][2 + i].get<double>());
}

TEST(Resume, AsyncSaveBitwise) {
  const fs::path d = scratch() / "async";
  fs::create_directories(d);
  const Outcome full = sh(train(2, fmt::format("--train-iters 6 --report {}", (d / "full.json").string())));
  ASSERT_EQ(full.rc, 0) << full.output;
  const Outcome saved = sh(train(2, fmt::format("--train-iters 6 --save {} --save-interval 2 --async-save --keep-last 2 "
                                                "--report {}", (d / "c").string(), (d / "saved.json").string())));
  ASSERT_EQ(saved.rc, 0) << saved.output;
  EXPECT_EQ(read_file(d / "c" / "latest"), "iter_0000006\n");
  EXPECT_FALSE(fs::exists(d / "c" / "iter_0000002"));  // pruned by --keep-last 2
  EXPECT_TRUE(fs::exists(d / "c" / "iter_0000004"));
  const nlohmann::json s = read_json(d / "saved.json");
  ASSERT_EQ(s["checkpoints"].size(), 3u);
  for (const auto& c : s["checkpoints"]) {
    EXPECT_TRUE(c["async"].get<bool>());
    EXPECT_GT(c["bytes"].get<int64_t>(), 0);  // committed, with its write figures
    EXPECT_GT(c["write_s"].get<double>(), 0);
    EXPECT_GE(c["stall_s"].get<double>(), c["snapshot_s"].get<double>());
  }
  // The snapshot buffer is kept between saves and reported as host memory.
  const auto shard = static_cast<int64_t>(fs::file_size(d / "c" / "iter_0000006" / "rank_00000.safetensors"));
  EXPECT_GE(s["memory_peak_bytes"]["checkpoint"].get<int64_t>(), shard);
  const Outcome res = sh(train(2, fmt::format("--train-iters 6 --load {} --report {}", (d / "c" / "iter_0000004").string(),
                                              (d / "res.json").string())));
  ASSERT_EQ(res.rc, 0) << res.output;
  const nlohmann::json a = read_json(d / "full.json"), b = read_json(d / "res.json");
  ASSERT_EQ(b["losses"].size(), 2u);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(b["losses"][i].get<double>(), a["losses"][4 + i].get<double>());
}

// The processes whose parent is `pid` (mpirun's ranks).
std::vector<pid_t> children(pid_t pid) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "stat");
    std::string line;
    std::getline(f, line);
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t ppid;
    rest >> state >> ppid;
    if (ppid == pid) out.push_back(std::stoi(name));
  }
  return out;
}

TEST(Fault, SigtermSaves) {
  const fs::path d = scratch() / "term";
  fs::create_directories(d);
  const std::string cmd = train(2, fmt::format("--train-iters 100000 --exit-signal-handler --save {} --log-file {} "
                                               "--report {}", (d / "c").string(), (d / "log.jsonl").string(),
                                               (d / "r.json").string()));
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", ("exec env " + cmd + " >" + (d / "out.txt").string() + " 2>&1").c_str(), nullptr);
    _exit(127);
  }
  // Wait for a few logged iterations, then signal every rank (as Slurm does).
  auto lines = [&] {
    const std::string log = read_file(d / "log.jsonl");
    return std::count(log.begin(), log.end(), '\n');
  };
  for (int i = 0; i < 600 && lines() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::vector<pid_t> ranks = children(pid);
  ASSERT_EQ(ranks.size(), 2u);
  for (pid_t r : ranks) kill(r, SIGTERM);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_file(d / "out.txt");
  const nlohmann::json r = read_json(d / "r.json");
  EXPECT_EQ(r["stop_reason"], "signal");
  const int iters = static_cast<int>(r["losses"].size());
  EXPECT_GE(iters, 3);
  EXPECT_EQ(read_file(d / "c" / "latest"), fmt::format("iter_{:07d}\n", iters));
}

// A good 2-rank checkpoint, copied per case and damaged.
fs::path good_checkpoint() {
  static const fs::path d = [] {
    const fs::path c = scratch() / "good";
    const Outcome o = sh(train(2, fmt::format("--train-iters 2 --save {}", c.string())));
    EXPECT_EQ(o.rc, 0) << o.output;
    return c;
  }();
  return d;
}

// Name, size and contents of every file under `d`.
std::map<std::string, std::string> snapshot(const fs::path& d) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(d))
    if (e.is_regular_file()) out[fs::relative(e.path(), d).string()] = read_file(e.path());
  return out;
}

void expect_refused(const std::string& name, const std::function<void(const fs::path&)>& damage,
                    const std::string& message, const std::string& extra = "") {
  const fs::path d = scratch() / ("bad-" + name);
  fs::remove_all(d);
  fs::copy(good_checkpoint(), d, fs::copy_options::recursive);
  damage(d / "iter_0000002");
  const auto before = snapshot(d);
  const auto t0 = std::chrono::steady_clock::now();
  const Outcome o = sh(train(2, fmt::format("--train-iters 4 --load {} --save {} {}", d.string(), d.string(), extra)));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(o.rc, 0) << o.output;
  EXPECT_LT(s, 30);
  size_t lines = 0;
  for (size_t at = o.output.find("meshtrain train: error: bad checkpoint"); at != std::string::npos;
       at = o.output.find("meshtrain train: error:", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << o.output;
  EXPECT_NE(o.output.find(message), std::string::npos) << o.output;
  EXPECT_EQ(snapshot(d), before) << "the checkpoint folder changed";
}

TEST(BadCheckpoint, WrongShape) {
  expect_refused("shape", [](const fs::path&) {}, "tensor embedding.word has shape [256, 32], the model needs [256, 64]",
                 "--hidden-size 64");
}
TEST(BadCheckpoint, MissingShard) {
  expect_refused("missing", [](const fs::path& c) { fs::remove(c / "rank_00001.safetensors"); },
                 "rank_00001.safetensors is missing");
}
TEST(BadCheckpoint, Truncated) {
  expect_refused("truncated", [](const fs::path& c) {
    fs::resize_file(c / "rank_00000.safetensors", fs::file_size(c / "rank_00000.safetensors") - 100);
  }, "(truncated?)");
}
TEST(BadCheckpoint, ChecksumMismatch) {
  expect_refused("checksum", [](const fs::path& c) {
    std::fstream f(c / "rank_00000.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-8, std::ios::end);
    char b = 0;
    f.read(&b, 1);
    b = static_cast<char>(b ^ 0x40);
    f.seekp(-8, std::ios::end);
    f.write(&b, 1);
  }, "fails its checksum");
}
TEST(BadCheckpoint, UnknownVersion) {
  expect_refused("version", [](const fs::path& c) {
    nlohmann::json j = read_json(c / "metadata.json");
    j["format_version"] = 99;
    std::ofstream(c / "metadata.json") << j.dump();
  }, "metadata format version 99 is unknown");
}

TEST(NonFinite, StopsWithoutSaving) {
  const fs::path d = scratch() / "nan";
  fs::create_directories(d);
  const Outcome o = sh(train(4, fmt::format("--lr 1e6 --clip-grad 0 --train-iters 30 --save {} --save-interval 2 "
                                            "--report {}", (d / "c").string(), (d / "r.json").string())));
  EXPECT_NE(o.rc, 0);
  const size_t at = o.output.find("meshtrain train: error: non-finite");
  ASSERT_NE(at, std::string::npos) << o.output;
  const nlohmann::json r = read_json(d / "r.json");
  EXPECT_EQ(r["stop_reason"], "nonfinite");
  const int stopped = static_cast<int>(r["losses"].size());  // the iteration that stopped the run
  EXPECT_NE(o.output.find(fmt::format("at iteration {} ", stopped)), std::string::npos) << o.output;
  for (const auto& e : fs::directory_iterator(d / "c")) {
    if (e.path().filename().string().rfind("iter_", 0) == 0) {
      EXPECT_LT(std::stoi(e.path().filename().string().substr(5)), stopped) << e.path();
    }
  }
}

TEST(NonFinite, SkipsAStep) {
  const fs::path r = scratch() / "skip.json";
  const Outcome o = sh(train(2, fmt::format("--train-iters 5 --skip-nonfinite 1 --report {}", r.string()),
                             "MESHTRAIN_NAN_LOSS_AT=1:2"));
  ASSERT_EQ(o.rc, 0) << o.output;
  const nlohmann::json j = read_json(r);
  EXPECT_EQ(j["skipped_steps"], 1);
  EXPECT_EQ(j["losses"][2], "nan");
  EXPECT_TRUE(j["losses"][4].is_number());
}

TEST(NonFinite, StopsAfterSkipBudget) {
  const Outcome o = sh(train(4, "--lr 1e6 --clip-grad 0 --train-iters 30 --skip-nonfinite 2"));
  EXPECT_NE(o.rc, 0);
  EXPECT_NE(o.output.find("(2 such steps skipped before)"), std::string::npos) << o.output;
}

TEST(Fault, DiskFull) {
  const fs::path c = good_checkpoint();
  int64_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(c / "iter_0000002"))
    if (e.is_regular_file()) bytes += static_cast<int64_t>(e.file_size());
  const fs::path m = scratch() / "tmpfs";
  fs::create_directories(m);
  // Room for one checkpoint and a half: the second save runs out of space.
  const std::string opts = fmt::format("size={}k", (bytes * 3 / 2) / 1024 + 8);
  if (mount("tmpfs", m.c_str(), "tmpfs", 0, opts.c_str()) != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << "): run as root to test a full disk";
  const Outcome o = sh(train(2, fmt::format("--train-iters 4 --save {} --save-interval 2", (m / "c").string())));
  EXPECT_NE(o.rc, 0);
  EXPECT_NE(o.output.find("No space left on device"), std::string::npos) << o.output;
  EXPECT_EQ(read_file(m / "c" / "latest"), "iter_0000002\n");
  EXPECT_FALSE(fs::exists(m / "c" / "iter_0000004.tmp"));
  const Outcome l = sh(train(2, fmt::format("--train-iters 2 --load {}", (m / "c").string())));
  EXPECT_EQ(l.rc, 0) << l.output;
  // The same with --async-save: the background write of the second save
  // fails; the error ends the run (at the next step, the next save or the
  // exit) with a non-zero status, and `latest` still names the first.
  fs::remove_all(m / "c");
  const Outcome a = sh(train(2, fmt::format("--train-iters 6 --save {} --save-interval 2 --async-save", (m / "c").string())));
  EXPECT_NE(a.rc, 0);
  EXPECT_NE(a.output.find("cannot save checkpoint of iteration 4"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("No space left on device"), std::string::npos) << a.output;
  EXPECT_EQ(read_file(m / "c" / "latest"), "iter_0000002\n");
  EXPECT_FALSE(fs::exists(m / "c" / "iter_0000004"));
  EXPECT_FALSE(fs::exists(m / "c" / "iter_0000004.tmp"));
  EXPECT_FALSE(fs::exists(m / "c" / "iter_0000006"));
  umount(m.c_str());
}

}  // namespace
