// Calibration: a SystemSpec for the machine the benchmarks ran on, from the
// JSON that `meshtrain bench gemm --out` and `meshtrain bench comm --out`
// wrote (configs/systems/local.json is made this way; `meshtrain bench
// system` is the command).
//
// From bench gemm (run with all of the node's cores):
//   peak_tflops_<dtype>        its square-matmul peak per OpenMP thread x the
//                              cores of one rank (cores / ranks_per_node, at
//                              least 1: with more ranks than cores the file
//                              says cores_per_node and the ranks time-share
//                              them, time_sharing.h)
//   matmul_efficiency_<dtype>  its curve of achieved / peak over the smallest
//                              matmul dimension (median over shapes)
// From bench comm (the world group of one node, every rank on this node):
//   the node's one link class, spanning ranks_per_node ranks, in
//   collective.h's terms (time = steps x latency + bytes x factor /
//   (bandwidth x efficiency(bytes))): latency per step 0.9 x the least
//   time / steps of any measured size and operation, bandwidth the
//   best latency-corrected bus bandwidth of any operation, and per operation
//   (all-reduce as the link's `efficiency`, all-gather, reduce-scatter and
//   sendrecv as `op_efficiency`) a curve over message bytes that reproduces
//   each measured time: eff(b) = b x factor / (bandwidth x (t(b) - steps x
//   latency)), at most 1. The per-size tables are thus part of the system
//   file. Without bench comm, base's widest link is kept, spanning the node.
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

// Each measured point of each operation in a bench comm file beside the
// spec's time for it: collective_time() (all-reduce, all-gather,
// reduce-scatter) or p2p_time() (sendrecv).
struct CommCheck {
  std::string op;
  double bytes = 0, measured_s = 0, predicted_s = 0;
};
std::vector<CommCheck> check_comm(const SystemSpec& s, const nlohmann::json& comm);

}  // namespace meshtrain::perf
