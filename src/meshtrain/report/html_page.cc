#include "meshtrain/report/html_page.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "meshtrain/core/error.h"
#include "meshtrain/core/output_file.h"

#ifndef MESHTRAIN_SOURCE_DIR
#define MESHTRAIN_SOURCE_DIR "."
#endif

namespace meshtrain::report {

namespace {

constexpr const char* kStyle = R"(
body { font-family: system-ui, sans-serif; margin: 24px auto; max-width: 1100px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; }
p { line-height: 1.45; } .chart { width: 100%; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
)";

// JSON safe inside <script>: "</" never appears.
std::string script_json(const nlohmann::json& j) {
  std::string s = j.dump();
  for (size_t at = s.find("</"); at != std::string::npos; at = s.find("</", at + 3)) s.replace(at, 2, "<\\/");
  return s;
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

void HtmlPage::heading(std::string_view text) { body_ += "<h2>" + html_escape(text) + "</h2>\n"; }

void HtmlPage::paragraph(std::string_view text) { body_ += "<p>" + html_escape(text) + "</p>\n"; }

void HtmlPage::table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  body_ += "<table><tr>";
  for (const std::string& h : header) body_ += "<th>" + html_escape(h) + "</th>";
  body_ += "</tr>\n";
  for (const auto& row : rows) {
    body_ += "<tr>";
    for (const std::string& cell : row) body_ += "<td>" + html_escape(cell) + "</td>";
    body_ += "</tr>\n";
  }
  body_ += "</table>\n";
}

void HtmlPage::chart(const nlohmann::json& option, int height_px) {
  nlohmann::json o = option;
  o["animation"] = false;
  body_ += fmt::format("<div class=\"chart\" id=\"chart{}\" style=\"height:{}px\"></div>\n", charts_.size(), height_px);
  charts_.push_back(std::move(o));
}

std::string HtmlPage::render() const {
  const std::string js_path = echarts_js_path();
  std::ifstream in(js_path, std::ios::binary);
  std::ostringstream js;
  js << in.rdbuf();
  check(in.good() || in.eof(), "cannot read the charting library {}", js_path);
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" +
                    html_escape(title_) + "</title>\n<style>" + kStyle + "</style>\n<script>" + js.str() +
                    "</script>\n</head><body>\n<h1>" + html_escape(title_) + "</h1>\n" + body_;
  out += "<script>\nconst meshtrainOptions = " + script_json(charts_) + ";\n";
  out += R"(meshtrainOptions.forEach((option, i) => {
  const chart = echarts.init(document.getElementById("chart" + i), null, {renderer: "svg"});
  chart.setOption(option);
  window.addEventListener("resize", () => chart.resize());
});
window.meshtrainCharts = meshtrainOptions.length;
document.body.dataset.charts = String(meshtrainOptions.length);
</script>
</body></html>
)";
  return out;
}

std::string echarts_js_path() {
  if (const char* env = std::getenv("MESHTRAIN_ECHARTS_JS"); env != nullptr && *env != '\0') return env;
  const std::string npm =
      std::string(MESHTRAIN_SOURCE_DIR) + "/third_party/node/node_modules/echarts/dist/echarts.min.js";
  std::error_code ec;
  check(std::filesystem::is_regular_file(npm, ec),
        "the charting library is not installed: run scripts/install-deps (it installs the echarts npm package "
        "under third_party/node) or set MESHTRAIN_ECHARTS_JS to echarts.min.js");
  return npm;
}

void write_html(const std::string& path, const std::string& html) { write_output_file(path, {html}, "HTML page"); }

}  // namespace meshtrain::report
