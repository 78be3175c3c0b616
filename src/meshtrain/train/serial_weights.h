// The whole model's weights in the serial run's flat order (Layout of the
// serial configuration), assembled from every rank's shards: for weight
// dumps, text generation and parity checks. Collective over the world.
#pragma once

#include <vector>

#include "meshtrain/comm/process_mesh.h"
#include "meshtrain/model/model_config.h"
#include "meshtrain/parallel/sharded_state.h"

namespace meshtrain {

// Each rank adds the elements it owns (DP rank 0, TP rank 0 for replicated
// tensors, the first stage for the tied embedding) into a world-wide sum
// that lands on every rank.
template <class T>
std::vector<float> gather_serial_weights(ShardedState<T>& state, ProcessMesh& mesh, const ModelConfig& m);

}  // namespace meshtrain
