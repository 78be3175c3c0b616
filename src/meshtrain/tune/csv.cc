#include "meshtrain/tune/csv.h"

#include <fstream>

#include "meshtrain/core/error.h"
#include "meshtrain/core/text.h"

namespace meshtrain::tune {

int CsvTable::column(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return int(i);
  return -1;
}

const std::string& CsvTable::field(size_t r, const std::string& name) const {
  static const std::string empty;
  const int c = column(name);
  if (c < 0 || size_t(c) >= rows[r].size()) return empty;
  return rows[r][c];
}

namespace {

// Reads one record; returns false at end of input. `line` counts lines.
bool read_record(std::istream& in, std::vector<std::string>& out, int& line, bool& unterminated) {
  out.clear();
  unterminated = false;
  std::string field;
  bool quoted = false, any = false;
  char ch;
  while (in.get(ch)) {
    any = true;
    if (quoted) {
      if (ch == '"') {
        if (in.peek() == '"') {
          in.get(ch);
          field += '"';
        } else {
          quoted = false;
        }
      } else {
        if (ch == '\n') ++line;
        field += ch;
      }
      continue;
    }
    if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      out.push_back(std::move(field));
      field.clear();
    } else if (ch == '\n') {
      ++line;
      out.push_back(std::move(field));
      return true;
    } else if (ch != '\r') {
      field += ch;
    }
  }
  if (!any) return false;
  unterminated = quoted;
  out.push_back(std::move(field));
  return true;
}

// A header name as columns are asked for: ASCII lower case, without the
// spaces around it, inner runs of spaces and hyphens one underscore
// ("Num GPUs" -> "num_gpus", " seq-len " -> "seq_len").
std::string column_key(const std::string& name) {
  std::string key;
  bool gap = false;
  for (char ch : ascii_lower(name)) {
    if (ch == ' ' || ch == '\t' || ch == '-') {
      gap = !key.empty();
      continue;
    }
    if (gap) key += '_';
    gap = false;
    key += ch;
  }
  return key;
}

}  // namespace

CsvTable read_csv(std::istream& in) {
  CsvTable t;
  int line = 1;
  bool unterminated = false;
  // A UTF-8 byte order mark (spreadsheet exports) is not part of the first column's name.
  if (in.peek() == 0xEF) {
    char bom[3] = {};
    in.read(bom, 3);
    if (std::string(bom, 3) != "\xEF\xBB\xBF") {
      in.clear();
      in.seekg(0);
    }
  }
  if (!read_record(in, t.header, line, unterminated)) return t;
  for (std::string& name : t.header) name = column_key(name);
  std::vector<std::string> rec;
  int start = line;
  while (read_record(in, rec, line, unterminated)) {
    const bool blank = rec.size() == 1 && rec[0].empty();
    if (unterminated)
      t.errors.push_back(fmt::format("line {}: unterminated quoted field", start));
    else if (!blank && rec.size() != t.header.size())
      t.errors.push_back(fmt::format("line {}: {} fields, header has {}", start, rec.size(), t.header.size()));
    else if (!blank) {
      t.rows.push_back(rec);
      t.row_lines.push_back(start);
    }
    start = line;
  }
  return t;
}

CsvTable read_csv_file(const std::string& path) {
  std::ifstream f(path);
  check(f.good(), "cannot read CSV file '{}'", path);
  return read_csv(f);
}

}  // namespace meshtrain::tune
