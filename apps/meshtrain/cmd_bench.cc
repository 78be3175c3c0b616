// meshtrain bench: measures this machine for the performance model.
//
//   bench comm  (under mpirun, like nccl-tests) all-reduce, all-gather,
//               reduce-scatter, broadcast and send/recv over a range of
//               sizes on one group of a mesh; time, algbw, busbw per size and
//               a latency-bandwidth fit per operation.
//   bench gemm  (one process) the matmul shapes a model's layers produce at
//               each TP degree and micro-batch size, forward and both
//               backward products, fp32 and bf16, beside a square-matmul peak.
//   bench system  (no MPI) a configs/systems file for this machine from the
//               JSON the two above wrote (perf/calibrate.h).
#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <functional>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agreed.h"
#include "commands.h"
#include "json_file.h"
#include "meshtrain/comm/abort.h"
#include "meshtrain/comm/process_mesh.h"
#include "meshtrain/core/build_commit.h"
#include "meshtrain/core/dtype.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/rng.h"
#include "meshtrain/kernels/flops.h"
#include "meshtrain/kernels/matmul.h"
#include "meshtrain/core/output_file.h"
#include "meshtrain/measure/comm_bench.h"
#include "meshtrain/measure/gemm_shapes.h"
#include "meshtrain/measure/run_report.h"
#include "meshtrain/measure/timer.h"
#include "meshtrain/model/model_config.h"
#include "meshtrain/perf/calibrate.h"
#include "meshtrain/perf/system_spec.h"

