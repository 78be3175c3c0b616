#include "meshtrain/checkpoint/safetensors.h"

#include <cstring>

#include <nlohmann/json.hpp>

#include "meshtrain/core/checked.h"
#include "meshtrain/core/error.h"

namespace meshtrain::checkpoint {

const char* st_dtype_name(StDtype d) { return d == StDtype::f32 ? "F32" : "BF16"; }
int st_dtype_bytes(StDtype d) { return d == StDtype::f32 ? 4 : 2; }

std::string st_header_bytes(const std::vector<StEntry>& entries, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h;
  if (!metadata.empty()) h["__metadata__"] = metadata;
  for (const StEntry& e : entries)
    h[e.name] = {{"dtype", st_dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  std::string json = h.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);  // little-endian
  return out + json;
}

int64_t st_header_length(const std::string& prefix, int64_t file_bytes) {
  check(file_bytes >= 8 && prefix.size() >= 8, "file of {} bytes is too short for a safetensors header", file_bytes);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(prefix[i])) << (8 * i);
  check(n <= uint64_t(file_bytes - 8), "safetensors header length {} runs past the end of the {}-byte file", n,
        file_bytes);
  return static_cast<int64_t>(n);
}

std::map<std::string, StEntry> st_parse_header(const std::string& json, int64_t data_bytes) {
  const nlohmann::json h = nlohmann::json::parse(json, nullptr, false);
  check(h.is_object(), "safetensors header is not a JSON object");
  std::map<std::string, StEntry> out;
  for (const auto& [name, v] : h.items()) {
    if (name == "__metadata__") continue;
    check(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
          "safetensors entry {} lacks dtype, shape or data_offsets", name);
    StEntry e;
    e.name = name;
    const std::string dt = v["dtype"].is_string() ? v["dtype"].get<std::string>() : "";
    check(dt == "F32" || dt == "BF16", "safetensors entry {} has dtype {} (F32 or BF16 expected)", name, dt);
    e.dtype = dt == "F32" ? StDtype::f32 : StDtype::bf16;
    int64_t count = 1;
    for (const auto& d : v["shape"]) {
      check(d.is_number_integer() && d.get<int64_t>() >= 0, "safetensors entry {} has a bad shape", name);
      e.shape.push_back(d.get<int64_t>());
      count = checked_mul(count, e.shape.back(), "safetensors entry " + name + " shape");
    }
    const auto& off = v["data_offsets"];
    check(off.is_array() && off.size() == 2 && off[0].is_number_integer() && off[1].is_number_integer(),
          "safetensors entry {} has bad data_offsets", name);
    e.begin = off[0].get<int64_t>();
    e.end = off[1].get<int64_t>();
    check(0 <= e.begin && e.begin <= e.end && e.end <= data_bytes,
          "safetensors entry {} spans bytes [{}, {}) beyond the {}-byte data section", name, e.begin, e.end,
          data_bytes);
    check(e.end - e.begin == checked_mul(count, st_dtype_bytes(e.dtype), "safetensors entry " + name + " bytes"), "safetensors entry {}: shape and byte range disagree",
          name);
    out.emplace(name, std::move(e));
  }
  return out;
}

}  // namespace meshtrain::checkpoint
