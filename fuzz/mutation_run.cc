// mutation_run: the seeded mutation run over every kind of hostile input.
//
//   mutation_run --corpus fuzz/corpus [--regressions fuzz/regressions]
//                [--seed S] [--in-process N] [--binary PATH --runs N]
//                [--jobs J] [--timeout S] [--keep DIR]
//
// In-process (--in-process N): the seed inputs of the corpus, every input
// kept in --regressions, then N mutations of the seeds, each given to its
// reader (fuzz/accept.h); a reader may return or throw meshtrain::Error,
// nothing else.
// End to end (--binary PATH --runs N): N runs of the meshtrain binary, each
// on a mutated token file, model or system JSON, CSV, or a mutated command
// line (a flag's value replaced by a hostile one, a flag dropped or
// repeated). A run may exit 0, 1 or 2 (one line on stderr when not 0); a
// signal, another status or a run past --timeout is a defect.
// Every defect is printed with how to reproduce it and, with --keep, its
// input is written to DIR/<kind>/<hash> (copy it to fuzz/regressions to keep
// it as a regression test). Exit status: 0 when no defect was found.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "accept.h"
#include "meshtrain/core/error.h"
#include "mutate.h"

namespace fs = std::filesystem;
using meshtrain::fuzz::InputKind;
using meshtrain::fuzz::Mutator;

namespace {

struct Options {
  std::string corpus = "fuzz/corpus", regressions, binary, keep;
  uint64_t seed = 1;
  int in_process = 0, runs = 0, jobs = 2;
  double timeout_s = 60;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<fs::path> paths;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file()) paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> out;
  for (const auto& p : paths) out.push_back(slurp(p));
  return out;
}

std::string hash_name(const std::string& bytes) {
  return fmt::format("{:016x}", std::hash<std::string>{}(bytes));
}

void keep(const Options& o, const std::string& kind, const std::string& bytes) {
  if (o.keep.empty()) return;
  const fs::path dir = fs::path(o.keep) / kind;
  fs::create_directories(dir);
  std::ofstream(dir / hash_name(bytes), std::ios::binary) << bytes;
}