namespace meshtrain::cli {

namespace {

std::vector<std::string> split_list(const std::string& s, char sep = ',') {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<int> int_list(const std::string& s, const char* what) {
  std::vector<int> out;
  for (const std::string& x : split_list(s)) {
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(x, &used);
    } catch (...) {
      used = 0;
    }
    check(used == x.size() && v > 0, "{} must be a comma-separated list of positive integers (got '{}')", what, s);
    out.push_back(v);
  }
  check(!out.empty(), "{} is empty", what);
  return out;
}

// ============================================================ bench comm ===

struct CommFlags {
  int tp = 1, pp = 1;
  std::string group = "world";
  std::string min_bytes = "8", max_bytes = "256M";
  int iters = 20, warmup = 5;
  double budget_s = 0.5;
  bool nonblocking = false;
  std::string ops = "all_reduce,all_gather,reduce_scatter,broadcast,sendrecv";
  std::string out;
};

// One op at one size: `iters` calls, started together after a barrier and
// each timed; a rank's time is the median of its calls (robust to the
// descheduling of a shared, oversubscribed machine, where nccl-tests' mean
// of the loop is dominated by the slowest call), the result the mean over
// ranks (nccl-tests' default).
// nonblocking: the collectives through their non-blocking forms, each
// started and waited for at once; training posts its data-parallel
// reductions this way, and MPI may run these forms on other algorithms.
double time_op(Communicator& c, BenchOp op, float* buf, float* buf2, int64_t count, int iters, bool nonblocking) {
  const int n = c.size(), r = c.rank();
  const MPI_Datatype f32 = mpi_datatype<float>();
  const void* in_place = Communicator::kInPlace;
  auto once = [&] {
    switch (op) {
      case BenchOp::all_reduce:
        nonblocking ? c.iall_reduce(buf, count, f32).wait() : c.all_reduce(buf, count);
        break;
      case BenchOp::all_gather:
        nonblocking ? c.iall_gather(in_place, buf, count, f32).wait() : c.all_gather(in_place, buf, count);
        break;
      case BenchOp::reduce_scatter:
        nonblocking ? c.ireduce_scatter(in_place, buf, count, f32).wait() : c.reduce_scatter(in_place, buf, count);
        break;
      case BenchOp::broadcast: c.broadcast(buf, count, 0); break;
      case BenchOp::sendrecv: {
        Request s = c.isend(buf, count, (r + 1) % n);
        c.recv(buf2, count, (r + n - 1) % n);
        s.wait();
        break;
      }
    }
  };
  MPI_Barrier(c.raw());
  std::vector<double> t(iters);
  for (int i = 0; i < iters; ++i) {
    const double t0 = now_s();
    once();
    t[i] = now_s() - t0;
  }
  double dt = median_of(t);
  MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_SUM, c.raw());
  return dt / n;
}

int run_bench_comm(const CommFlags& f) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<BenchOp> ops;
  std::vector<int64_t> sizes;
  const bool ok = agreed("bench comm", [&] {
    check(f.tp > 0 && f.pp > 0 && world % (f.tp * f.pp) == 0,
          "world size {} is not divisible by tensor-model-parallel-size x pipeline-model-parallel-size = {}", world,
          f.tp * f.pp);
    check(f.iters >= 1 && f.warmup >= 0, "--iters must be positive and --warmup non-negative");
    const GroupKind kind = parse_group_kind(f.group);
    check(kind != GroupKind::embedding, "--group embedding is not measured (middle stages are not members); use pp");
    const int dp = world / (f.tp * f.pp);
    const int n = kind == GroupKind::tp ? f.tp : kind == GroupKind::pp ? f.pp : kind == GroupKind::dp ? dp
                : kind == GroupKind::mp ? f.tp * f.pp : world;
    check(n > 1, "group '{}' has one rank in the mesh tp {} x dp {} x pp {}: nothing to measure", f.group, f.tp, dp,
          f.pp);
    for (const std::string& o : split_list(f.ops)) ops.push_back(parse_bench_op(o));
    check(!ops.empty(), "--ops is empty");
    sizes = bench_sizes(parse_bytes(f.min_bytes), parse_bytes(f.max_bytes));
    if (rank == 0) OutputFile::open(f.out, "bench results");  // a bad --out fails now, not after the run
  });
  if (!ok) {
    MPI_Finalize();
    return 2;
  }
  const int rc = run_or_abort([&] {
    ProcessMesh mesh(f.tp, f.pp);
    Communicator& c = mesh.group(f.group);
    const int n = c.size();
    const bool root = rank == 0;
    const int64_t max_elems = std::max<int64_t>(1, (sizes.back() + 3) / 4);
    std::vector<float> buf(max_elems), buf2;
    if (std::find(ops.begin(), ops.end(), BenchOp::sendrecv) != ops.end()) buf2.resize(max_elems);
    for (int64_t i = 0; i < max_elems; ++i) buf[i] = float(i % 7) * 0.25f;
    nlohmann::json results = nlohmann::json::object();
    if (root)
      fmt::print("# meshtrain bench comm: group {} ({} ranks per group, {} groups run at once) of mesh tp {} x dp {} x "
                 "pp {}, float32, in place, {} collectives; time = median over calls, mean over ranks\n",
                 f.group, n, world / n, mesh.tp(), mesh.dp(), mesh.pp(), f.nonblocking ? "non-blocking" : "blocking");
    for (BenchOp op : ops) {
      if (root) {
        fmt::print("\n# {}\n", bench_op_name(op));
        fmt::print("{:>12} {:>12} {:>6} {:>12} {:>12} {:>12}\n", "size (B)", "count", "iters", "time (us)",
                   "algbw (GB/s)", "busbw (GB/s)");
      }
      std::vector<SizeTime> pts;
      nlohmann::json rows = nlohmann::json::array();
      int64_t prev = -1;
      for (int64_t s : sizes) {
        const int64_t count = bench_count_per_rank(op, s, n, 4);
        const int64_t bytes = bench_actual_bytes(op, count, n, 4);
        if (bytes == prev || bytes > int64_t(buf.size()) * 4) continue;
        prev = bytes;
        // Warm-up; then as many iterations as fit the time budget (the
        // slowest rank's estimate, so every rank runs the same count).
        double est = 0;
        if (f.warmup > 0) est = time_op(c, op, buf.data(), buf2.data(), count, f.warmup, f.nonblocking);
        MPI_Allreduce(MPI_IN_PLACE, &est, 1, MPI_DOUBLE, MPI_MAX, c.raw());
        int iters = f.iters;
        if (f.budget_s > 0 && est > 0) iters = std::clamp(int(f.budget_s / est), 1, f.iters);
        const double t = time_op(c, op, buf.data(), buf2.data(), count, iters, f.nonblocking);
        const double alg = bytes / t, bus = alg * busbw_factor(bench_comm_op(op), n);
        pts.push_back({double(bytes), t});
        rows.push_back({{"bytes", bytes}, {"count_per_rank", count}, {"iters", iters}, {"time_s", t},
                        {"algbw_Bps", alg}, {"busbw_Bps", bus}});
        if (root)
          fmt::print("{:>12} {:>12} {:>6} {:>12.2f} {:>12.4f} {:>12.4f}\n", bytes, count, iters, t * 1e6, alg / 1e9,
                     bus / 1e9);
      }
      const AlphaBeta fit = fit_alpha_beta(pts);
      const nlohmann::json fj = alpha_beta_json(fit, op, n);
      if (root)
        fmt::print("# fit: time = {:.2f} us + bytes / {:.3f} GB/s (busbw {:.3f} GB/s; latency per ring step {:.2f} "
                   "us; relative rms {:.1f}% over {} sizes)\n",
                   fit.alpha_s * 1e6, fit.beta_Bps / 1e9, fj["bus_beta_Bps"].get<double>() / 1e9,
                   fj["latency_per_step_s"].get<double>() * 1e6, 100 * fit.rel_rms, fit.points);
      results[std::string(bench_op_name(op))] = {{"points", rows}, {"fit", fj}};
    }
    if (root && !f.out.empty()) {
      // A link description in configs/systems terms, from the all-reduce fit
      // (or the first operation measured).
      const std::string ref = results.contains("all_reduce") ? "all_reduce" : results.begin().key();
      const nlohmann::json& rf = results[ref]["fit"];
      const char* omp = std::getenv("OMP_NUM_THREADS");
      nlohmann::json j{{"bench", "comm"},
                       {"meshtrain_commit", build_commit()},
                       {"world_size", world},
                       {"mesh", {{"tp", mesh.tp()}, {"dp", mesh.dp()}, {"pp", mesh.pp()}}},
                       {"group", f.group},
                       {"group_size", n},
                       {"groups_at_once", world / n},
                       {"dtype", "float32"},
                       {"nonblocking", f.nonblocking},
                       {"hardware_concurrency", std::thread::hardware_concurrency()},
                       {"omp_num_threads", omp ? omp : ""},
                       {"time", "per rank the median of the timed calls (after a barrier), then the mean over ranks"},
                       {"results", results},
                       {"link_hint",
                        {{"from", ref},
                         {"latency_us", rf["latency_per_step_s"].get<double>() * 1e6},
                         {"bandwidth_gbs", rf["bus_beta_Bps"].get<double>() / 1e9}}}};
      write_output_file(f.out, {j.dump(2) + "\n"}, "bench results");
      fmt::print("\nwrote {}\n", f.out);
    }
    return 0;
  });
  MPI_Finalize();
  return rc;
}

