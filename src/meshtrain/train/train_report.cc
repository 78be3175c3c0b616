#include "meshtrain/train/train_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "meshtrain/core/build_commit.h"
#include "meshtrain/core/format.h"
#include "meshtrain/core/memory.h"
#include "meshtrain/core/stats.h"
#include "meshtrain/measure/gather.h"
#include "meshtrain/model/flops.h"
#include "meshtrain/perf/predict.h"
#include "meshtrain/train/memory_check.h"

namespace meshtrain {

namespace {

constexpr int kPeakTotal = kNumMemCategories, kPeakRss = kNumMemCategories + 1;

// The most loaded rank's peak per category, the total and the process RSS.
std::vector<double> memory_peaks(ProcessMesh& mesh) {
  const MemorySnapshot ms = MemoryTracker::global().snapshot();
  std::vector<double> peaks(kNumMemCategories + 2);
  for (int i = 0; i < kNumMemCategories; ++i) peaks[i] = double(ms.peak[i]);
  peaks[kPeakTotal] = double(ms.peak_total);
  peaks[kPeakRss] = double(process_peak_rss_bytes());
  mesh.world().all_reduce(peaks.data(), static_cast<int64_t>(peaks.size()), ReduceOp::max);
  return peaks;
}

// Every rank's record, gathered on rank 0 (raw MPI: not counted, not traced).
nlohmann::json gather_measurements(const TrainOptions& o, const TrainResult& r, const RunMeasurements& m,
                                   ProcessMesh& mesh) {
  RankRecord rec;
  rec.rank = mesh.rank();
  rec.coord = mesh.coord();
  rec.steps = m.records;
  rec.comm = m.train_comm;
  rec.comm_steps = std::max<int>(1, static_cast<int>(m.records.size()) - 1);
  rec.memory = MemoryTracker::global().snapshot();
  rec.peak_rss_bytes = process_peak_rss_bytes();
  rec.flops = rank_step_flops(o.model, o.parallel, mesh.coord().pp, r.tokens_per_step);
  if (!m.timeline.empty()) rec.timeline = {{"stage", mesh.coord().pp}, {"iterations", m.timeline}};
  const std::vector<std::string> all = gather_strings(mesh.world(), rank_record_json(rec).dump());
  if (mesh.rank() != 0) return nullptr;
  std::vector<nlohmann::json> ranks;
  for (const std::string& s : all) ranks.push_back(nlohmann::json::parse(s));
  return aggregate_measurements(ranks, ReportContext{o.model, o.parallel, mesh.world_size(), o.peak_tflops});
}

// The memory model's prediction of the engine's own allocations on the most
// loaded rank (per category and total); a time prediction needs a system
// (meshtrain report --system adds one).
nlohmann::json memory_prediction(const TrainOptions& o) {
  perf::MemoryBytes worst;
  for (int s = 0; s < o.parallel.pp; ++s) {
    const perf::MemoryBytes b = rank_peak_memory(o, rank_of(o.parallel, RankCoord{0, 0, s}));
    if (b.total() > worst.total()) worst = b;
  }
  return {{"source", "memory model, the engine's own allocations"}, {"memory_bytes_per_gpu", worst}};
}

// Non-finite values are not JSON numbers: written as strings ("nan").
nlohmann::json numbers(const std::vector<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(fmt::format("{}", x)));
  return a;
}

nlohmann::json report_json(const TrainOptions& o, const TrainResult& r, const std::vector<double>& peaks,
                           int world, double step_s) {
  nlohmann::json j;
  j["config"] = o;
  j["meshtrain_commit"] = build_commit();
  j["world_size"] = world;
  j["first_iteration"] = r.first_iteration;
  if (r.resumed_from_iteration >= 0) j["resumed_from_iteration"] = r.resumed_from_iteration;
  j["iterations_run"] = r.losses.size();
  j["stop_reason"] = r.stop_reason;
  j["skipped_steps"] = r.skipped_steps;
  j["losses"] = numbers(r.losses);
  j["step_times_s"] = r.step_times_s;
  j["grad_norms"] = numbers(r.grad_norms);
  j["lrs"] = r.lrs;
  j["val_losses"] = nlohmann::json::array();
  for (auto [i, l] : r.val_losses) j["val_losses"].push_back({{"iteration", i}, {"loss", l}});
  j["checkpoints"] = r.checkpoints;
  if (!r.load.is_null()) j["load"] = r.load;
  const double configured = double(o.parallel.global_batch_size) * o.model.seq_length;
  j["tokens_per_step"] = r.tokens_per_step;
  j["configured_tokens_per_step"] = configured;
  j["tokens_per_s"] = r.tokens_per_s;
  const StepFlops f = step_flops(o.model, o.parallel, r.tokens_per_step);
  j["model_flops_per_step"] = f.model;
  j["hardware_flops_per_step"] = f.hardware;
  j["model_tflops_per_rank"] = step_s > 0 ? f.model / step_s / 1e12 / world : 0.0;
  j["hardware_tflops_per_rank"] = step_s > 0 ? f.hardware / step_s / 1e12 / world : 0.0;
  if (o.peak_tflops > 0) {
    j["mfu"] = j["model_tflops_per_rank"].get<double>() / o.peak_tflops;
    j["hfu"] = j["hardware_tflops_per_rank"].get<double>() / o.peak_tflops;
  }
  nlohmann::json mem;
  for (int i = 0; i < kNumMemCategories; ++i) mem[std::string(mem_category_name(MemCategory(i)))] = int64_t(peaks[i]);
  mem["total"] = int64_t(peaks[kPeakTotal]);
  j["memory_peak_bytes"] = mem;
  j["process_peak_rss_bytes"] = int64_t(peaks[kPeakRss]);
  j["prediction"] = memory_prediction(o);
  return j;
}

void print_summary(const TrainOptions& o, const TrainResult& r, const std::vector<double>& peaks, int world,
                   double step_s, const nlohmann::json& measurements) {
  const double configured = double(o.parallel.global_batch_size) * o.model.seq_length;
  const double tflops = step_s > 0 ? step_flops(o.model, o.parallel, configured).model / step_s / 1e12 / world : 0;
  fmt::print("\nsummary | {} iterations | final loss {:.4f} | {:.0f} tokens/s (median) | {:.2f} TFLOP/s per rank "
             "(model) | peak memory {} (params {}, grads {}, optimizer {}, activations {})\n",
             r.losses.size(), r.losses.empty() ? 0.0 : r.losses.back(), r.tokens_per_s, tflops,
             format_bytes(peaks[kPeakTotal]), format_bytes(peaks[0]), format_bytes(peaks[1]),
             format_bytes(peaks[2]), format_bytes(peaks[3]));
  if (!measurements.is_null()) fmt::print("{}", summary_table(measurements));
  std::fflush(stdout);
}

}  // namespace

