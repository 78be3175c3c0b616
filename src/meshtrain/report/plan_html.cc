#include "meshtrain/report/plan_html.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/perf/memory_model.h"
#include "meshtrain/report/html_page.h"

namespace meshtrain::report {

namespace {

using nlohmann::json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Why no layout of one (tp, pp) cell is ranked: the first invalid reason, or
// the least memory any valid layout of it needs.
struct Cell {
  int candidates = 0, valid = 0;
  double least_memory = 0, capacity = 0;
  std::string invalid_reason;
};

std::map<std::pair<int, int>, Cell> cells_of(const ModelConfig& m, const perf::SystemSpec& s, int num_gpus, int gbs,
                                             const tune::SearchSpace& space, const perf::PerfOptions& o) {
  std::map<std::pair<int, int>, Cell> cells;
  perf::PerfCache cache;
  for (const ParallelConfig& p : tune::enumerate(m, space, num_gpus, gbs, s.devices_per_node)) {
    Cell& c = cells[{p.tp, p.pp}];
    ++c.candidates;
    try {
      validate(m, p, num_gpus);
    } catch (const Error& e) {
      if (c.invalid_reason.empty()) c.invalid_reason = e.what();
      continue;
    }
    if (space.framework)
      if (std::string why = perf::unsupported_by(*space.framework, p, m.num_layers); !why.empty()) {
        if (c.invalid_reason.empty()) c.invalid_reason = why;
        continue;
      }
    const perf::MemoryEstimate e = perf::estimate_memory(m, p, s, cache, o);
    c.least_memory = c.valid++ == 0 ? e.worst.total() : std::min(c.least_memory, e.worst.total());
    c.capacity = e.capacity;
  }
  return cells;
}

void heat_map(HtmlPage& page, const tune::Plan& plan, const std::map<std::pair<int, int>, Cell>& cells,
              std::vector<std::vector<std::string>>* unfit) {
  std::set<int> tps, pps;
  for (const auto& [k, _] : cells) tps.insert(k.first), pps.insert(k.second);
  std::map<std::pair<int, int>, const tune::Candidate*> best;
  for (const tune::Candidate& c : plan.ranked)  // fastest first
    best.emplace(std::pair{c.config.tp, c.config.pp}, &c);
  const std::vector<int> tp(tps.begin(), tps.end()), pp(pps.begin(), pps.end());
  json fit = json::array(), none = json::array();
  double top = 0, bottom = 0;
  const tune::Candidate* chosen = plan.ranked.empty() ? nullptr : &plan.ranked.front();
  for (size_t i = 0; i < tp.size(); ++i)
    for (size_t j = 0; j < pp.size(); ++j) {
      const auto it = best.find({tp[i], pp[j]});
      if (it != best.end()) {
        const double v = it->second->prediction.tokens_per_s;
        bottom = top == 0 ? v : std::min(bottom, v);
        top = std::max(top, v);
        json item = {{"value", {i, j, std::round(v)}}, {"name", tune::describe(it->second->config)}};
        if (it->second == chosen) item["itemStyle"] = {{"borderColor", "#000"}, {"borderWidth", 3}};
        fit.push_back(item);
        continue;
      }
      const auto c = cells.find({tp[i], pp[j]});
      if (c == cells.end()) continue;  // not a layout of this GPU count
      const Cell& cell = c->second;
      const std::string why =
          cell.valid == 0 ? "invalid: " + cell.invalid_reason
                          : fmt::format("out of memory: the smallest of {} valid layouts needs {:.1f} GiB of {:.1f} GiB",
                                        cell.valid, cell.least_memory / kGiB, cell.capacity / kGiB);
      none.push_back({{"value", {i, j, 0}}, {"name", why}});
      unfit->push_back({std::to_string(tp[i]), std::to_string(pp[j]), std::to_string(cell.candidates), why});
    }
  json labels_tp = json::array(), labels_pp = json::array();
  for (int t : tp) labels_tp.push_back(fmt::format("TP {}", t));
  for (int p : pp) labels_pp.push_back(fmt::format("PP {}", p));
  json o = {{"title", {{"text", "Best predicted tokens/s of each TP x PP (outlined: the chosen layout; grey: none fits)"},
                       {"textStyle", {{"fontSize", 14}}}}},
            {"tooltip", {{"trigger", "item"}}},
            {"grid", {{"top", 50}, {"left", 70}, {"right", 30}, {"bottom", 90}}},
            {"xAxis", {{"type", "category"}, {"data", labels_tp}, {"splitArea", {{"show", true}}}}},
            {"yAxis", {{"type", "category"}, {"data", labels_pp}, {"splitArea", {{"show", true}}}}},
            {"visualMap", {{"min", std::floor(bottom)}, {"max", std::max(top, bottom + 1)}, {"calculable", true}, {"orient", "horizontal"},
                           {"left", "center"}, {"bottom", 10}, {"seriesIndex", 0}}},
            {"series", json::array({{{"name", "tokens/s"}, {"type", "heatmap"}, {"data", fit},
                                     {"label", {{"show", true}}}},
                                    {{"name", "no fitting layout"}, {"type", "heatmap"}, {"data", none},
                                     {"itemStyle", {{"color", "#d0d0d0"}}}}})}};
  page.chart(o, 140 + 44 * static_cast<int>(pp.size()));
}

void breakdown_chart(HtmlPage& page, const tune::Plan& plan, size_t top) {
  json labels = json::array();
  std::map<std::string, json> parts;
  const char* const names[] = {"compute", "tp comm", "cp comm", "pp comm", "dp comm", "bubble", "optimizer"};
  for (size_t i = 0; i < plan.ranked.size() && i < top; ++i) {
    const perf::TimeBreakdown& t = plan.ranked[i].prediction.time;
    labels.push_back(fmt::format("#{}", i + 1));
    const double v[] = {t.compute, t.tp_comm, t.cp_comm, t.pp_comm, t.dp_comm, t.bubble, t.optimizer};
    for (int k = 0; k < 7; ++k) parts[names[k]].push_back(v[k]);
  }
  json series = json::array();
  for (const char* n : names) series.push_back({{"name", n}, {"type", "bar"}, {"stack", "t"}, {"data", parts[n]}});
  json o = {{"title", {{"text", "Predicted step of the best layouts, by where the time goes (s)"},
                       {"textStyle", {{"fontSize", 14}}}}},
            {"tooltip", {{"trigger", "axis"}}},
            {"legend", {{"top", 30}}},
            {"grid", {{"top", 84}, {"left", 70}, {"right", 30}, {"bottom", 40}}},
            {"xAxis", {{"type", "category"}, {"data", labels}}},
            {"yAxis", {{"type", "value"}, {"name", "s"}}},
            {"series", series}};
  page.chart(o);
}

}  // namespace

std::string plan_html(const ModelConfig& m, const perf::SystemSpec& s, int num_gpus, int gbs,
                      const tune::SearchSpace& space, const tune::Plan& plan, const perf::PerfOptions& o) {
  HtmlPage page(fmt::format("meshtrain plan: {} on {} x {}", m.name, num_gpus, s.name));
  page.paragraph(fmt::format("{} ({:.3g}B parameters), global batch {} x {} tokens: {} candidate layouts evaluated, "
                             "{} fit in memory.",
                             m.name, m.num_parameters() / 1e9, gbs, m.seq_length, plan.candidates_evaluated,
                             plan.candidates_fitting));
  if (space.framework)
    page.paragraph(fmt::format("Only what {} can run, costed as it runs it: {}", space.framework->name,
                               space.framework->basis));
  page.heading("The searched space");
  std::vector<std::vector<std::string>> unfit;
  heat_map(page, plan, cells_of(m, s, num_gpus, gbs, space, o), &unfit);
  page.heading("The chosen layout");
  if (plan.ranked.empty()) {
    page.paragraph("No layout fits.");
  } else {
    const tune::Candidate& c = plan.ranked.front();
    page.paragraph(fmt::format("{}: {:.4g} tokens/s, MFU {:.1f}%, {:.1f} GiB per GPU.", tune::describe(c.config),
                               c.prediction.tokens_per_s, 100 * c.prediction.mfu,
                               c.prediction.memory.total() / kGiB));
    page.paragraph(tune::why_best(plan));
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < plan.ranked.size() && i < 10; ++i) {
      const auto& r = plan.ranked[i].prediction;
      rows.push_back({fmt::format("#{} {}", i + 1, tune::describe(plan.ranked[i].config)),
                      fmt::format("{:.4g}", r.tokens_per_s), fmt::format("{:.1f}", 100 * r.mfu),
                      fmt::format("{:.1f}", r.memory.total() / kGiB), fmt::format("{:.1f}", 100 * r.bubble_fraction)});
    }
    page.table({"layout", "tokens/s", "MFU %", "GiB per GPU", "bubble %"}, rows);
    breakdown_chart(page, plan, 10);
  }
  page.heading("What does not fit");
  if (!unfit.empty()) page.table({"TP", "PP", "layouts", "why none is ranked"}, unfit);
  std::vector<std::vector<std::string>> dropped;
  for (const auto& [reason, n] : plan.dropped) dropped.push_back({reason, std::to_string(n)});
  if (!dropped.empty()) page.table({"candidates dropped because", "count"}, dropped);
  return page.render();
}

}  // namespace meshtrain::report
