// CSV reading (RFC 4180): fields separated by commas, optionally quoted;
// inside quotes, commas and line breaks are data and "" is a quote. The
// first record is the header, its names kept as columns are asked for (lower
// case, trimmed, inner spaces and hyphens as one underscore: "Num GPUs" is
// num_gpus); a leading UTF-8 byte order mark is dropped. A
// record whose field count differs from the header's is reported in
// `errors` (with its line number) and skipped.
#pragma once

#include <istream>
#include <map>
#include <string>
#include <vector>

namespace meshtrain::tune {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int> row_lines;        // line where each row starts (1-based)
  std::vector<std::string> errors;   // one line per skipped record

  // Column index by name, -1 when absent.
  int column(const std::string& name) const;
  // Field of row r in column `name`, "" when the column is absent.
  const std::string& field(size_t r, const std::string& name) const;
};

CsvTable read_csv(std::istream& in);
CsvTable read_csv_file(const std::string& path);  // throws Error if unreadable

}  // namespace meshtrain::tune
