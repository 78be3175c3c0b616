#include "meshtrain/data/token_dataset.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>

#include "meshtrain/core/error.h"

namespace meshtrain::data {

namespace fs = std::filesystem;

namespace {

bool is_pattern(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// The Megatron prefix `path` names (PREFIX, PREFIX.bin or PREFIX.idx), or "".
std::string indexed_prefix(const std::string& path) {
  if (path.ends_with(".bin") || path.ends_with(".idx")) {
    const std::string prefix = path.substr(0, path.size() - 4);
    if (is_indexed_dataset(prefix)) return prefix;
  }
  return is_indexed_dataset(path) ? path : "";
}

}  // namespace

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> out;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i)
      if (fs::is_regular_file(g.gl_pathv[i])) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

TokenDataset::TokenDataset(const std::string& spec) : spec_(spec) {
  if (!is_pattern(spec)) {
    add(spec);
    return;
  }
  const std::vector<std::string> files = glob_files(spec);
  check(!files.empty(), "data path pattern '{}' matches no file", spec);
  files_.reserve(files.size());
  for (const std::string& f : files) add(f);
}

void TokenDataset::add(const std::string& path) {
  if (const std::string prefix = indexed_prefix(path); !prefix.empty()) {
    indexed_.emplace_back(prefix);
    parts_.push_back(Part{prefix, indexed_.back().array(), size_});
  } else {
    files_.emplace_back(path);
    parts_.push_back(Part{path, files_.back().array(), size_});
  }
  size_ += parts_.back().tokens.count;
}

void TokenDataset::read(int64_t start, int64_t n, int32_t* out) const {
  MT_ASSERT(start >= 0 && n >= 0 && start + n <= size_);
  // The last part starting at or before `start`.
  auto it = std::upper_bound(parts_.begin(), parts_.end(), start,
                             [](int64_t s, const Part& p) { return s < p.start; });
  MT_ASSERT(it != parts_.begin());
  --it;
  while (n > 0) {
    // Empty parts are skipped over.
    const int64_t off = start - it->start;
    const int64_t take = std::min(n, it->tokens.count - off);
    if (take > 0) {
      it->tokens.read(off, take, out);
      out += take;
      start += take;
      n -= take;
    }
    ++it;
  }
}

void TokenDataset::validate_vocab(int vocab_size) const {
  check(vocab_size > 0, "cannot check {} against a vocabulary of {} tokens", spec_, vocab_size);
  for (const Part& p : parts_) {
    const int64_t i = p.tokens.first_outside(vocab_size);
    check(i < 0, "token file {} holds token {} at position {}, outside the vocabulary of {}", p.path,
          i < 0 ? 0 : p.tokens.at(i), i, vocab_size);
  }
}

DataPaths resolve_data_path(const std::string& data_path) {
  DataPaths d;
  std::error_code ec;
  if (fs::is_directory(data_path, ec)) {
    const fs::path dir(data_path);
    d.train = (dir / "train.bin").string();
    check(fs::exists(d.train, ec), "training token file {} does not exist", d.train);
    if (fs::exists(dir / "val.bin", ec)) d.val = (dir / "val.bin").string();
    for (const char* name : {"tokenizer.model", "tokenizer.json", "tokenizer.tiktoken"})
      if (fs::exists(dir / name, ec)) d.tokenizer = (dir / name).string();
    return d;
  }
  d.train = data_path;
  if (is_pattern(data_path)) {
    check(!glob_files(data_path).empty(), "data path pattern '{}' matches no file", data_path);
    const fs::path p(data_path);
    std::string name = p.filename().string();
    if (const size_t at = name.rfind("train"); at != std::string::npos) {
      name.replace(at, 5, "val");
      const std::string val = (p.parent_path() / name).string();
      if (!glob_files(val).empty()) d.val = val;
    }
    return d;
  }
  check(fs::exists(data_path, ec) || !indexed_prefix(data_path).empty(), "data path {} does not exist",
        data_path);
  return d;
}

}  // namespace meshtrain::data
