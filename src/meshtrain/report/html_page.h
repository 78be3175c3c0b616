// HtmlPage: one self-contained HTML file of charts and tables. The charting
// library (Apache ECharts, echarts_js_path()) is inlined, so the file opens
// anywhere without a network. Each chart is an ECharts option object rendered
// with the SVG renderer into a <div> of its own; once every chart is drawn
// the page sets window.meshtrainCharts and <body data-charts> to their
// number (the browser test reads it).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace meshtrain::report {

class HtmlPage {
 public:
  explicit HtmlPage(std::string title) : title_(std::move(title)) {}

  void heading(std::string_view text);
  void paragraph(std::string_view text);
  void table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);
  // A chart of the ECharts `option` (animation is turned off).
  void chart(const nlohmann::json& option, int height_px = 340);
  int num_charts() const { return static_cast<int>(charts_.size()); }

  // The whole page. Throws Error when ECharts cannot be read.
  std::string render() const;

 private:
  std::string title_, body_;
  std::vector<nlohmann::json> charts_;
};

// $MESHTRAIN_ECHARTS_JS, else echarts.min.js of the npm package that
// scripts/install-deps installs under third_party/node. Throws Error saying
// how to get it when the file is missing.
std::string echarts_js_path();

// `text` with &, <, >, " escaped.
std::string html_escape(std::string_view text);

// Writes `html` to `path` through the program's atomic file writer.
void write_html(const std::string& path, const std::string& html);

}  // namespace meshtrain::report