// ============================================================ bench gemm ===

struct GemmFlags {
  std::string model = "bench";
  std::string tp = "1,2,4", mbs = "1,2,4";
  std::string dtypes = "fp32,bf16";
  std::string squares = "512,1024,2048";
  double min_time_s = 0.2;
  int max_reps = 50;
  std::string out;
};

template <class T>
std::vector<T> filled(size_t n, uint64_t seed, float scale) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<T>(scale * 1.7320508f * (static_cast<float>(hash3(seed, 1, i) >> 40) * 0x1p-23f - 1.0f));
  return v;
}

// Seconds per call of each of fs: one warm-up call each, then rounds of one
// call each, alternating (so a slow spell of the machine hits all alike),
// until min_time passes (at most max_reps rounds); per function the fastest
// call: other load on a shared machine only ever adds time.
template <size_t K>
std::array<double, K> time_calls(const std::array<std::function<void()>, K>& fs, double min_time, int max_reps) {
  for (const auto& f : fs) f();
  std::array<double, K> best;
  best.fill(1e300);
  const double start = now_s();
  int reps = 0;
  do {
    for (size_t k = 0; k < K; ++k) {
      const double t0 = now_s();
      fs[k]();
      best[k] = std::min(best[k], now_s() - t0);
    }
  } while (now_s() - start < min_time && ++reps < max_reps);
  return best;
}

