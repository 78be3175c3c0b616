// Calibration: a SystemSpec for the machine the benchmarks ran on, from the
// JSON that `meshtrain bench gemm --out` and `meshtrain bench comm --out`
// wrote (configs/systems/local.json is made this way; `meshtrain bench
// system` is the command).
//
// From bench gemm (run with all of the node's cores):
//   peak_tflops_<dtype>        its square-matmul peak per OpenMP thread x the
//                              cores of one rank (cores / ranks_per_node)
//   matmul_efficiency_<dtype>  its curve of achieved / peak over the smallest
//                              matmul dimension (median over shapes)
// From bench comm (the world group of one node, every rank on this node):
//   the node's one link class, spanning ranks_per_node ranks: latency per
//   ring step 0.9 x the smallest all-reduce's time / its 2(n-1) steps,
//   bandwidth the best latency-corrected bus bandwidth
//   max b x 2(n-1)/n / (t(b) - 2(n-1) latency), and an efficiency curve over
//   message bytes that makes collective.h's ring formula reproduce each
//   measured all-reduce time: eff(b) = b x 2(n-1)/n / (bandwidth x (t(b) -
//   2(n-1) latency)), at most 1. The per-size table is thus part of the
//   system file. Without bench comm, base's widest link is kept, spanning
//   the node.
// Everything else (memory bandwidth, element-wise efficiency, attention
// efficiency, network) is kept from `base`; `sources` says which numbers
// came from which file.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/perf/system_spec.h"

namespace meshtrain::perf {

struct HostInfo {
  int ranks_per_node = 1;     // devices_per_node of the result
  int cores = 1;              // the node's cores
  double memory_bytes = 0;    // the node's memory; 0: keep base's per-device figure
};

// Either JSON may be null (that part of base is kept). Throws Error when a
// file is not the output it should be or lacks what is needed.
SystemSpec calibrate_system(SystemSpec base, const nlohmann::json& gemm, const nlohmann::json& comm,
                            const HostInfo& host);

// Each measured point of each operation in a bench comm file beside
// collective_time() of the spec (all-reduce, all-gather, reduce-scatter).
struct CommCheck {
  std::string op;
  double bytes = 0, measured_s = 0, predicted_s = 0;
};
std::vector<CommCheck> check_comm(const SystemSpec& s, const nlohmann::json& comm);

}  // namespace meshtrain::perf
