#include "meshtrain/perf/predict.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <nlohmann/json.hpp>

#include "meshtrain/model/flops.h"
#include "meshtrain/perf/time_sharing.h"

namespace meshtrain::perf {

namespace {

bool affine3(const PipelineTimeline& a, const PipelineTimeline& b, const PipelineTimeline& c) {
  const double tol = 1e-9 * std::max(1e-30, c.makespan_s);
  auto same_step = [&](double x, double y, double z) { return std::fabs((y - x) - (z - y)) <= tol; };
  if (!same_step(a.makespan_s, b.makespan_s, c.makespan_s)) return false;
  for (size_t s = 0; s < a.stages.size(); ++s) {
    const auto &x = a.stages[s], &y = b.stages[s], &z = c.stages[s];
    if (!same_step(x.finish_s, y.finish_s, z.finish_s) || !same_step(x.bubble_s, y.bubble_s, z.bubble_s) ||
        !same_step(x.transfer_wait_s, y.transfer_wait_s, z.transfer_wait_s))
      return false;
    for (size_t k = 0; k < x.last_backward_end_s.size(); ++k)
      if (!same_step(x.last_backward_end_s[k], y.last_backward_end_s[k], z.last_backward_end_s[k]) ||
          !same_step(x.last_backward_start_s[k], y.last_backward_start_s[k], z.last_backward_start_s[k]))
        return false;
  }
  return true;
}

bool affine(const std::vector<const PipelineTimeline*>& t) {
  for (size_t i = 2; i < t.size(); ++i)
    if (!affine3(*t[i - 2], *t[i - 1], *t[i])) return false;
  return true;
}

// The chunks' forward and backward durations and the boundary transfers, as
// the pipeline simulation takes them.
PipelineCosts pipeline_costs(const StepCosts& sc, const ParallelConfig& p, const PerfOptions& o) {
  PipelineCosts pc;
  pc.pp = p.pp;
  pc.vpp = p.vpp;
  for (const ChunkCost& c : sc.chunks) {
    pc.forward_s.push_back(c.forward_s());
    pc.backward_s.push_back(c.backward_s());
  }
  if (p.pp > 1) pc.transfer_s = sc.transfer_s;
  pc.blocking_sends = !o.overlap_p2p_comm;
  return pc;
}

// When stage st's step-end gradient reduction is done: chunk by chunk as
// their gradients complete, after the pipeline unless it overlaps the
// backward; the part hidden behind the backward costs that compute the
// collective's SM share of it (`sm_share`, SystemSpec's; time_model.h).
double reduction_end(const StepCosts& sc, const StageTimeline& t, int st, int vpp, const PerfOptions& o,
                     double sm_share) {
  std::vector<int> order(vpp);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return t.last_backward_end_s[a] < t.last_backward_end_s[b]; });
  double free = o.overlap_grad_reduce ? 0.0 : t.finish_s, total = 0;
  for (int c : order) {
    const double d = sc.grad_reduce_s[st][c];
    if (d <= 0) continue;
    total += d;
    if (o.overlap_grad_reduce) {
      const double start = std::max(free, t.last_backward_start_s[c]);
      free = std::max(start + d, t.last_backward_end_s[c] + d * sc.bucket_fraction[st]);
    } else {
      free += d;
    }
  }
  const double end = std::max(t.finish_s, free);
  if (!o.overlap_grad_reduce) return end;
  const double hidden = std::max(0.0, total - (end - t.finish_s));
  return end + sm_share * hidden;
}

// When stage st's step ends: its pipeline, then its gradient reduction,
// tied-embedding sync, optimizer and ZeRO-1/2 parameter gather.
struct StageEnd {
  double reduce_end_s = 0, sync_s = 0, gather_s = 0, end_s = 0;
};