// ------------------------------------------------------------- in process --
int run_in_process(const Options& o) {
  int defects = 0, inputs = 0, errors = 0;
  Mutator mut(o.seed);
  auto one = [&](InputKind k, const std::string& bytes, const std::string& origin) {
    ++inputs;
    const auto t0 = std::chrono::steady_clock::now();
    std::string defect;
    try {
      meshtrain::fuzz::accept(k, bytes);
    } catch (const meshtrain::Error&) {
      ++errors;
    } catch (const std::exception& e) {
      defect = fmt::format("escaped {}", e.what());
    } catch (...) {
      defect = "escaped a non-standard exception";
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (defect.empty() && s > 5) defect = fmt::format("took {:.1f} s", s);
    if (!defect.empty()) {
      ++defects;
      std::printf("DEFECT %s (%s, %zu bytes, %s): %s\n", meshtrain::fuzz::input_kind_name(k), origin.c_str(),
                  bytes.size(), hash_name(bytes).c_str(), defect.c_str());
      keep(o, meshtrain::fuzz::input_kind_name(k), bytes);
    }
  };
  std::map<InputKind, std::vector<std::string>> seeds;
  for (InputKind k : meshtrain::fuzz::kInputKinds) {
    const char* name = meshtrain::fuzz::input_kind_name(k);
    seeds[k] = files_in(fs::path(o.corpus) / name);
    for (const std::string& s : seeds[k]) one(k, s, "seed");
    if (!o.regressions.empty())
      for (const std::string& s : files_in(fs::path(o.regressions) / name)) one(k, s, "regression");
  }
  for (int i = 0; i < o.in_process; ++i) {
    const InputKind k = meshtrain::fuzz::kInputKinds[i % std::size(meshtrain::fuzz::kInputKinds)];
    if (seeds[k].empty()) continue;
    one(k, mut.mutate(seeds[k][mut.below(seeds[k].size())]), fmt::format("mutation {} of seed {}", i, o.seed));
  }
  std::printf("in-process: %d inputs, %d rejected with an error, %d defects\n", inputs, errors, defects);
  return defects;
}

// ------------------------------------------------------------- end to end --
struct Case {
  std::string kind;                 // token_file, model_json, system_json, csv, command_line
  std::string input;                // the file's bytes ("" for a command line)
  std::vector<std::string> args;    // "{}" stands for the input file
};

// Command lines whose every flag is a candidate for a hostile value.
const std::vector<std::vector<std::string>>& base_lines() {
  static const std::vector<std::vector<std::string>> v = {
      {"train", "--model", "tiny", "--mock-data", "--train-iters", "1", "--quiet", "--micro-batch-size", "2",
       "--lr", "0.001", "--min-lr", "0", "--adam-beta1", "0.9", "--adam-beta2", "0.95", "--adam-eps", "1e-8",
       "--weight-decay", "0.1", "--clip-grad", "1", "--log-interval", "1", "--lr-warmup-iters", "0",
       "--seq-length", "16", "--hidden-size", "64", "--num-attention-heads", "4", "--eval-iters", "0"},
      {"predict", "--model", "1.4b", "--system", "frontier", "--num-gpus", "64", "--tensor-model-parallel-size",
       "2", "--pipeline-model-parallel-size", "2", "--micro-batch-size", "1", "--global-batch-size", "64",
       "--zero-stage", "1", "--bf16", "--hidden-size", "2048", "--seq-length", "2048", "--json"},
      {"plan", "--model", "1.4b", "--system", "dgx-h100", "--num-gpus", "16", "--global-batch-size", "64",
       "--top", "3", "--micro-batch-size", "1", "--tensor-model-parallel-size", "2"},
      {"sweep", "--model", "tiny", "--ranks", "2", "--grid", "tp=1,2;zero=0,1", "--iters", "1", "--dry-run"},
  };
  return v;
}

// Flags that set a run's length: hostile values there are kept small, or a
// valid run would only be long (not a defect).
bool length_flag(const std::string& f) {
  return f == "--train-iters" || f == "--sample-tokens" || f == "--eval-iters" || f == "--iters" ||
         f == "--seq-length" || f == "--hidden-size" || f == "--num-gpus" || f == "--global-batch-size" ||
         f == "--micro-batch-size" || f == "--ranks";
}

Case make_case(Mutator& m, const Options& o, const std::map<std::string, std::vector<std::string>>& seeds) {
  static const char* kinds[] = {"token_file", "model_json", "system_json", "csv", "command_line", "command_line"};
  Case c;
  c.kind = kinds[m.below(std::size(kinds))];
  if (c.kind == "command_line") {
    c.args = base_lines()[m.below(base_lines().size())];
    for (int edits = 1 + int(m.below(2)); edits > 0; --edits) {
      size_t at = 1 + m.below(c.args.size() - 1);
      if (c.args[at].rfind("--", 0) == 0 && at + 1 < c.args.size() && c.args[at + 1].rfind("--", 0) != 0) ++at;
      switch (m.below(4)) {
        case 0: c.args.erase(c.args.begin() + long(at)); break;
        case 1: c.args.insert(c.args.begin() + long(at), c.args[at]); break;
        default: {
          std::string v = m.hostile_value();
          const std::string& name = c.args[at - 1];
          if (length_flag(name) && (v.size() > 3 && v[0] != '-' && std::isdigit(static_cast<unsigned char>(v[0]))))
            v = "-1";
          if (c.args[at].rfind("--", 0) != 0) c.args[at] = v;
        }
      }
    }
    return c;
  }
  const std::vector<std::string>& s = seeds.at(c.kind);
  c.input = m.mutate(s[m.below(s.size())]);
  if (c.kind == "token_file") c.args = {"train", "--model", "tiny", "--data-path", "{}", "--train-iters", "1", "--quiet"};
  if (c.kind == "model_json")
    c.args = m.below(2) ? std::vector<std::string>{"train", "--model", "{}", "--mock-data", "--train-iters", "1", "--quiet"}
                        : std::vector<std::string>{"predict", "--model", "{}", "--system", "frontier", "--num-gpus", "8",
                                                   "--micro-batch-size", "1", "--global-batch-size", "8", "--json"};
  if (c.kind == "system_json")
    c.args = {"predict", "--model", "1.4b", "--system", "{}", "--num-gpus", "16", "--tensor-model-parallel-size", "2",
              "--pipeline-model-parallel-size", "2", "--micro-batch-size", "1", "--global-batch-size", "16", "--bf16",
              "--json"};
  if (c.kind == "csv") c.args = {"validate", "{}"};
  (void)o;
  return c;
}

struct Result {
  int status = 0;       // exit status, or 128 + signal
  bool signaled = false, timed_out = false;
  int err_lines = 0;
  double seconds = 0;
};

Result run_case(const Options& o, const Case& c, const fs::path& work) {
  fs::create_directories(work);
  const fs::path input = work / (c.kind == "model_json" || c.kind == "system_json" ? "input.json" : "input.bin");
  if (!c.input.empty() || c.kind != "command_line") std::ofstream(input, std::ios::binary) << c.input;
  const fs::path err = work / "stderr";
  std::vector<std::string> args{o.binary};
  for (const std::string& a : c.args) args.push_back(a == "{}" ? input.string() : a);
  Result r;
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int out = open("/dev/null", O_WRONLY), efd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(efd, 2);
    if (chdir(work.c_str()) != 0) _exit(126);
    setenv("OMP_NUM_THREADS", "1", 1);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > o.timeout_s && !r.timed_out) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(-pid, SIGKILL);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.signaled = WIFSIGNALED(status);
  r.status = r.signaled ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  std::ifstream e(err);
  for (std::string line; std::getline(e, line);) r.err_lines += !line.empty();
  return r;
}

