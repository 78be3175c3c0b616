#include "meshtrain/perf/calibrate.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "meshtrain/core/error.h"
#include "meshtrain/perf/collective.h"

namespace meshtrain::perf {

namespace {

Curve efficiency_curve(const nlohmann::json& points) {
  std::vector<std::pair<double, double>> v;
  for (const auto& p : points) {
    const double x = p.at(0).get<double>(), y = p.at(1).get<double>();
    if (x > 0 && y > 0) v.emplace_back(x, std::min(1.0, y));
  }
  check(!v.empty(), "bench gemm: the matmul efficiency curve is empty");
  std::sort(v.begin(), v.end());
  return Curve(v);
}

void calibrate_compute(SystemSpec& s, const nlohmann::json& gemm, const HostInfo& host) {
  check(gemm.value("bench", "") == "gemm" && gemm.contains("peak") && gemm.contains("system_hint"),
        "not the output of meshtrain bench gemm --out");
  // A rank runs on at least one core: where ranks outnumber cores they time-share
  // (cores_per_node, time_sharing.h) rather than each computing at a fraction of one.
  const double cores_per_rank = std::max(1.0, double(host.cores) / host.ranks_per_node);
  for (const char* dt : {"fp32", "bf16"}) {
    if (!gemm["peak"].contains(dt)) continue;
    const double per_thread = gemm["peak"][dt].value("tflops_per_thread", 0.0);
    check(per_thread > 0, "bench gemm: the {} peak is not positive", dt);
    const bool bf = std::string(dt) == "bf16";
    (bf ? s.compute.peak_tflops_bf16 : s.compute.peak_tflops_fp32) = per_thread * cores_per_rank;
    const std::string key = std::string("matmul_efficiency_") + dt;
    if (gemm["system_hint"].contains(key))
      (bf ? s.compute.matmul_efficiency_bf16 : s.compute.matmul_efficiency_fp32) =
          efficiency_curve(gemm["system_hint"][key]);
  }
  s.sources["peak_tflops"] = fmt::format(
      "meshtrain bench gemm: square-matmul peak per thread x {:.3g} cores per rank ({} cores, {} ranks per node)",
      cores_per_rank, host.cores, host.ranks_per_node);
  s.sources["matmul_efficiency"] =
      fmt::format("meshtrain bench gemm, model {}: median achieved / peak over shapes, by smallest dimension",
                  gemm.contains("model") ? gemm["model"].value("name", "?") : "?");
}

// A bench comm operation in the terms of collective.h: its ring steps and
// bus factor over n ranks, and the model's time for it (sendrecv is one
// point-to-point message).
struct BenchedOp {
  const char* bench_name;
  LinkOp op;
  int steps;
  double factor;
  double (*model_s)(const SystemSpec& s, double bytes, int n);
};

template <Collective kind>
double ring_s(const SystemSpec& s, double bytes, int n) {
  return collective_time(s, kind, bytes, n, 1);
}
double p2p_s(const SystemSpec& s, double bytes, int) { return p2p_time(s, bytes, 0, 1); }

std::vector<BenchedOp> benched_ops(int n) {
  const double f = double(n - 1) / n;
  return {{"all_reduce", LinkOp::all_reduce, 2 * (n - 1), 2 * f, ring_s<Collective::all_reduce>},
          {"all_gather", LinkOp::all_gather, n - 1, f, ring_s<Collective::all_gather>},
          {"reduce_scatter", LinkOp::reduce_scatter, n - 1, f, ring_s<Collective::reduce_scatter>},
          {"sendrecv", LinkOp::p2p, 1, 1.0, p2p_s}};
}

void calibrate_link(SystemSpec& s, const nlohmann::json& comm, const HostInfo& host) {
  check(comm.value("bench", "") == "comm" && comm.contains("results"), "not the output of meshtrain bench comm --out");
  check(comm.value("group", "") == "world", "bench comm: calibration needs --group world (got '{}')",
        comm.value("group", ""));
  const int n = comm.value("group_size", 0);
  check(n == host.ranks_per_node, "bench comm ran on {} ranks, the node has {}", n, host.ranks_per_node);
  check(comm["results"].contains("all_reduce"), "bench comm: no all_reduce results (--ops all_reduce)");
  // Measured (bytes, seconds) per operation, by size.
  std::vector<std::pair<BenchedOp, std::vector<std::pair<double, double>>>> measured;
  for (const BenchedOp& o : benched_ops(n)) {
    if (!comm["results"].contains(o.bench_name)) continue;
    std::vector<std::pair<double, double>> pts;
    for (const auto& p : comm["results"][o.bench_name]["points"])
      pts.emplace_back(p.at("bytes").get<double>(), p.at("time_s").get<double>());
    check(pts.size() >= 2, "bench comm: fewer than 2 {} sizes", o.bench_name);
    std::sort(pts.begin(), pts.end());
    measured.emplace_back(o, std::move(pts));
  }
  // Latency per step: 0.9 of the least time per step of any measured size
  // and operation (on a time-shared node a larger message can be timed
  // faster than the smallest), so that t - steps x latency stays positive;
  // bandwidth: the best latency-corrected bus bandwidth, so every
  // efficiency is <= 1.
  double latency = 1e300;
  for (const auto& [o, pts] : measured)
    for (const auto& [b, t] : pts) latency = std::min(latency, 0.9 * t / o.steps);
  double bw = 0;
  for (const auto& [o, pts] : measured)
    for (const auto& [b, t] : pts) bw = std::max(bw, b * o.factor / (t - o.steps * latency));
  LinkClass l;
  l.name = "shared-memory";
  l.span = n;
  l.bandwidth_gbs = bw / 1e9;
  l.latency_s = latency;
  std::string ops;
  for (const auto& [o, pts] : measured) {
    std::vector<std::pair<double, double>> eff;
    for (const auto& [b, t] : pts) eff.emplace_back(b, std::min(1.0, b * o.factor / (bw * (t - o.steps * latency))));
    if (o.op == LinkOp::all_reduce)
      l.efficiency = Curve(eff);
    else
      l.op_efficiency[static_cast<int>(o.op)] = Curve(eff);
    ops += fmt::format("{}{} ({} sizes)", ops.empty() ? "" : ", ", o.bench_name, pts.size());
  }
  s.links = {l};
  s.sources["links"] = fmt::format(
      "meshtrain bench comm --group world on {} ranks: latency per step from the fastest time per step, bandwidth the "
      "best latency-corrected bus bandwidth, per-operation efficiency curves reproducing every measured time: {}",
      n, ops);
}

}  // namespace

SystemSpec calibrate_system(SystemSpec s, const nlohmann::json& gemm, const nlohmann::json& comm,
                            const HostInfo& host) {
  check(host.ranks_per_node >= 1 && host.cores >= 1, "calibration: ranks per node and cores must be positive");
  s.devices_per_node = host.ranks_per_node;
  s.cores_per_node = host.ranks_per_node > host.cores ? host.cores : 0;
  if (s.cores_per_node > 0)
    s.sources["cores_per_node"] = fmt::format("{} ranks time-share the node's {} cores", host.ranks_per_node, host.cores);
  if (host.memory_bytes > 0) {
    s.memory.hbm_bytes = host.memory_bytes / host.ranks_per_node;
    s.sources["hbm"] = fmt::format("/proc/meminfo MemTotal {:.1f} GiB / {} ranks", host.memory_bytes / (1 << 30),
                                   host.ranks_per_node);
  }
  try {
    if (!gemm.is_null()) calibrate_compute(s, gemm, host);
    if (!comm.is_null()) calibrate_link(s, comm, host);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("calibration: a bench file lacks a field ({})", e.what()));
  }
  if (comm.is_null() && !s.links.empty()) {
    // Keep base's widest link, spanning the node as it now is.
    const LinkClass l = s.links.back();
    s.links = {l};
    s.links.front().span = s.devices_per_node;
  }
  if (s.devices_per_node == 1) s.links.clear();
  s.validate();
  return s;
}

std::vector<CommCheck> check_comm(const SystemSpec& s, const nlohmann::json& comm) {
  std::vector<CommCheck> out;
  const int n = comm.value("group_size", 1);
  for (const BenchedOp& o : benched_ops(n)) {
    if (!comm.contains("results") || !comm["results"].contains(o.bench_name)) continue;
    for (const auto& p : comm["results"][o.bench_name]["points"]) {
      const double b = p.at("bytes").get<double>();
      out.push_back({o.bench_name, b, p.at("time_s").get<double>(), o.model_s(s, b, n)});
    }
  }
  return out;
}

}  // namespace meshtrain::perf
