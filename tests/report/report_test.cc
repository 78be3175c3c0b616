// The HTML pages of `meshtrain report` and `plan --html`, loaded in headless
// Chromium: no console message, every chart drawn as a non-empty SVG, and a
// screenshot that is not blank (kept in the working folder as
// report-screenshot.png and plan-screenshot.png to look at).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/perf/framework_profile.h"
#include "meshtrain/report/html_page.h"
#include "meshtrain/report/plan_html.h"
#include "meshtrain/report/run_report_html.h"
#include "../data/temp_dir.h"
#include "png.h"

namespace meshtrain::report {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kBinary = MESHTRAIN_BINARY;
const std::string kSource = MESHTRAIN_SOURCE_DIR;

using data::testing::TempDir;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `cmd` through the shell; its exit status.
int sh(const std::string& cmd) { return std::system(cmd.c_str()); }

bool have_chromium() { return sh("command -v chromium >/dev/null 2>&1") == 0; }

// What Chromium made of a page: its DOM after the scripts ran, its console
// messages, and a screenshot.
struct Loaded {
  std::string dom;
  std::vector<std::string> console;
  testing::Image screenshot;
};

Loaded load_in_chromium(const std::string& html, const TempDir& dir, int height) {
  const std::string flags = "timeout 180 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
                            "--enable-logging=stderr --v=0 --window-size=1200," + std::to_string(height) + " ";
  const std::string url = "file://" + html;
  EXPECT_EQ(sh(flags + "--dump-dom " + url + " >" + dir.file("dom.html") + " 2>" + dir.file("log1.txt")), 0);
  EXPECT_EQ(sh(flags + "--screenshot=" + dir.file("shot.png") + " " + url + " >/dev/null 2>" + dir.file("log2.txt")),
            0);
  Loaded r;
  r.dom = read_all(dir.file("dom.html"));
  for (const char* log : {"log1.txt", "log2.txt"}) {
    std::istringstream in(read_all(dir.file(log)));
    for (std::string line; std::getline(in, line);)
      if (line.find(":CONSOLE") != std::string::npos) r.console.push_back(line);
  }
  r.screenshot = testing::read_png(dir.file("shot.png"));
  return r;
}

// Every chart div holds an SVG with drawn paths and text.
void expect_charts_drawn(const Loaded& page, int expected) {
  std::smatch m;
  ASSERT_TRUE(std::regex_search(page.dom, m, std::regex("data-charts=\"(\\d+)\""))) << "the page's script did not finish";
  EXPECT_EQ(std::stoi(m[1]), expected);
  for (int i = 0; i < expected; ++i) {
    const size_t at = page.dom.find("id=\"chart" + std::to_string(i) + "\"");
    ASSERT_NE(at, std::string::npos) << "chart " << i;
    const size_t next = page.dom.find("id=\"chart" + std::to_string(i + 1) + "\"", at);
    const std::string div = page.dom.substr(at, next == std::string::npos ? std::string::npos : next - at);
    EXPECT_THAT(div, HasSubstr("<svg")) << "chart " << i;
    size_t paths = 0;
    for (size_t p = div.find("<path"); p != std::string::npos; p = div.find("<path", p + 1)) ++paths;
    EXPECT_GE(paths, 5u) << "chart " << i << " drew almost nothing";
    EXPECT_THAT(div, HasSubstr("<text")) << "chart " << i;
  }
}

// Not blank: many pixels are neither white nor one flat colour, in many colours.
void expect_not_blank(const testing::Image& img) {
  ASSERT_GT(img.width, 500);
  ASSERT_GT(img.height, 500);
  int64_t inked = 0;
  std::set<uint32_t> colours;
  for (int64_t i = 0; i < int64_t(img.width) * img.height; ++i) {
    const uint8_t* p = &img.pixels[i * img.channels];
    if (p[0] < 235 || p[1] < 235 || p[2] < 235) ++inked;
    if (colours.size() < 64) colours.insert((uint32_t(p[0]) << 16) | (uint32_t(p[1]) << 8) | p[2]);
  }
  EXPECT_GT(double(inked) / (double(img.width) * img.height), 0.02) << "the screenshot is (nearly) blank";
  EXPECT_GE(colours.size(), 16u) << "the screenshot has almost no colours";
}

TEST(ReportPage, RunReportInChromium) {
  if (!have_chromium()) GTEST_SKIP() << "chromium is not installed (scripts/install-deps installs it)";
  TempDir dir;
  // A run with communication, two pipeline stages and validation.
  const std::string run = dir.file("run.json"), html = dir.file("report.html");
  ASSERT_EQ(sh("OMP_NUM_THREADS=1 mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS -np 4 " + kBinary +
               " train --model tiny --mock-data --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
               "--micro-batch-size 1 --global-batch-size 4 --train-iters 6 --eval-interval 3 --eval-iters 1 --quiet "
               "--report " + run + " >" + dir.file("train.log") + " 2>&1"),
            0)
      << read_all(dir.file("train.log"));
  ASSERT_EQ(sh(kBinary + " report " + run + " -o " + html + " --system local >/dev/null"), 0);
  const std::string page = read_all(html);
  EXPECT_THAT(page, HasSubstr("echarts"));
  EXPECT_EQ(page.find("src=\"http"), std::string::npos) << "the page loads something from the network";
  const Loaded loaded = load_in_chromium(html, dir, 3300);
  EXPECT_TRUE(loaded.console.empty()) << loaded.console.front();
  // loss, throughput, memory, communication, stage steps, bubble, timeline,
  // prediction.
  expect_charts_drawn(loaded, 8);
  for (const char* text : {"validation", "tokens/s", "activations", "tp", "stage 1", "predicted", "Pipeline timeline",
                           "waiting for gradients"})
    EXPECT_THAT(loaded.dom, HasSubstr(text));
  // The timeline chart (the 7th) labels every forward and backward of both
  // stages: micro-batches 0..3, F and B, on 2 stages.
  const size_t at = loaded.dom.find("id=\"chart6\""), next = loaded.dom.find("id=\"chart7\"");
  ASSERT_NE(at, std::string::npos);
  const std::string timeline = loaded.dom.substr(at, next - at);
  EXPECT_THAT(timeline, HasSubstr("Pipeline timeline"));
  for (const char* label : {">F0<", ">F3<", ">B0<", ">B3<"}) EXPECT_THAT(timeline, HasSubstr(label)) << label;
  expect_not_blank(loaded.screenshot);
  fs::copy_file(dir.file("shot.png"), "report-screenshot.png", fs::copy_options::overwrite_existing);
}

// The run JSON carries what the report draws: every stage's actions of
// kTimelineIterations steady iterations, in order, non-overlapping, each
// forward and backward of every micro-batch once; and the memory model's
// prediction, close to the measured peak of the engine's allocations.
TEST(ReportPage, RunJsonCarriesTimelineAndPrediction) {
  TempDir dir;
  const std::string run = dir.file("run.json");
  ASSERT_EQ(sh("OMP_NUM_THREADS=1 mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS -np 2 " + kBinary +
               " train --model tiny --mock-data --pipeline-model-parallel-size 2 --micro-batch-size 1 "
               "--global-batch-size 4 --train-iters 7 --quiet --report " + run + " >" + dir.file("train.log") + " 2>&1"),
            0)
      << read_all(dir.file("train.log"));
  const nlohmann::json j = nlohmann::json::parse(read_all(run));
  int stages = 0;
  for (const nlohmann::json& r : j["measurements"]["ranks"]) {
    ASSERT_TRUE(r.contains("timeline")) << r["rank"];
    EXPECT_EQ(r["timeline"]["stage"], r["coord"]["pp"]);
    const nlohmann::json& its = r["timeline"]["iterations"];
    ASSERT_EQ(its.size(), 4u);
    EXPECT_EQ(its[0]["iteration"], 2);  // the first (warm-up) iteration is left out
    for (const nlohmann::json& it : its) {
      std::set<std::pair<std::string, int>> seen;
      double last_end = 0;
      for (const nlohmann::json& a : it["actions"]) {
        EXPECT_GE(a["start_s"].get<double>(), last_end - 1e-9);
        EXPECT_GE(a["end_s"].get<double>(), a["start_s"].get<double>());
        last_end = a["end_s"].get<double>();
        EXPECT_EQ(a["chunk"], 0);
        seen.insert({a["kind"].get<std::string>(), a["micro_batch"].get<int>()});
      }
      for (int mb = 0; mb < 4; ++mb)
        for (const char* k : {"forward", "backward"}) EXPECT_TRUE(seen.count({k, mb})) << k << mb;
      EXPECT_EQ(seen.count({"send_forward", 0}), r["coord"]["pp"] == 0 ? 1u : 0u);
      EXPECT_EQ(seen.count({"recv_backward", 0}), r["coord"]["pp"] == 0 ? 1u : 0u);
    }
    ++stages;
  }
  EXPECT_EQ(stages, 2);
  const nlohmann::json& pm = j["prediction"]["memory_bytes_per_gpu"];
  const double predicted = pm["parameters"].get<double>() + pm["gradients"].get<double>() +
                           pm["optimizer"].get<double>();
  const nlohmann::json& mem = j["memory_peak_bytes"];
  const double measured = mem["parameters"].get<double>() + mem["gradients"].get<double>() +
                          mem["optimizer"].get<double>();
  EXPECT_NEAR(measured, predicted, 0.05 * predicted);
}

TEST(ReportPage, PlanInChromium) {
  if (!have_chromium()) GTEST_SKIP() << "chromium is not installed (scripts/install-deps installs it)";
  TempDir dir;
  const std::string html = dir.file("plan.html");
  ASSERT_EQ(sh(kBinary + " plan --model 175b --system frontier --num-gpus 512 --global-batch-size 1024 --zero-stage 0 "
               "--recompute-granularity none --html " + html +
               " >" + dir.file("plan.log") + " 2>&1"),
            0)
      << read_all(dir.file("plan.log"));
  const Loaded loaded = load_in_chromium(html, dir, 1600);
  EXPECT_TRUE(loaded.console.empty()) << loaded.console.front();
  expect_charts_drawn(loaded, 2);  // the heat map, the best layouts' breakdown
  for (const char* text : {"TP 8", "PP 32", "The chosen layout", "out of memory: the smallest of"})
    EXPECT_THAT(loaded.dom, HasSubstr(text));
  expect_not_blank(loaded.screenshot);
  fs::copy_file(dir.file("shot.png"), "plan-screenshot.png", fs::copy_options::overwrite_existing);
}

// With a framework profile the page says so, and a TP x PP cell whose
// layouts the framework cannot run is grey with that reason, not with a
// memory figure.
TEST(ReportPage, PlanPageNamesTheFrameworkAndWhatItCannotRun) {
  const ModelConfig m = load_model_config("22b");
  const perf::SystemSpec s = perf::load_system_spec("frontier");
  const perf::FrameworkProfile& f = perf::framework_profile("megatron-deepspeed-2021");
  tune::SearchSpace space;
  space.sequence_parallel = {true};  // fixed: what Megatron-DeepSpeed 2021 lacks
  tune::restrict_to_framework(f, space, m);
  space.framework = &f;
  const tune::Plan plan = tune::plan(m, s, 64, 256, space, f.options);
  const std::string html = plan_html(m, s, 64, 256, space, plan, f.options);
  EXPECT_THAT(html, HasSubstr("Only what megatron-deepspeed-2021 can run"));
  EXPECT_THAT(html, HasSubstr("invalid: megatron-deepspeed-2021 has no sequence parallelism"));
}

TEST(ReportPage, TextIsEscapedAndScriptsCannotBeClosed) {
  HtmlPage page("a <b> & \"c\"");
  page.paragraph("</script><script>alert(1)</script>");
  page.chart({{"title", {{"text", "</script>"}}}, {"series", nlohmann::json::array()}});
  const std::string html = page.render();
  EXPECT_THAT(html, HasSubstr("a &lt;b&gt; &amp; &quot;c&quot;"));
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_THAT(html, HasSubstr("<\\/script>"));
}

TEST(ReportPage, RejectsWhatIsNotARunReport) {
  try {
    run_report_html(nlohmann::json{{"hello", 1}}, nullptr);
    FAIL() << "accepted a JSON that is not a run report";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("not a run report"));
  }
}

}  // namespace
}  // namespace meshtrain::report
