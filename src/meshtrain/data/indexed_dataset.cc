#include "meshtrain/data/indexed_dataset.h"

#include <cstring>
#include <filesystem>

#include "meshtrain/core/error.h"

namespace meshtrain::data {

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr size_t kFixedBytes = 9 + 8 + 1 + 8 + 8;

// Megatron's DType codes; floats are not token ids.
TokenType token_type_of(uint8_t code, const std::string& idx) {
  switch (code) {
    case 1: return TokenType::u8;
    case 2: return TokenType::i8;
    case 3: return TokenType::i16;
    case 4: return TokenType::i32;
    case 5: return TokenType::i64;
    case 8: return TokenType::u16;
    default: break;
  }
  throw Error(fmt::format("indexed dataset {} has dtype code {}, not an integer token type "
                          "(1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 8 uint16)", idx, code));
}

template <class T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

bool is_indexed_dataset(const std::string& prefix) {
  std::error_code ec;
  return std::filesystem::is_regular_file(prefix + ".idx", ec);
}

IndexedDataset::IndexedDataset(const std::string& prefix) : prefix_(prefix) {
  const std::string idx_path = prefix + ".idx", bin_path = prefix + ".bin";
  const MappedFile idx(idx_path, "indexed dataset index");
  const char* p = idx.data();
  check(idx.size() >= kFixedBytes && std::memcmp(p, kMagic, 9) == 0,
        "indexed dataset index {} does not start with Megatron's MMIDIDX header", idx_path);
  const uint64_t version = load<uint64_t>(p + 9);
  check(version == 1, "indexed dataset index {} has version {}; only version 1 is supported", idx_path,
        version);
  const TokenType type = token_type_of(load<uint8_t>(p + 17), idx_path);
  const uint64_t seqs = load<uint64_t>(p + 18), docs = load<uint64_t>(p + 26);
  const uint64_t need = kFixedBytes + seqs * (4 + 8) + docs * 8;
  check(seqs < (1ull << 40) && docs < (1ull << 40) && idx.size() >= need,
        "indexed dataset index {} is truncated: {} sequences and {} documents need {} bytes, it has {}",
        idx_path, seqs, docs, need, idx.size());
  num_sequences_ = static_cast<int64_t>(seqs);
  num_documents_ = docs > 0 ? static_cast<int64_t>(docs) - 1 : 0;  // document_indices holds a final bound

  // Sequences back to back: pointer[i] = sum of the lengths before i, in bytes.
  const char* lengths = p + kFixedBytes;
  const char* pointers = lengths + seqs * 4;
  const int64_t width = token_type_bytes(type);
  int64_t tokens = 0;
  for (uint64_t i = 0; i < seqs; ++i) {
    const int32_t len = load<int32_t>(lengths + 4 * i);
    const int64_t ptr = load<int64_t>(pointers + 8 * i);
    check(len >= 0, "indexed dataset index {}: sequence {} has negative length {}", idx_path, i, len);
    check(ptr == tokens * width,
          "indexed dataset {}: sequence {} starts at byte {}, not right after the previous one (byte {}); "
          "only back-to-back sequences are supported",
          prefix, i, ptr, tokens * width);
    tokens += len;
  }
  bin_ = MappedFile(bin_path, "indexed dataset tokens");
  check(static_cast<int64_t>(bin_.size()) == tokens * width,
        "indexed dataset {}: the index describes {} tokens of {} ({} bytes), {} holds {} bytes", prefix,
        tokens, token_type_name(type), tokens * width, bin_path, bin_.size());
  tokens_ = TokenArray{bin_.data(), tokens, type};
}

}  // namespace meshtrain::data
