#include "meshtrain/data/text_input.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"

namespace meshtrain::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSpace = " \t\r\n\f\v";

InputKind kind_of(const fs::path& p) {
  if (p.extension() == ".jsonl") return InputKind::jsonl;
  if (p.extension() == ".txt") return InputKind::text;
  return InputKind::fortune;
}

bool wanted(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.starts_with(".") && (!p.has_extension() || p.extension() == ".txt" || p.extension() == ".jsonl");
}

bool blank(std::string_view s) { return s.find_first_not_of(kSpace) == std::string_view::npos; }

void read_jsonl_line(const InputFile& f, int64_t n, std::string_view line,
                     const std::function<void(std::string_view)>& document) {
  if (blank(line)) return;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{} line {} is not JSON: {}", f.path, n, e.what()));
  }
  check(j.is_object() && j.contains("text") && j["text"].is_string(), "{} line {} has no \"text\" string", f.path, n);
  const std::string& text = j["text"].get_ref<const std::string&>();
  if (!blank(text)) document(text);
}

}  // namespace

void DocumentSplitter::line(std::string_view line) {
  std::string_view bare = line;
  while (!bare.empty() && (bare.back() == '\n' || bare.back() == '\r')) bare.remove_suffix(1);
  const bool separator = kind_ == InputKind::fortune ? bare == "%" : blank(bare);
  if (separator) {
    finish();
    return;
  }
  doc_.append(line);
  if (doc_.size() >= kMaxDocumentBytes) finish();
}

void DocumentSplitter::finish() {
  if (!blank(doc_)) emit_(doc_);
  doc_.clear();
}

std::vector<InputFile> list_input_files(const std::vector<std::string>& inputs) {
  std::vector<InputFile> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_regular_file(in, ec)) {
      files.push_back({in, kind_of(in)});
      continue;
    }
    check(fs::is_directory(in, ec), "input {} does not exist or is neither a file nor a folder", in);
    std::vector<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(in, ec))
      if (wanted(e.path()) && e.is_regular_file(ec)) names.push_back(e.path().string());
    check(!ec, "cannot list input folder {}: {}", in, ec.message());
    check(!names.empty(), "input folder {} holds no .txt, .jsonl or fortune files (files without an extension)", in);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) files.push_back({n, kind_of(n)});
  }
  check(!files.empty(), "no input given");
  return files;
}

void read_documents(const std::vector<InputFile>& files, const std::function<void(std::string_view)>& document,
                    const std::function<void(std::string_view)>& raw) {
  std::string line;
  for (const InputFile& f : files) {
    std::ifstream in(f.path, std::ios::binary);
    check(in.good(), "cannot read {}", f.path);
    if (raw) raw(fs::path(f.path).filename().string());
    DocumentSplitter split(f.kind, document);
    int64_t n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (!in.eof()) line.push_back('\n');
      if (raw) raw(line);
      if (f.kind == InputKind::jsonl) read_jsonl_line(f, n, line, document);
      else split.line(line);
    }
    check(!in.bad(), "cannot read {}", f.path);
    split.finish();
  }
}

}  // namespace meshtrain::data