void summarize_throughput(TrainResult& r, const RunMeasurements& m) {
  // Throughput from the tokens each step consumed (never the configured batch).
  std::vector<double> tps;
  for (size_t i = r.step_times_s.size() > 1 ? 1 : 0; i < r.step_times_s.size(); ++i)
    tps.push_back(m.consumed[i] / r.step_times_s[i]);
  r.tokens_per_s = median_of(tps);
  if (!m.consumed.empty()) r.tokens_per_step = median_of(m.consumed);
}

nlohmann::json build_run_report(const TrainOptions& o, const TrainResult& r, const RunMeasurements& m,
                                ProcessMesh& mesh, bool print) {
  const std::vector<double> peaks = memory_peaks(mesh);
  nlohmann::json measurements;
  if (!o.report_path.empty() || (print && !o.quiet)) measurements = gather_measurements(o, r, m, mesh);
  if (mesh.rank() != 0) return nullptr;
  const std::vector<double> later(r.step_times_s.begin() + (r.step_times_s.size() > 1 ? 1 : 0),
                                  r.step_times_s.end());
  const double step_s = median_of(later);
  if (print && !o.quiet) print_summary(o, r, peaks, mesh.world_size(), step_s, measurements);
  nlohmann::json j = report_json(o, r, peaks, mesh.world_size(), step_s);
  j["measurements"] = measurements;
  return j;
}

}  // namespace meshtrain