StageEnd stage_end(const StepCosts& sc, const StageTimeline& t, int st, const ParallelConfig& p, const PerfOptions& o,
                   double sm_share) {
  StageEnd e;
  e.reduce_end_s = reduction_end(sc, t, st, p.vpp, o, sm_share);
  e.sync_s = (st == 0 || st == p.pp - 1) ? sc.embedding_sync_s : 0.0;
  // Overlapped, the gather hides behind the next step's forward and costs
  // it the collective's SM share, but for its first bucket, which the
  // forward's first layers wait for.
  const double first = sc.bucket_fraction[st];
  e.gather_s = (o.overlap_param_gather ? first + sm_share * (1 - first) : 1.0) * sc.param_gather_s[st];
  e.end_s = e.reduce_end_s + e.sync_s + sc.optimizer_s[st] + e.gather_s;
  return e;
}

// Where stage st's step went.
TimeBreakdown stage_breakdown(const StepCosts& sc, const StageTimeline& t, int st, const ParallelConfig& p,
                              const StageEnd& e) {
  const int mb = p.num_micro_batches();
  TimeBreakdown b;
  for (int c = 0; c < p.vpp; ++c) {
    const ChunkCost& cc = sc.chunk(st, c);
    b.compute += mb * (cc.forward_compute_s + cc.backward_compute_s);
    b.tp_comm += mb * (cc.forward_tp_s + cc.backward_tp_s);
    b.cp_comm += mb * (cc.forward_cp_s + cc.backward_cp_s);
    b.dp_comm += mb * (cc.forward_dp_s + cc.backward_dp_s);
  }
  b.dp_comm += (e.reduce_end_s - t.finish_s) + e.gather_s;
  b.pp_comm = t.transfer_wait_s + e.sync_s;
  b.bubble = t.bubble_s;
  b.optimizer = sc.optimizer_s[st];
  return b;
}

// Throughput and FLOP rates from the step time.
void set_rates(Prediction& r, const ModelConfig& m, const ParallelConfig& p, const SystemSpec& s, int num_gpus) {
  r.tokens_per_step = double(p.global_batch_size) * m.seq_length;
  r.tokens_per_s = r.tokens_per_step / r.step_time_s;
  const StepFlops flops = step_flops(m, p, r.tokens_per_step);
  r.model_tflops_per_gpu = flops.model / r.step_time_s / num_gpus / 1e12;
  r.hardware_tflops_per_gpu = flops.hardware / r.step_time_s / num_gpus / 1e12;
  const double peak = s.peak_flops(p.bf16) / 1e12;
  r.mfu = r.model_tflops_per_gpu / peak;
  r.hfu = r.hardware_tflops_per_gpu / peak;
}

}  // namespace

PipelineTimeline pipeline_timeline(ScheduleKind kind, int m, const PipelineCosts& c, PerfCache& cache,
                                   int64_t max_exact_steps) {
  if (int64_t(c.pp) * c.vpp * m <= max_exact_steps) return cache.timeline(kind, m, c);
  const int step = kind == ScheduleKind::interleaved ? c.pp : 1;
  constexpr int kPoints = 4;
  // Past the warm-up; interleaving with m == pp is a special all-forwards-first order.
  int m1 = 4 * c.pp;
  while (2 * m1 + step < m) {
    std::vector<const PipelineTimeline*> t;
    for (int i = 0; i < kPoints; ++i) t.push_back(&cache.timeline(kind, m1 + i * step, c));
    if (affine(t)) {
      // Check the line once more twice as far out before trusting it.
      const PipelineTimeline& far = cache.timeline(kind, 2 * m1, c);
      const PipelineTimeline guess = extrapolate(*t[0], *t[1], double(m1) / step);
      if (std::fabs(guess.makespan_s - far.makespan_s) <= 1e-9 * far.makespan_s)
        return extrapolate(*t[0], *t[1], double(m - m1) / step);
    }
    m1 *= 2;
  }
  return cache.timeline(kind, m, c);
}

