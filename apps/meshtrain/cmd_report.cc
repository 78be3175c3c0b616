// meshtrain report: a run report (train --report) as one self-contained HTML
// page of charts (report/run_report_html.h).
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "meshtrain/core/error.h"
#include "meshtrain/parallel/parallel_config.h"
#include "meshtrain/perf/predict.h"
#include "meshtrain/report/html_page.h"
#include "meshtrain/report/run_report_html.h"

namespace meshtrain::cli {

namespace {

struct ReportArgs {
  std::string run, out, system;
};

int run_report(const ReportArgs& a) {
  std::ifstream in(a.run);
  check(in.good(), "cannot read run report {}", a.run);
  nlohmann::json run;
  try {
    run = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("run report {} is not JSON: {}", a.run, e.what()));
  }
  nlohmann::json prediction;
  if (run.contains("prediction")) prediction = run["prediction"];
  if (!a.system.empty()) {
    try {
      const ModelConfig m = run.at("config").at("model").get<ModelConfig>();
      const ParallelConfig p = run.at("config").at("parallel").get<ParallelConfig>();
      prediction = perf::predict(m, p, perf::load_system_spec(a.system), run.value("world_size", p.world()));
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("run report {} has no usable config for a prediction: {}", a.run, e.what()));
    }
  }
  report::write_html(a.out, report::run_report_html(run, prediction));
  fmt::print("report: {} written\n", a.out);
  return 0;
}

}  // namespace

void add_report_command(CLI::App& app, Runner& run) {
  auto a = std::make_shared<ReportArgs>();
  CLI::App* c = app.add_subcommand("report", "A run report (train --report) as one self-contained HTML page of charts");
  c->add_option("run", a->run, "The run report (JSON)")->required();
  c->add_option("-o,--out", a->out, "The HTML file to write")->required();
  c->add_option("--system", a->system,
                "Also predict the run with the performance model for this system (configs/systems or JSON) and "
                "show predicted against measured");
  c->callback([a, &run] { run = [a] { return run_report(*a); }; });
}

}  // namespace meshtrain::cli
