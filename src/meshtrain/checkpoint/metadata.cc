#include "meshtrain/checkpoint/metadata.h"

#include <array>
#include <cstdint>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "meshtrain/checkpoint/checkpoint.h"
#include "meshtrain/core/checked.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/json_integer.h"
#include "meshtrain/model/layout.h"

namespace meshtrain::checkpoint {

namespace {

const nlohmann::json& member(const nlohmann::json& j, const char* key, const std::string& where) {
  check(j.is_object() && j.contains(key), "{} lacks \"{}\"", where, key);
  return j.at(key);
}

int64_t integer(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi, const std::string& where) {
  return json_integer(member(j, key, where), lo, hi, fmt::format("{} \"{}\"", where, key));
}

// Two integers [a, b], each in [lo, hi].
std::array<int64_t, 2> pair(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi,
                            const std::string& where) {
  const nlohmann::json& v = member(j, key, where);
  check(v.is_array() && v.size() == 2, "{} \"{}\" must be a pair of integers (got {})", where, key, v.dump());
  const std::string what = fmt::format("{} \"{}\"", where, key);
  return {json_integer(v[0], lo, hi, what), json_integer(v[1], lo, hi, what)};
}

void check_shard(const nlohmann::json& sh, const std::array<int64_t, 2>& global, const nlohmann::json& files,
                 const std::string& where) {
  check(sh.is_object(), "{} is not an object", where);
  const nlohmann::json& file = member(sh, "file", where);
  check(file.is_string() && files.contains(file.get<std::string>()), "{} names file {}, which \"files\" lacks", where,
        file.dump());
  const auto off = pair(sh, "global_offset", 0, INT64_MAX, where), shape = pair(sh, "local_shape", 1, INT64_MAX, where);
  for (int d = 0; d < 2; ++d)
    check(shape[d] <= global[d] && off[d] <= global[d] - shape[d],
          "{}: offset [{}] and shape [{}] run past the tensor's [{}]", where, fmt::join(off, ", "),
          fmt::join(shape, ", "), fmt::join(global, ", "));
  const auto range = pair(sh, "flattened_range", 0, INT64_MAX, where);
  check(range[0] < range[1] && range[1] <= shape[0] * shape[1],
        "{}: flattened_range [{}] is empty or past its {} elements", where, fmt::join(range, ", "),
        shape[0] * shape[1]);
}

void check_tensor(const std::string& name, const nlohmann::json& t, const nlohmann::json& files) {
  const std::string where = "tensor " + name;
  const auto global = pair(t, "global_shape", 1, INT64_MAX, where);
  (void)checked_mul(global[0], global[1], where + " element count");
  const nlohmann::json& shards = member(t, "shards", where);
  check(shards.is_array() && !shards.empty(), "{} has no shards", where);
  for (size_t i = 0; i < shards.size(); ++i)
    check_shard(shards[i], global, files, fmt::format("{} shard {}", where, i));
}

}  // namespace

nlohmann::json parse_metadata(std::string_view text, const std::string& where) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  check(j.is_object() && j.contains("format") && j["format"] == "meshtrain-checkpoint",
        "{} is not meshtrain checkpoint metadata", where);
  const nlohmann::json& version = member(j, "format_version", where);
  int64_t v = -1;  // JSON reads 1 as an unsigned integer
  if (version.is_number_unsigned() && version.get<uint64_t>() <= uint64_t(INT64_MAX))
    v = int64_t(version.get<uint64_t>());
  else if (version.is_number_integer() && !version.is_number_unsigned())
    v = version.get<int64_t>();
  check(v == kCheckpointFormatVersion, "metadata format version {} is unknown (this meshtrain reads version {})",
        version.dump(), kCheckpointFormatVersion);
  const int64_t iteration = integer(j, "iteration", 0, INT32_MAX, where);
  integer(j, "skipped_steps", 0, iteration, where);
  integer(j, "consumed_samples", 0, INT64_MAX, where);
  const nlohmann::json& rng = member(j, "rng", where);
  check(rng.is_object() && rng.contains("seed") && rng["seed"].is_number_integer() &&
            (rng["seed"].is_number_unsigned() || rng["seed"].get<int64_t>() >= 0),
        "{} \"rng\" lacks an unsigned integer seed", where);
  const nlohmann::json& dtypes = member(j, "dtypes", where);
  const nlohmann::json& weight = member(dtypes, "weight", where + " \"dtypes\"");
  check(weight == "BF16" || weight == "F32", "{} \"dtypes\" weight is {} (BF16 or F32)", where, weight.dump());
  check(!dtypes.contains("master") || dtypes["master"] == "F32", "{} \"dtypes\" master is not F32", where);
  const nlohmann::json& files = member(j, "files", where);
  check(files.is_object(), "{} \"files\" is not an object", where);
  for (const auto& [name, f] : files.items()) {
    const std::string w = fmt::format("{} file {}", where, name);
    check(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
          "{}: a shard file is named in its folder", w);
    const int64_t bytes = integer(f, "bytes", 0, INT64_MAX, w);
    integer(f, "crc32", 0, UINT32_MAX, w);
    const int64_t block = integer(f, "block_bytes", 1, INT64_MAX, w);
    const nlohmann::json& crcs = member(f, "block_crc32", w);
    check(crcs.is_array() && int64_t(crcs.size()) == bytes / block + (bytes % block != 0),
          "{}: block_crc32 does not hold one checksum per block", w);
    for (const nlohmann::json& c : crcs) json_integer(c, 0, UINT32_MAX, w + " block_crc32");
  }
  const nlohmann::json& tensors = member(j, "tensors", where);
  check(tensors.is_object(), "{} \"tensors\" is not an object", where);
  for (const auto& [name, t] : tensors.items()) check_tensor(name, t, files);
  return j;
}

void check_metadata_tensors(const nlohmann::json& meta, const ModelConfig& m) {
  const Layout serial = Layout::build(m, ParallelConfig{}, 0, 0);
  const nlohmann::json& tensors = meta.at("tensors");
  std::set<std::string> names;
  for (const Unit& u : serial.units()) {
    for (const ParamSpec& s : u.params) {
      names.insert(s.name);
      check(tensors.contains(s.name), "tensor {} of the model is missing", s.name);
      const nlohmann::json& t = tensors.at(s.name);
      const std::vector<int64_t> shape = t.at("global_shape"), want{s.rows, s.cols};
      check(shape == want, "tensor {} has shape [{}], the model needs [{}, {}]", s.name, fmt::join(shape, ", "),
            s.rows, s.cols);
      int64_t covered = 0;
      for (const auto& sh : t.at("shards")) {
        const std::vector<int64_t> r = sh.at("flattened_range");
        covered = checked_add(covered, r[1] - r[0], "tensor " + s.name + " shard elements");
      }
      check(covered == s.rows * s.cols, "tensor {}: its shards hold {} of its {} elements", s.name, covered,
            s.rows * s.cols);
    }
  }
  for (const auto& [name, t] : tensors.items())
    check(names.count(name) == 1, "it holds tensor {}, which this model does not have", name);
}

}  // namespace meshtrain::checkpoint
