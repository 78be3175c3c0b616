#include "meshtrain/data/bpe_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"

#ifndef MESHTRAIN_SOURCE_DIR
#define MESHTRAIN_SOURCE_DIR "."
#endif

namespace meshtrain::data {

namespace fs = std::filesystem;

namespace {

constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();
constexpr const char* kEndOfText = "<|endoftext|>";

std::string read_text(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot read {} {}", what, path);
  std::ostringstream s;
  s << in.rdbuf();
  return std::move(s).str();
}

// RFC 4648 base64; false on a character outside the alphabet.
bool base64_decode(std::string_view in, std::string* out) {
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') break;
    else return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return true;
}

std::string base64_encode(std::string_view b) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < b.size(); i += 3) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(b[i])) << 16;
    if (i + 1 < b.size()) v |= static_cast<uint32_t>(static_cast<unsigned char>(b[i + 1])) << 8;
    if (i + 2 < b.size()) v |= static_cast<unsigned char>(b[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < b.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < b.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

// GPT-2's encoder.json spells each byte as one printable code point
// (bytes_to_unicode in its encoder.py): the printable Latin-1 bytes as
// themselves, the others as 256, 257, ... in byte order. Returns the byte of
// each code point below 512, -1 elsewhere.
std::vector<int> gpt2_unicode_to_byte() {
  std::vector<int> to_byte(512, -1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    to_byte[printable ? b : next++] = b;
  }
  return to_byte;
}

// The bytes an encoder.json key stands for; false when it is not in the alphabet.
bool gpt2_key_bytes(std::string_view key, const std::vector<int>& to_byte, std::string* out) {
  out->clear();
  for (size_t i = 0; i < key.size();) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    uint32_t cp;
    if (c < 0x80) cp = c, i += 1;
    else if ((c & 0xe0) == 0xc0 && i + 1 < key.size()) cp = ((c & 0x1fu) << 6) | (key[i + 1] & 0x3f), i += 2;
    else return false;
    if (cp >= to_byte.size() || to_byte[cp] < 0) return false;
    out->push_back(static_cast<char>(to_byte[cp]));
  }
  return true;
}

// tiktoken's patterns are Rust regular expressions, whose \s is Unicode's
// White_Space; PCRE2's \s (with UCP) lacks one of its characters, U+0085.
std::string pcre2_pattern(std::string_view rust) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < rust.size(); ++i) {
    const char c = rust[i];
    if (c == '\\' && i + 1 < rust.size()) {
      const char n = rust[++i];
      if (n == 's') out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      else if (n == 'S' && !in_class) out += "[^\\s\\x{85}]";
      else out += {c, n};
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

struct BpeTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() {
    if (code != nullptr) pcre2_code_free(code);
  }
};

BpeTokenizer::BpeTokenizer(RankMap ranks, const std::string& pattern,
                           const std::unordered_map<std::string, int32_t>& special, int vocab_size,
                           std::string name)
    : ranks_(std::move(ranks)), pattern_(pattern), special_(special), regex_(std::make_unique<Regex>()),
      name_(std::move(name)) {
  int32_t top = -1;
  for (const auto& [b, id] : ranks_) top = std::max(top, id);
  for (const auto& [s, id] : special) top = std::max(top, id);
  vocab_size_ = vocab_size > 0 ? vocab_size : top + 1;
  check(top < vocab_size_, "tokenizer {}: id {} is outside its vocabulary of {}", name_, top, vocab_size_);
  bytes_.assign(static_cast<size_t>(vocab_size_), std::string());
  std::vector<bool> used(static_cast<size_t>(vocab_size_), false);
  auto place = [&](const std::string& b, int32_t id) {
    check(id >= 0 && !used[id], "tokenizer {}: id {} is negative or given twice", name_, id);
    used[id] = true;
    bytes_[id] = b;
  };
  for (const auto& [b, id] : ranks_) place(b, id);
  for (const auto& [s, id] : special) place(s, id);
  for (int b = 0; b < 256; ++b)
    check(ranks_.contains(std::string(1, static_cast<char>(b))), "tokenizer {} has no token for byte {}", name_, b);
  const auto eot = special.find(kEndOfText);
  check(eot != special.end(), "tokenizer {} has no {} token", name_, kEndOfText);
  eot_ = eot->second;

  const std::string pat = pcre2_pattern(pattern);
  int err = 0;
  PCRE2_SIZE at = 0;
  regex_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                               PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
  if (regex_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw Error(fmt::format("tokenizer {}: its pattern does not compile at offset {}: {}", name_, at,
                            reinterpret_cast<const char*>(msg)));
  }
  pcre2_jit_compile(regex_->code, PCRE2_JIT_COMPLETE);  // interpreted if JIT is unavailable
}

BpeTokenizer::~BpeTokenizer() = default;

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>* out) const {
  if (const auto it = ranks_.find(piece); it != ranks_.end()) {
    out->push_back(it->second);
    return;
  }
  // parts[i] = (start of part i, rank of parts i and i+1 merged); two sentinels.
  std::vector<std::pair<size_t, int32_t>> parts;
  parts.reserve(piece.size() + 1);
  const auto rank_of = [&](size_t begin, size_t end) {
    const auto it = ranks_.find(piece.substr(begin, end - begin));
    return it == ranks_.end() ? kNoRank : it->second;
  };
  for (size_t i = 0; i + 1 < piece.size(); ++i) parts.emplace_back(i, rank_of(i, i + 2));
  parts.emplace_back(piece.size() - 1, kNoRank);
  parts.emplace_back(piece.size(), kNoRank);
  while (parts.size() > 2) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < parts.size(); ++i)
      if (parts[i].second < parts[best].second) best = i;
    if (parts[best].second == kNoRank) break;
    parts[best].second = best + 3 < parts.size() ? rank_of(parts[best].first, parts[best + 3].first) : kNoRank;
    if (best > 0) parts[best - 1].second = rank_of(parts[best - 1].first, parts[best + 2].first);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const int32_t r = rank_of(parts[i].first, parts[i + 1].first);
    MT_ASSERT(r != kNoRank);
    out->push_back(r);
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(regex_->code, nullptr);
  struct Free {
    pcre2_match_data* md;
    ~Free() { pcre2_match_data_free(md); }
  } free_md{md};
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(regex_->code, subject, text.size(), pos, 0, md, nullptr);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t begin = rc > 0 ? ov[0] : text.size(), end = rc > 0 ? ov[1] : text.size();
    if (begin > pos) encode_piece(text.substr(pos, begin - pos), &ids);  // bytes no match covers
    if (end > begin) encode_piece(text.substr(begin, end - begin), &ids);
    pos = end > pos ? end : pos + 1;
  }
  return ids;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    check(id >= 0 && id < vocab_size_, "cannot decode token {} at position {}: tokenizer {} has ids 0..{}", id, i,
          name_, vocab_size_ - 1);
    if (id != eot_) text += bytes_[id];
  }
  return text;
}

