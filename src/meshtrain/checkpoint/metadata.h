// metadata.json of a checkpoint (checkpoint.h says what it holds), read back
// as untrusted input: every field loading uses is checked for presence, type
// and range here, so that loading (resharding by shard geometry) can trust
// it. Each function throws Error naming the field.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "meshtrain/model/model_config.h"

namespace meshtrain::checkpoint {

// The text of a metadata.json (`where` names it in errors): a JSON object of
// format "meshtrain-checkpoint" and version kCheckpointFormatVersion with
// iteration, skipped_steps and consumed_samples (integers >= 0), rng.seed,
// dtypes (weight BF16 or F32, optional master F32), files (each with bytes,
// crc32, block_bytes and one block_crc32 per block) and tensors, each with a 2-d global_shape and shards whose
// file is one of `files`, and whose global_offset, local_shape and
// flattened_range lie inside the tensor and the shard.
nlohmann::json parse_metadata(std::string_view text, const std::string& where);

// Every tensor of `m` is in `meta` (as parse_metadata returned it) with its
// global shape, its shards hold all its elements, and there is no other tensor.
void check_metadata_tensors(const nlohmann::json& meta, const ModelConfig& m);

}  // namespace meshtrain::checkpoint