struct GemmTimes {
  double fwd = 0, bwd = 0, bwd_weight = 0;
};

template <class T>
GemmTimes time_gemm(int M, int K, int N, const GemmFlags& f) {
  auto inp = filled<T>(size_t(M) * K, 1, 1.0f), w = filled<T>(size_t(N) * K, 2, 0.05f);
  auto dout = filled<T>(size_t(M) * N, 3, 1.0f);
  std::vector<T> out(size_t(M) * N), dinp(size_t(M) * K);
  std::vector<float> dw(size_t(N) * K);
  const auto t = time_calls<3>(
      {[&] { kernels::matmul_forward<T>(out.data(), inp.data(), w.data(), nullptr, M, K, N); },
       [&] {
         kernels::matmul_backward<T>(dinp.data(), dw.data(), nullptr, dout.data(), inp.data(), w.data(), M, K, N,
                                     false);
       },
       [&] {
         kernels::matmul_backward<T>(nullptr, dw.data(), nullptr, dout.data(), inp.data(), w.data(), M, K, N, false);
       }},
      f.min_time_s, f.max_reps);
  GemmTimes g;
  g.fwd = t[0];
  g.bwd = t[1];
  g.bwd_weight = t[2];
  return g;
}

template <class T>
double time_forward(int M, int K, int N, const GemmFlags& f) {
  auto inp = filled<T>(size_t(M) * K, 1, 1.0f), w = filled<T>(size_t(N) * K, 2, 0.05f);
  std::vector<T> out(size_t(M) * N);
  return time_calls<1>({[&] { kernels::matmul_forward<T>(out.data(), inp.data(), w.data(), nullptr, M, K, N); }},
                       f.min_time_s, f.max_reps)[0];
}

GemmTimes time_gemm(bool use_bf16, int M, int K, int N, const GemmFlags& f) {
  return use_bf16 ? time_gemm<bf16>(M, K, N, f) : time_gemm<float>(M, K, N, f);
}