Prediction predict(const ModelConfig& m, const ParallelConfig& p, const SystemSpec& s, int num_gpus,
                   const PerfOptions& o, PerfCache* cache_or_null) {
  validate(m, p, num_gpus);
  PerfCache local;
  PerfCache& cache = cache_or_null ? *cache_or_null : local;

  Prediction r;
  const MemoryEstimate mem = estimate_memory(m, p, s, cache, o);
  r.memory = mem.worst;
  r.memory_stage = mem.worst_stage;
  r.memory_capacity = mem.capacity;
  r.fits = mem.fits();
  r.tight = mem.tight();
  r.headroom = mem.headroom();

  const StepCosts sc = step_costs(m, p, s, o, cache);
  const PipelineTimeline tl = pipeline_timeline(p.schedule, p.num_micro_batches(), pipeline_costs(sc, p, o), cache);
  // The step ends with the last stage to finish; its breakdown is reported.
  double step_end = -1;
  for (int st = 0; st < p.pp; ++st) {
    const StageTimeline& t = tl.stages[st];
    const StageEnd e = stage_end(sc, t, st, p, o, s.compute.collective_sm_share);
    if (e.end_s <= step_end) continue;
    step_end = e.end_s;
    r.critical_stage = st;
    r.time = stage_breakdown(sc, t, st, p, e);
    r.bubble_fraction = t.finish_s > 0 ? t.bubble_s / t.finish_s : 0;
  }
  r.step_time_s = step_end;
  // Ranks outnumbering their node's cores: the cores, not the pipeline, may bound the step.
  if (const TimeShared ts = time_shared_step(sc, p, s, num_gpus); ts.step_s > step_end) {
    r.step_time_s = ts.step_s;
    r.time = TimeBreakdown{ts.compute_s, ts.tp_s, ts.pp_s, ts.dp_s, 0.0, ts.optimizer_s};
    r.bubble_fraction = 0;
  }
  for (int st = 0; st < p.pp; ++st) {
    r.comm_bytes.tp = std::max(r.comm_bytes.tp, sc.tp_bytes[st]);
    r.comm_bytes.pp = std::max(r.comm_bytes.pp, sc.pp_bytes[st]);
    r.comm_bytes.dp = std::max(r.comm_bytes.dp, sc.dp_bytes[st]);
    r.comm_bytes.cp = std::max(r.comm_bytes.cp, sc.cp_bytes[st]);
  }
  set_rates(r, m, p, s, num_gpus);
  return r;
}

void to_json(nlohmann::json& j, const MemoryBytes& b) {
  j = nlohmann::json{{"parameters", b.parameters},       {"gradients", b.gradients},
                     {"optimizer", b.optimizer},         {"activations", b.activations},
                     {"comm_buffers", b.comm_buffers},   {"workspace", b.workspace},
                     {"fragmentation", b.fragmentation}, {"total", b.total()}};
}

void to_json(nlohmann::json& j, const Prediction& p) {
  j = nlohmann::json{
      {"fits", p.fits},
      {"tight", p.tight},
      {"headroom", p.headroom},
      {"memory_bytes_per_gpu", p.memory},
      {"memory_capacity_bytes", p.memory_capacity},
      {"memory_stage", p.memory_stage},
      {"step_time_s", p.step_time_s},
      {"tokens_per_step", p.tokens_per_step},
      {"tokens_per_s", p.tokens_per_s},
      {"model_tflops_per_gpu", p.model_tflops_per_gpu},
      {"hardware_tflops_per_gpu", p.hardware_tflops_per_gpu},
      {"mfu", p.mfu},
      {"hfu", p.hfu},
      {"bubble_fraction", p.bubble_fraction},
      {"critical_stage", p.critical_stage},
      {"time_s",
       {{"compute", p.time.compute},
        {"tp_comm", p.time.tp_comm},
        {"pp_comm", p.time.pp_comm},
        {"dp_comm", p.time.dp_comm},
        {"cp_comm", p.time.cp_comm},
        {"bubble", p.time.bubble},
        {"optimizer", p.time.optimizer}}},
      {"comm_bytes_per_gpu",
       {{"tp", p.comm_bytes.tp}, {"pp", p.comm_bytes.pp}, {"dp", p.comm_bytes.dp}, {"cp", p.comm_bytes.cp}}}};
}

}  // namespace meshtrain::perf
