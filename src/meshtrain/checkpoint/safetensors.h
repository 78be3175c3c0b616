// The safetensors file layout (huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON header, then the raw
// tensor data. The header maps each tensor name to {"dtype", "shape",
// "data_offsets": [begin, end)} (offsets relative to the data section) and
// may hold "__metadata__" (string to string). meshtrain writes F32 and BF16
// tensors, pads the header with spaces to a multiple of 8 bytes, and lays
// the tensors out in the order given, without gaps, so standard tools
// (safetensors.safe_open, ...) read its checkpoint shards.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace meshtrain::checkpoint {

enum class StDtype { f32, bf16 };
const char* st_dtype_name(StDtype d);  // "F32", "BF16"
int st_dtype_bytes(StDtype d);

struct StEntry {
  std::string name;
  StDtype dtype = StDtype::f32;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // byte range in the data section
};

// The 8-byte length and the padded JSON header of `entries` (whose byte
// ranges must tile [0, total) in order).
std::string st_header_bytes(const std::vector<StEntry>& entries, const std::map<std::string, std::string>& metadata);

// Parses a header read from a file of `file_bytes` bytes: `prefix` holds at
// least its first 8 bytes; returns the header length N (the data section
// starts at 8 + N). Throws Error naming the problem (too short, length past
// the end).
int64_t st_header_length(const std::string& prefix, int64_t file_bytes);
// Parses the JSON header; checks every entry's dtype, that shape matches its
// byte range and that the ranges lie within the data section of
// `data_bytes`. Throws Error naming the problem.
std::map<std::string, StEntry> st_parse_header(const std::string& json, int64_t data_bytes);

}  // namespace meshtrain::checkpoint