int run_bench_gemm(const GemmFlags& f) {
  const OutputFile out = OutputFile::open(f.out, "bench results");
  ModelConfig m = load_model_config(f.model);
  if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
  m.validate();
  const std::vector<int> tps = int_list(f.tp, "--tp"), mbss = int_list(f.mbs, "--micro-batch-size");
  std::vector<bool> dts;
  for (const std::string& d : split_list(f.dtypes)) {
    check(d == "fp32" || d == "bf16", "--dtypes takes fp32 and/or bf16 (got '{}')", d);
    dts.push_back(d == "bf16");
  }
  const std::vector<int> squares = int_list(f.squares, "--square");
  // Check every TP degree before spending any time.
  for (int tp : tps) layer_gemm_shapes(m, tp, 1, false);
  const int threads = omp_get_max_threads();
  fmt::print("# meshtrain bench gemm: model {} (h {}, heads {}, ffn {}, seq {}, vocab {}), {} OpenMP threads\n",
             m.name, m.hidden_size, m.num_attention_heads, m.ffn(), m.seq_length, m.padded_vocab(), threads);
  // The peak: the best forward of the square products (a large square can
  // fall out of cache, a small one pays the call overhead).
  nlohmann::json peak = nlohmann::json::object();
  for (bool bf : dts) {
    const std::string dt = bf ? "bf16" : "fp32";
    nlohmann::json all = nlohmann::json::array();
    double best = 0;
    int best_s = 0;
    for (int S : squares) {
      const double fwd = bf ? time_forward<bf16>(S, S, S, f) : time_forward<float>(S, S, S, f);
      const double rate = double(kernels::matmul_forward_flops(S, S, S)) / fwd;
      all.push_back({{"side", S}, {"time_s", fwd}, {"tflops", rate / 1e12}});
      fmt::print("# {} square {}^3 forward: {:.1f} GFLOP/s\n", dt, S, rate / 1e9);
      if (rate > best) best = rate, best_s = S;
    }
    peak[dt] = {{"side", best_s}, {"tflops", best / 1e12}, {"tflops_per_thread", best / 1e12 / threads},
                {"squares", all}};
    fmt::print("# peak {}: {:.1f} GFLOP/s (square {}^3)\n", dt, best / 1e9, best_s);
  }
  fmt::print("{:<6} {:>3} {:>4} {:>6} {:>6} {:>6} {:>5} {:>10} {:>10} {:>10} {:>10} {:>7}\n", "layer", "tp", "mbs",
             "M", "K", "N", "dtype", "fwd GF/s", "dW GF/s", "dX GF/s", "bwd GF/s", "eff fwd");
  nlohmann::json rows = nlohmann::json::array();
  std::map<std::string, std::map<int, std::vector<double>>> curve;  // dtype -> min dim -> efficiencies
  for (int tp : tps)
    for (int mbs : mbss)
      for (bool bf : dts)
        for (const GemmShape& s : layer_gemm_shapes(m, tp, mbs, bf)) {
          const GemmTimes g = time_gemm(bf, s.M, s.K, s.N, f);
          const double one = 2.0 * s.M * s.K * s.N;  // one product: 2MKN
          const double dx_s = std::max(g.bwd - g.bwd_weight, 1e-12);
          const std::string dt = bf ? "bf16" : "fp32";
          const double pk = peak[dt]["tflops"].get<double>() * 1e12;
          const double eff = one / g.fwd / pk;
          curve[dt][std::min({s.M, s.K, s.N})].push_back(eff);
          rows.push_back({{"layer", s.layer},
                          {"tp", tp},
                          {"micro_batch", mbs},
                          {"M", s.M},
                          {"K", s.K},
                          {"N", s.N},
                          {"calls_per_micro_batch", s.calls_per_micro_batch},
                          {"dtype", dt},
                          {"forward_s", g.fwd},
                          {"backward_s", g.bwd},
                          {"backward_weight_s", g.bwd_weight},
                          {"backward_input_s", g.bwd - g.bwd_weight},
                          {"forward_tflops", one / g.fwd / 1e12},
                          {"backward_weight_tflops", one / g.bwd_weight / 1e12},
                          {"backward_input_tflops", one / dx_s / 1e12},
                          {"backward_tflops", 2 * one / g.bwd / 1e12},
                          {"forward_efficiency", eff},
                          {"backward_efficiency", 2 * one / g.bwd / pk}});
          fmt::print("{:<6} {:>3} {:>4} {:>6} {:>6} {:>6} {:>5} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.1f} {:>6.0f}%\n",
                     s.layer, tp, mbs, s.M, s.K, s.N, dt, one / g.fwd / 1e9, one / g.bwd_weight / 1e9,
                     one / dx_s / 1e9, 2 * one / g.bwd / 1e9, 100 * eff);
          std::fflush(stdout);
        }
  if (!f.out.empty()) {
    nlohmann::json hint = nlohmann::json::object();
    for (const auto& [dt, by_dim] : curve) {
      nlohmann::json c = nlohmann::json::array();
      for (const auto& [d, effs] : by_dim) c.push_back({d, median_of(effs)});
      hint["matmul_efficiency_" + dt] = c;
      hint["peak_tflops_" + dt] = peak[dt]["tflops"];
    }
    nlohmann::json j{{"bench", "gemm"},
                     {"meshtrain_commit", build_commit()},
                     {"model", m},
                     {"omp_threads", threads},
                     {"hardware_concurrency", std::thread::hardware_concurrency()},
                     {"flops", "2MKN per product (kernels/flops.h); backward = input + weight gradient"},
                     {"time", "fastest call after a warm-up, forward and both backward forms alternating, "
                              "for min-time seconds"},
                     {"peak", peak},
                     {"shapes", rows},
                     {"system_hint", hint}};
    out.write({j.dump(2) + "\n"});
    fmt::print("wrote {}\n", f.out);
  }
  return 0;
}

