// metadata.json read back as untrusted input (checkpoint/metadata.h): a
// well-formed file passes; each malformed field is an Error (a shard of
// zero columns was a division by zero when loading; float and huge integers
// were converted with undefined behaviour).
#include "meshtrain/checkpoint/metadata.h"

#include <gtest/gtest.h>

#include <functional>

#include "meshtrain/checkpoint/checkpoint.h"
#include "meshtrain/core/error.h"
#include "meshtrain/model/layout.h"

namespace meshtrain::checkpoint {
namespace {

ModelConfig one_layer() {
  ModelConfig m;
  m.num_layers = 1;
  m.hidden_size = 32;
  m.num_attention_heads = 4;
  m.seq_length = 16;
  m.max_position_embeddings = 16;
  m.vocab_size = 200;
  return m;
}

// What the writer records for a serial run of `m`: one shard per tensor.
nlohmann::json metadata_of(const ModelConfig& m) {
  nlohmann::json j = {{"format", "meshtrain-checkpoint"}, {"format_version", kCheckpointFormatVersion},
                      {"iteration", 2}, {"skipped_steps", 0}, {"consumed_samples", 16},
                      {"rng", {{"seed", 1234}}}, {"dtypes", {{"weight", "F32"}, {"exp_avg", "F32"}}},
                      {"files", {{"rank_00000.safetensors", {{"rank", 0}, {"bytes", 4096}, {"crc32", 77}, {"block_bytes", 1024},
                                                             {"block_crc32", {1, 2, 3, 4}}}}}},
                      {"tensors", nlohmann::json::object()}};
  const Layout serial = Layout::build(m, ParallelConfig{}, 0, 0);
  for (const Unit& u : serial.units())
    for (const ParamSpec& s : u.params)
      j["tensors"][s.name] = {{"global_shape", {s.rows, s.cols}},
                              {"shards", {{{"file", "rank_00000.safetensors"}, {"global_offset", {0, 0}},
                                           {"local_shape", {s.rows, s.cols}}, {"flattened_range", {0, s.rows * s.cols}}}}}};
  return j;
}

void expect_refused(const std::function<void(nlohmann::json&)>& damage, const std::string& message) {
  nlohmann::json j = metadata_of(one_layer());
  damage(j);
  try {
    check_metadata_tensors(parse_metadata(j.dump(), "metadata.json"), one_layer());
    FAIL() << "accepted: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

nlohmann::json& first_shard(nlohmann::json& j) { return j["tensors"]["embedding.word"]["shards"][0]; }

TEST(CheckpointMetadata, WellFormedPasses) {
  const nlohmann::json j = metadata_of(one_layer());
  EXPECT_NO_THROW(check_metadata_tensors(parse_metadata(j.dump(), "metadata.json"), one_layer()));
}

TEST(CheckpointMetadata, RefusesMalformedFields) {
  expect_refused([](nlohmann::json& j) { j = nlohmann::json::array(); }, "is not meshtrain checkpoint metadata");
  expect_refused([](nlohmann::json& j) { j["format_version"] = 2.0; }, "metadata format version 2.0 is unknown");
  expect_refused([](nlohmann::json& j) { j["iteration"] = 2.5; }, "\"iteration\" must be an integer");
  expect_refused([](nlohmann::json& j) { j["iteration"] = 1e300; }, "\"iteration\" must be an integer");
  expect_refused([](nlohmann::json& j) { j["skipped_steps"] = 3; }, "\"skipped_steps\" must be an integer in [0, 2]");
  expect_refused([](nlohmann::json& j) { j.erase("dtypes"); }, "lacks \"dtypes\"");
  expect_refused([](nlohmann::json& j) { j["rng"] = 5; }, "lacks an unsigned integer seed");
  expect_refused([](nlohmann::json& j) { j["files"]["rank_00000.safetensors"]["crc32"] = -1; }, "\"crc32\"");
  expect_refused([](nlohmann::json& j) { j["files"]["../x"] = j["files"]["rank_00000.safetensors"]; },
                 "named in its folder");
  expect_refused([](nlohmann::json& j) { j["files"]["rank_00000.safetensors"]["block_crc32"] = {1, 2}; },
                 "one checksum per block");
  expect_refused([](nlohmann::json& j) { first_shard(j)["file"] = "other.safetensors"; }, "which \"files\" lacks");
  expect_refused([](nlohmann::json& j) { first_shard(j)["local_shape"] = {200, 0}; }, "\"local_shape\" must be");
  expect_refused([](nlohmann::json& j) { first_shard(j)["global_offset"] = {1, 0}; }, "run past the tensor's");
  expect_refused([](nlohmann::json& j) {
    const nlohmann::json& g = j["tensors"]["embedding.word"]["global_shape"];
    first_shard(j)["flattened_range"] = {0, g[0].get<int64_t>() * g[1].get<int64_t>() + 1};
  }, "flattened_range");
  expect_refused([](nlohmann::json& j) { first_shard(j)["flattened_range"] = {5, 5}; }, "flattened_range");
  expect_refused([](nlohmann::json& j) { j["tensors"]["embedding.word"]["global_shape"] = {INT64_MAX, 4}; },
                 "element count overflows");
  expect_refused([](nlohmann::json& j) { j["tensors"]["embedding.word"]["shards"] = nlohmann::json::array(); },
                 "has no shards");
  expect_refused([](nlohmann::json& j) { j["tensors"].erase("embedding.word"); }, "embedding.word of the model is missing");
  expect_refused([](nlohmann::json& j) { j["tensors"]["extra"] = j["tensors"]["embedding.word"]; },
                 "which this model does not have");
}

}  // namespace
}  // namespace meshtrain::checkpoint