std::string BpeTokenizer::to_npm_encoder_json() const {
  std::string ranks;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    const auto it = ranks_.find(bytes_[id]);
    if (it != ranks_.end() && it->second == id) ranks += fmt::format("! {} {}\n", id, base64_encode(bytes_[id]));
  }
  return nlohmann::json{{"explicit_n_vocab", vocab_size_},
                        {"pat_str", pattern_},
                        {"special_tokens", special_},
                        {"bpe_ranks", ranks}}
             .dump();
}

// ------------------------------------------------------------------- files --

namespace {

std::unique_ptr<BpeTokenizer> load_tiktoken_file(const std::string& path) {
  std::istringstream in(read_text(path, "tokenizer ranks"));
  RankMap ranks;
  std::string line, bytes;
  int64_t n = 0;
  int32_t top = -1;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    char* end = nullptr;
    const long rank = sp == std::string::npos ? -1 : std::strtol(line.c_str() + sp + 1, &end, 10);
    check(rank >= 0 && base64_decode(std::string_view(line).substr(0, sp), &bytes),
          "tokenizer ranks {} line {} is not '<base64> <rank>'", path, n);
    ranks.emplace(bytes, static_cast<int32_t>(rank));
    top = std::max(top, static_cast<int32_t>(rank));
  }
  return std::make_unique<BpeTokenizer>(std::move(ranks), kGpt2Pattern,
                                        std::unordered_map<std::string, int32_t>{{kEndOfText, top + 1}}, 0, path);
}