// ========================================================== bench system ===

struct SystemFlags {
  std::string gemm, comm, base = "local", out;
  int ranks_per_node = 0;
};

// MemTotal of /proc/meminfo in bytes, 0 if unknown.
double node_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (f >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024;
    f.ignore(1 << 10, '\n');
  }
  return 0;
}

int run_bench_system(const SystemFlags& f) {
  check(!f.gemm.empty() || !f.comm.empty(), "give --gemm and/or --comm (the --out files of bench gemm / bench comm)");
  const OutputFile out = OutputFile::open(f.out, "system description");
  const nlohmann::json gemm = f.gemm.empty() ? nlohmann::json() : read_json_arg("--gemm", f.gemm);
  const nlohmann::json comm = f.comm.empty() ? nlohmann::json() : read_json_arg("--comm", f.comm);
  perf::HostInfo host;
  host.ranks_per_node = f.ranks_per_node > 0 ? f.ranks_per_node : comm.is_null() ? 1 : comm.value("group_size", 1);
  host.cores = int(std::max(1u, std::thread::hardware_concurrency()));
  host.memory_bytes = node_memory_bytes();
  perf::SystemSpec s = perf::calibrate_system(perf::load_system_spec(f.base), gemm, comm, host);
  s.name = "local";
  s.description = fmt::format("This machine ({} cores) run as {} ranks, calibrated by meshtrain bench system from {}{}{}",
                              host.cores, host.ranks_per_node, f.gemm, f.gemm.empty() || f.comm.empty() ? "" : " and ",
                              f.comm);
  fmt::print("# {}\n# peak per rank: fp32 {:.4f}, bf16 {:.4f} TFLOP/s; {} rank(s) per node\n", s.description,
             s.compute.peak_tflops_fp32, s.compute.peak_tflops_bf16, s.devices_per_node);
  if (!comm.is_null()) {
    fmt::print("# link {}: {:.3f} GB/s, {:.2f} us per step\n", s.links.front().name, s.links.front().bandwidth_gbs,
               s.links.front().latency_s * 1e6);
    fmt::print("{:<16} {:>12} {:>14} {:>14} {:>8}\n", "op", "bytes", "measured us", "model us", "error");
    std::map<std::string, std::vector<double>> errs;
    for (const perf::CommCheck& c : perf::check_comm(s, comm)) {
      const double e = c.predicted_s / c.measured_s - 1;
      errs[c.op].push_back(std::abs(e));
      fmt::print("{:<16} {:>12.0f} {:>14.2f} {:>14.2f} {:>7.1f}%\n", c.op, c.bytes, c.measured_s * 1e6,
                 c.predicted_s * 1e6, 100 * e);
    }
    for (const auto& [op, v] : errs)
      fmt::print("# {}: median |error| {:.1f}%, max {:.1f}% over {} sizes\n", op, 100 * median_of(v),
                 100 * *std::max_element(v.begin(), v.end()), v.size());
  }
  if (!f.out.empty()) {
    nlohmann::json j = s;
    out.write({j.dump(2) + "\n"});
    fmt::print("wrote {}\n", f.out);
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, Runner& run) {
  auto* bench = app.add_subcommand(
      "bench", "Measure this machine: collectives (bench comm), matmuls (bench gemm), a system file (bench system)");
  bench->require_subcommand(1);

  auto* comm = bench->add_subcommand(
      "comm", "Collective latency and bandwidth on a group of a mesh (launch under mpirun), as nccl-tests reports them");
  auto cf = std::make_shared<CommFlags>();
  comm->add_option("--tensor-model-parallel-size", cf->tp, "TP size of the mesh")->capture_default_str();
  comm->add_option("--pipeline-model-parallel-size", cf->pp, "PP size of the mesh")->capture_default_str();
  comm->add_option("--group", cf->group, "Group measured: tp, dp, pp, mp, embedding or world (every group of that kind "
                                         "runs at once)")->capture_default_str();
  comm->add_option("--min-bytes", cf->min_bytes, "Smallest size (8, 64K, 1M, ...)")->capture_default_str();
  comm->add_option("--max-bytes", cf->max_bytes, "Largest size; sizes double from the smallest (raise to 256M where "
                                                 "memory allows)")->capture_default_str();
  comm->add_option("--iters", cf->iters, "Timed iterations per size (at most)")->capture_default_str();
  comm->add_option("--warmup", cf->warmup, "Warm-up iterations per size")->capture_default_str();
  comm->add_option("--time-budget", cf->budget_s,
                   "Seconds per size: fewer timed iterations when the warm-up says they would take longer (0: off)")
      ->capture_default_str();
  comm->add_option("--ops", cf->ops, "Operations, comma-separated")->capture_default_str();
  comm->add_flag("--nonblocking", cf->nonblocking,
                 "Time the non-blocking forms (MPI_Iallreduce ... then wait), which training's gradient reductions use");
  comm->add_option("--out", cf->out, "Write the results and the alpha-beta fits as JSON here");
  comm->callback([&run, cf] { run = [cf] { return run_bench_comm(*cf); }; });

  auto* gemm = bench->add_subcommand("gemm", "Achieved FLOP/s of the matmul shapes a model's layers produce per TP "
                                             "degree and micro-batch size, and a square-matmul peak");
  auto gf = std::make_shared<GemmFlags>();
  gemm->add_option("--model", gf->model, "Model preset or JSON path")->capture_default_str();
  gemm->add_option("--tp", gf->tp, "TP degrees, comma-separated")->capture_default_str();
  gemm->add_option("--micro-batch-size", gf->mbs, "Micro-batch sizes, comma-separated")->capture_default_str();
  gemm->add_option("--dtypes", gf->dtypes, "fp32 and/or bf16")->capture_default_str();
  gemm->add_option("--square", gf->squares, "Sides of the square matmuls; the fastest sets the peak")
      ->capture_default_str();
  gemm->add_option("--min-time", gf->min_time_s, "Seconds of timed calls per measurement")->capture_default_str();
  gemm->add_option("--max-reps", gf->max_reps, "Most timed calls per measurement")->capture_default_str();
  gemm->add_option("--out", gf->out, "Write every shape's figures and the peak as JSON here");
  gemm->callback([&run, gf] { run = [gf] { return run_bench_gemm(*gf); }; });

  auto* sys = bench->add_subcommand("system", "A configs/systems file for this machine from bench gemm and bench comm "
                                              "output (the local system of the performance model)");
  auto sf = std::make_shared<SystemFlags>();
  sys->add_option("--gemm", sf->gemm, "JSON from meshtrain bench gemm --out");
  sys->add_option("--comm", sf->comm, "JSON from meshtrain bench comm --group world --out (all ranks of this node)");
  sys->add_option("--base", sf->base, "System whose other figures are kept")->capture_default_str();
  sys->add_option("--ranks-per-node", sf->ranks_per_node, "Ranks the node runs (default: bench comm's group size)");
  sys->add_option("--out", sf->out, "Write the system JSON here (e.g. configs/systems/local.json)");
  sys->callback([&run, sf] { run = [sf] { return run_bench_system(*sf); }; });
}

}  // namespace meshtrain::cli
