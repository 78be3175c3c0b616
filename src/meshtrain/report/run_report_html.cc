#include "meshtrain/report/run_report_html.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "meshtrain/core/error.h"
#include "meshtrain/measure/run_report.h"
#include "meshtrain/report/html_page.h"

namespace meshtrain::report {

namespace {

using nlohmann::json;

const char* const kMemCategories[] = {"parameters", "gradients", "optimizer", "activations", "comm_buffers",
                                      "workspace"};
constexpr double kMiB = 1024.0 * 1024.0;

double num(const json& j, const char* key, double fallback = 0) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

json value_axis(const std::string& name, bool scale = false) {
  return {{"type", "value"}, {"name", name}, {"scale", scale}, {"nameGap", 12}};
}

json base_option(const std::string& title) {
  return {{"title", {{"text", title}, {"textStyle", {{"fontSize", 14}}}}},
          {"tooltip", {{"trigger", "axis"}}},
          {"legend", {{"top", 30}}},
          {"grid", {{"top", 84}, {"left", 70}, {"right", 40}, {"bottom", 40}}}};
}

void loss_chart(HtmlPage& page, const json& run) {
  if (!run.contains("losses") || run["losses"].empty()) return;
  json train = json::array(), val = json::array();
  for (size_t i = 0; i < run["losses"].size(); ++i) train.push_back({i + 1, run["losses"][i]});
  for (const json& v : run.value("val_losses", json::array())) val.push_back({v["iteration"], v["loss"]});
  json o = base_option("Loss");
  o["xAxis"] = value_axis("iteration");
  o["yAxis"] = value_axis("loss (nats/token)", true);
  o["series"] = json::array({{{"name", "training"}, {"type", "line"}, {"showSymbol", false}, {"data", train}}});
  if (!val.empty())
    o["series"].push_back({{"name", "validation"}, {"type", "line"}, {"symbolSize", 8}, {"data", val}});
  page.chart(o);
}

// Per iteration: tokens consumed over the step's time (rank 0's record).
void throughput_chart(HtmlPage& page, const json& run) {
  json tps = json::array(), step = json::array();
  const json* ranks = run.contains("measurements") && run["measurements"].is_object() &&
                              run["measurements"].contains("ranks")
                          ? &run["measurements"]["ranks"]
                          : nullptr;
  if (ranks != nullptr && !ranks->empty() && (*ranks)[0].contains("steps")) {
    const json& st = (*ranks)[0]["steps"];
    for (size_t i = 0; i < st["time_s"].size(); ++i) {
      const double t = st["time_s"][i].get<double>();
      tps.push_back({i + 1, t > 0 ? st["step_tokens"][i].get<double>() / t : 0.0});
      step.push_back({i + 1, t});
    }
  } else if (run.contains("step_times_s")) {
    const double tokens = num(run, "tokens_per_step");
    for (size_t i = 0; i < run["step_times_s"].size(); ++i) {
      const double t = run["step_times_s"][i].get<double>();
      tps.push_back({i + 1, t > 0 ? tokens / t : 0.0});
      step.push_back({i + 1, t});
    }
  }
  if (tps.empty()) return;
  json o = base_option("Throughput over the run");
  o["xAxis"] = value_axis("iteration");
  o["yAxis"] = json::array({value_axis("tokens/s"), value_axis("step time (s)")});
  o["series"] = json::array({{{"name", "tokens/s"}, {"type", "line"}, {"data", tps}},
                             {{"name", "step time (s)"}, {"type", "line"}, {"yAxisIndex", 1}, {"data", step}}});
  page.chart(o);
}

std::string rank_label(const json& r) {
  return fmt::format("rank {} (tp{} dp{} pp{})", r["rank"].get<int>(), r["coord"]["tp"].get<int>(),
                     r["coord"]["dp"].get<int>(), r["coord"]["pp"].get<int>());
}

void memory_chart(HtmlPage& page, const json& ranks) {
  json labels = json::array(), series = json::array();
  for (const json& r : ranks) labels.push_back(rank_label(r));
  for (const char* c : kMemCategories) {
    json data = json::array();
    for (const json& r : ranks) data.push_back(num(r["memory_peak_bytes"], c) / kMiB);
    series.push_back({{"name", c}, {"type", "bar"}, {"stack", "memory"}, {"data", data}});
  }
  json o = base_option("Peak memory by category, per rank (MiB)");
  o["xAxis"] = {{"type", "category"}, {"data", labels}};
  o["yAxis"] = value_axis("MiB");
  o["series"] = series;
  page.chart(o);
}

void comm_charts(HtmlPage& page, const json& m) {
  const json& ops = m["aggregate"]["comm"];
  if (ops.empty()) {
    page.paragraph("No communication was recorded (a single rank).");
    return;
  }
  const double steps = std::max(1.0, num(m, "comm_steps", 1));
  json labels = json::array(), time = json::array(), exposed = json::array(), bytes = json::array();
  for (const json& e : ops) {
    labels.push_back(e["group"].get<std::string>() + " " + e["op"].get<std::string>());
    time.push_back(1e3 * e["total_s"]["median"].get<double>() / steps);
    exposed.push_back(1e3 * e["exposed_s"]["median"].get<double>() / steps);
    bytes.push_back(e["bytes_per_step"].get<double>() / kMiB);
  }
  json o = base_option("Communication per step by group and operation");
  o["xAxis"] = {{"type", "category"}, {"data", labels}, {"axisLabel", {{"interval", 0}, {"rotate", 20}}}};
  o["yAxis"] = json::array({value_axis("ms per step"), value_axis("MiB per step")});
  o["grid"]["bottom"] = 80;
  o["series"] = json::array({{{"name", "time (ms)"}, {"type", "bar"}, {"data", time}},
                             {{"name", "exposed (ms)"}, {"type", "bar"}, {"data", exposed}},
                             {{"name", "bytes (MiB)"}, {"type", "bar"}, {"yAxisIndex", 1}, {"data", bytes}}});
  page.chart(o, 380);
}

// The median step of each stage, phase by phase.
void pipeline_chart(HtmlPage& page, const json& m) {
  std::map<int, std::map<std::string, std::vector<double>>> by_stage;
  for (const json& r : m["ranks"]) {
    auto& s = by_stage[r["coord"]["pp"].get<int>()];
    const json& p = r["pipeline"];
    const double fwd = num(p, "forward_s"), bwd = num(p, "backward_s"), idle = num(p, "idle_s"),
                 opt = num(p, "optimizer_s");
    s["forward"].push_back(fwd);
    s["backward"].push_back(bwd);
    s["waiting in receives"].push_back(idle);
    s["optimizer"].push_back(opt);
    s["other"].push_back(std::max(0.0, num(r, "step_time_s") - fwd - bwd - idle - opt));
  }
  json labels = json::array(), series = json::array();
  for (const auto& [stage, _] : by_stage) labels.push_back(fmt::format("stage {}", stage));
  for (const char* phase : {"forward", "backward", "waiting in receives", "optimizer", "other"}) {
    json data = json::array();
    for (auto& [stage, phases] : by_stage) data.push_back(1e3 * median_of(phases[phase]));
    series.push_back({{"name", phase}, {"type", "bar"}, {"stack", "step"}, {"data", data}});
  }
  json o = base_option("The step of each pipeline stage (ms, medians over its ranks)");
  o["yAxis"] = {{"type", "category"}, {"data", labels}, {"inverse", true}};
  o["xAxis"] = value_axis("ms");
  o["grid"]["left"] = 90;
  o["series"] = series;
  page.chart(o, 120 + 50 * static_cast<int>(by_stage.size()));

  const json& th = m["theory"];
  if (num(th, "pipeline_stages", 1) <= 1) return;
  json measured = json::array();
  for (const json& s : m["aggregate"]["pipeline"]["stages"]) measured.push_back(100 * s["bubble_fraction"].get<double>());
  json b = base_option("Pipeline bubble by stage (%): measured 1 - compute / span, theory (p-1)/(m+p-1)");
  b["xAxis"] = {{"type", "category"}, {"data", labels}};
  b["yAxis"] = value_axis("%");
  b["series"] = json::array(
      {{{"name", "measured"}, {"type", "bar"}, {"data", measured},
        {"markLine", {{"symbol", "none"},
                      {"data", json::array({{{"name", "theory"}, {"yAxis", 100 * num(th, "bubble_fraction")}}})}}}}});
  page.chart(b);
}

// One steady iteration of every stage (the last one its ranks recorded):
// each forward, backward and wait in a receive as a bar on the stage's row,
// labelled F<micro-batch> / B<micro-batch> (.<chunk> with several chunks),
// times from each stage's own train_step start.
void timeline_chart(HtmlPage& page, const json& m) {
  std::map<int, const json*> last;  // stage -> its last recorded iteration
  for (const json& r : m["ranks"])
    if (r.contains("timeline") && !r["timeline"]["iterations"].empty())
      last[r["timeline"]["stage"].get<int>()] = &r["timeline"]["iterations"].back();
  if (last.empty()) return;
  const char* const kinds[] = {"forward", "backward", "recv_forward", "recv_backward"};
  const char* const names[] = {"forward", "backward", "waiting for activations", "waiting for gradients"};
  json data[4] = {json::array(), json::array(), json::array(), json::array()};
  json labels = json::array();
  int iteration = 0, chunks = 1;
  double end_ms = 0;  // lines series do not stretch the axis: its extent is set
  for (const auto& [stage, it] : last)
    for (const json& a : (*it)["actions"]) chunks = std::max(chunks, a["chunk"].get<int>() + 1);
  for (const auto& [stage, it] : last) {
    const std::string row = fmt::format("stage {}", stage);
    labels.push_back(row);
    iteration = (*it)["iteration"].get<int>();
    for (const json& a : (*it)["actions"]) {
      const std::string kind = a["kind"].get<std::string>();
      const int k = int(std::find(std::begin(kinds), std::end(kinds), kind) - std::begin(kinds));
      if (k == 4) continue;  // sends: posted, not waited for
      const std::string chunk = chunks > 1 ? fmt::format(".{}", a["chunk"].get<int>()) : "";
      const std::string label =
          k < 2 ? fmt::format("{}{}{}", k == 0 ? 'F' : 'B', a["micro_batch"].get<int>(), chunk) : "";
      end_ms = std::max(end_ms, 1e3 * a["end_s"].get<double>());
      data[k].push_back({{"name", label},
                         {"coords", {{1e3 * a["start_s"].get<double>(), row}, {1e3 * a["end_s"].get<double>(), row}}}});
    }
  }
  json o = base_option(fmt::format("Pipeline timeline of iteration {} (ms from each stage's step start)", iteration));
  o["tooltip"] = {{"trigger", "item"}};
  o["yAxis"] = {{"type", "category"}, {"data", labels}, {"inverse", true}};
  o["xAxis"] = value_axis("ms");
  o["xAxis"]["min"] = 0;
  o["xAxis"]["max"] = std::ceil(end_ms);
  o["grid"]["left"] = 90;
  o["series"] = json::array();
  for (int k = 0; k < 4; ++k)
    o["series"].push_back({{"name", names[k]},
                           {"type", "lines"},
                           {"coordinateSystem", "cartesian2d"},
                           {"polyline", false},
                           {"lineStyle", {{"width", 26}, {"opacity", k < 2 ? 0.9 : 0.35}}},
                           {"label", {{"show", k < 2}, {"position", "middle"}, {"formatter", "{b}"}}},
                           {"data", data[k]}});
  page.chart(o, 120 + 60 * static_cast<int>(last.size()));
}

void prediction_section(HtmlPage& page, const json& run, const json& pred) {
  page.heading("Predicted and measured");
  const json& mem = run["memory_peak_bytes"];
  const json& pm = pred["memory_bytes_per_gpu"];
  json labels = json::array(), measured = json::array(), predicted = json::array();
  for (const char* c : kMemCategories) {
    labels.push_back(c);
    measured.push_back(num(mem, c) / kMiB);
    predicted.push_back(num(pm, c) / kMiB);
  }
  json o = base_option(fmt::format("Peak memory of the most loaded rank (MiB), predicted by the {}",
                                   pred.value("source", std::string("performance model"))));
  o["xAxis"] = {{"type", "category"}, {"data", labels}};
  o["yAxis"] = value_axis("MiB");
  o["series"] = json::array({{{"name", "measured"}, {"type", "bar"}, {"data", measured}},
                             {{"name", "predicted"}, {"type", "bar"}, {"data", predicted}}});
  page.chart(o);
  const double step = median_of([&] {
    std::vector<double> v;
    for (const json& t : run.value("step_times_s", json::array())) v.push_back(t.get<double>());
    if (v.size() > 1) v.erase(v.begin());
    return v;
  }());
  auto row = [](const std::string& what, double meas, double pred_v, const std::string& unit) {
    return std::vector<std::string>{what, fmt::format("{:.4g} {}", meas, unit), fmt::format("{:.4g} {}", pred_v, unit),
                                    pred_v > 0 ? fmt::format("{:+.1f}%", 100 * (meas / pred_v - 1)) : "-"};
  };
  std::vector<std::vector<std::string>> rows;
  if (pred.contains("step_time_s")) {  // a time prediction (a system was given)
    rows.push_back(row("step time", step, num(pred, "step_time_s"), "s"));
    rows.push_back(row("tokens/s", num(run, "tokens_per_s"), num(pred, "tokens_per_s"), ""));
  }
  rows.push_back(row("peak memory", num(mem, "total") / kMiB, num(pm, "total") / kMiB, "MiB"));
  page.table({"", "measured", "predicted", "measured / predicted - 1"}, rows);
}

}  // namespace

std::string run_report_html(const json& run, const json& prediction) {
  check(run.is_object() && run.contains("config") && run.contains("losses"),
        "not a run report: no 'config' and 'losses' (write one with meshtrain train --report)");
  const json& cfg = run["config"];
  const json& par = cfg.value("parallel", json::object());
  HtmlPage page(fmt::format("meshtrain run: {} on {} ranks", cfg["model"].value("name", std::string("model")),
                            run.value("world_size", 1)));
  page.paragraph(fmt::format(
      "tp {} x dp {} x pp {}, micro-batch {}, global batch {}, {} iterations, {}; median {:.4g} tokens/s; "
      "final loss {:.4f}; commit {}.",
      par.value("tensor_model_parallel_size", 1), par.value("data_parallel_size", 1),
      par.value("pipeline_model_parallel_size", 1), par.value("micro_batch_size", 1),
      par.value("global_batch_size", 1), run["losses"].size(), par.value("bf16", false) ? "bf16" : "fp32",
      num(run, "tokens_per_s"), run["losses"].empty() ? 0.0 : run["losses"].back().get<double>(),
      run.value("meshtrain_commit", std::string("?"))));
  page.heading("Training");
  loss_chart(page, run);
  throughput_chart(page, run);
  const json m = run.value("measurements", json());
  if (m.is_object() && m.contains("ranks")) {
    page.heading("Memory");
    memory_chart(page, m["ranks"]);
    page.heading("Communication");
    comm_charts(page, m);
    page.heading("Pipeline");
    pipeline_chart(page, m);
    timeline_chart(page, m);
  }
  if (prediction.is_object()) prediction_section(page, run, prediction);
  return page.render();
}

}  // namespace meshtrain::report