std::string shell_line(const Case& c) {
  std::string s = "meshtrain";
  for (const std::string& a : c.args) s += " '" + (a == "{}" ? std::string("INPUT") : a) + "'";
  return s;
}

int run_binary(const Options& o) {
  std::map<std::string, std::vector<std::string>> seeds;
  for (InputKind k : meshtrain::fuzz::kInputKinds) {
    seeds[meshtrain::fuzz::input_kind_name(k)] = files_in(fs::path(o.corpus) / meshtrain::fuzz::input_kind_name(k));
    if (seeds[meshtrain::fuzz::input_kind_name(k)].empty())
      throw meshtrain::Error(fmt::format("no seeds in {}/{}", o.corpus, meshtrain::fuzz::input_kind_name(k)));
  }
  Mutator m(o.seed);
  std::vector<Case> cases;
  for (int i = 0; i < o.runs; ++i) cases.push_back(make_case(m, o, seeds));
  const fs::path root = fs::temp_directory_path() / fmt::format("meshtrain-mutation-{}", getpid());
  std::vector<Result> results(cases.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int j = 0; j < o.jobs; ++j)
    pool.emplace_back([&, j] {
      for (size_t i; (i = next++) < cases.size();) results[i] = run_case(o, cases[i], root / std::to_string(j));
    });
  for (auto& t : pool) t.join();
  fs::remove_all(root);
  std::map<std::string, int> by_status;
  int defects = 0;
  double slowest = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Result& r = results[i];
    slowest = std::max(slowest, r.seconds);
    std::string defect;
    if (r.timed_out) defect = fmt::format("still running after {} s", o.timeout_s);
    else if (r.signaled) defect = fmt::format("killed by signal {}", r.status - 128);
    else if (r.status > 2) defect = fmt::format("exit status {}", r.status);
    else if (r.status == 2 && r.err_lines != 1) defect = fmt::format("exit {} with {} lines on stderr", r.status, r.err_lines);
    by_status[r.timed_out ? "timeout" : r.signaled ? "signal" : fmt::format("exit {}", r.status)]++;
    if (!defect.empty()) {
      ++defects;
      std::printf("DEFECT run %zu (%s): %s: %s\n", i, cases[i].kind.c_str(), defect.c_str(), shell_line(cases[i]).c_str());
      if (cases[i].kind != "command_line") keep(o, cases[i].kind, cases[i].input);
    }
  }
  std::string summary;
  for (const auto& [k, n] : by_status) summary += fmt::format("{}{}: {}", summary.empty() ? "" : ", ", k, n);
  std::printf("end to end: %zu runs (seed %llu): %s; slowest %.1f s; %d defects\n", cases.size(),
              static_cast<unsigned long long>(o.seed), summary.c_str(), slowest, defects);
  return defects;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "mutation_run: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--corpus") o.corpus = value();
    else if (a == "--regressions") o.regressions = value();
    else if (a == "--binary") o.binary = value();
    else if (a == "--keep") o.keep = value();
    else if (a == "--seed") o.seed = std::stoull(value());
    else if (a == "--in-process") o.in_process = std::stoi(value());
    else if (a == "--runs") o.runs = std::stoi(value());
    else if (a == "--jobs") o.jobs = std::max(1, std::stoi(value()));
    else if (a == "--timeout") o.timeout_s = std::stod(value());
    else {
      std::fprintf(stderr, "mutation_run: unknown argument %s (see the comment at the top of fuzz/mutation_run.cc)\n",
                   a.c_str());
      return 2;
    }
  }
  try {
    if (!o.binary.empty()) {
      o.binary = fs::absolute(o.binary).string();  // each run starts in a folder of its own
      if (::access(o.binary.c_str(), X_OK) != 0) throw meshtrain::Error(o.binary + " is not an executable");
    }
    int defects = run_in_process(o);
    if (!o.binary.empty() && o.runs > 0) defects += run_binary(o);
    return defects == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mutation_run: %s\n", e.what());
    return 2;
  }
}