std::unique_ptr<BpeTokenizer> load_encoder_json(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text(path, "tokenizer encoder"));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("tokenizer encoder {} is not JSON: {}", path, e.what()));
  }
  const std::vector<int> to_byte = gpt2_unicode_to_byte();
  RankMap ranks;
  std::unordered_map<std::string, int32_t> special;
  std::string bytes;
  for (const auto& [key, id] : j.items()) {
    check(id.is_number_integer(), "tokenizer encoder {}: the id of '{}' is not an integer", path, key);
    if (key == kEndOfText) special[key] = id.get<int32_t>();
    else if (gpt2_key_bytes(key, to_byte, &bytes)) ranks.emplace(bytes, id.get<int32_t>());
    else throw Error(fmt::format("tokenizer encoder {}: '{}' is not in GPT-2's byte alphabet", path, key));
  }
  // Merge i of vocab.bpe must make token 256 + i: then merging by the lowest
  // rank is merging in vocab.bpe's order.
  const std::string merges = (fs::path(path).parent_path() / "vocab.bpe").string();
  std::istringstream in(read_text(merges, "tokenizer merges (vocab.bpe beside encoder.json)"));
  std::string line, a, b;
  int32_t i = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line.starts_with("#version")) continue;
    const size_t sp = line.find(' ');
    check(sp != std::string::npos && gpt2_key_bytes(line.substr(0, sp), to_byte, &a) &&
              gpt2_key_bytes(line.substr(sp + 1), to_byte, &b),
          "tokenizer merges {}: line '{}' is not two tokens", merges, line);
    const auto it = ranks.find(a + b);
    check(it != ranks.end() && it->second == 256 + i,
          "tokenizer merges {}: merge {} ('{}') does not make token {} of {}", merges, i, line, 256 + i, path);
    ++i;
  }
  return std::make_unique<BpeTokenizer>(std::move(ranks), kGpt2Pattern, special, 0, path);
}

std::unique_ptr<BpeTokenizer> load_npm_encoder(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text(path, "tokenizer encoder"));
    RankMap ranks;
    std::istringstream in(j.at("bpe_ranks").get<std::string>());
    std::string line, bytes;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      std::istringstream fields(line);
      std::string skip, token;
      int32_t rank = -1;
      fields >> skip >> rank;
      check(rank >= 0, "tokenizer encoder {}: a bpe_ranks line has no first rank", path);
      while (fields >> token) {
        check(base64_decode(token, &bytes), "tokenizer encoder {}: '{}' is not base64", path, token);
        ranks.emplace(bytes, rank++);
      }
    }
    return std::make_unique<BpeTokenizer>(
        std::move(ranks), j.at("pat_str").get<std::string>(),
        j.at("special_tokens").get<std::unordered_map<std::string, int32_t>>(), j.value("explicit_n_vocab", 0),
        path);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("tokenizer encoder {} is malformed: {}", path, e.what()));
  }
}

}  // namespace

std::unique_ptr<BpeTokenizer> load_bpe_tokenizer(const std::string& path) {
  std::error_code ec;
  check(fs::is_regular_file(path, ec), "tokenizer file {} does not exist", path);
  if (path.ends_with(".tiktoken")) return load_tiktoken_file(path);
  if (fs::path(path).filename() == "encoder.json") return load_encoder_json(path);
  if (path.ends_with(".json")) return load_npm_encoder(path);
  throw Error(fmt::format("tokenizer file {} is not a .tiktoken, encoder.json or tiktoken encoder .json", path));
}

std::string gpt2_ranks_path() {
  if (const char* env = std::getenv("MESHTRAIN_GPT2_RANKS"); env != nullptr && *env != '\0') return env;
  const std::string npm = std::string(MESHTRAIN_SOURCE_DIR) + "/third_party/node/node_modules/tiktoken/encoders/gpt2.json";
  std::error_code ec;
  check(fs::is_regular_file(npm, ec),
        "GPT-2's ranks are not installed: run scripts/install-deps (it installs the tiktoken npm package under "
        "third_party/node) or set MESHTRAIN_GPT2_RANKS to a gpt2 .tiktoken, encoder.json or tiktoken encoder file");
  return npm;
}

}  // namespace meshtrain::data
