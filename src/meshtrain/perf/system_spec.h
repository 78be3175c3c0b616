// SystemSpec: what the performance model knows about a machine, loaded from
// configs/systems/<name>.json. Every number is per device (one GPU, one GCD
// of an MI250X, one CPU rank) unless it says otherwise, and the file names
// the source of each in "sources".
//
// Links. Inside a node, devices are joined by link classes, each spanning an
// aligned block of `span` consecutive ranks (Frontier: "package" spans 2 --
// the two GCDs of one MI250X -- and "node" spans 8). A group of ranks uses
// the smallest class whose aligned block holds all of its ranks on a node;
// ranks on different nodes talk over the node's NICs, which all devices of
// the node share.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "meshtrain/perf/curve.h"

namespace meshtrain::perf {

enum class LinkOp { all_reduce, all_gather, reduce_scatter, p2p };
inline constexpr int kNumLinkOps = 4;
inline constexpr const char* kLinkOpNames[kNumLinkOps] = {"all_reduce", "all_gather", "reduce_scatter", "p2p"};

struct LinkClass {
  std::string name;
  int span = 1;               // aligned block of consecutive ranks it joins
  double bandwidth_gbs = 0;   // per device, per direction, GB/s (1e9 bytes/s)
  double latency_s = 0;       // per message step of a collective
  Curve efficiency;           // achieved / nominal bandwidth, over bytes per call
  // Optional per-operation curves that replace `efficiency` for that
  // operation where a transport runs them at different speeds (a
  // calibration writes them; GPU rings run every collective at one bus
  // bandwidth). JSON: "op_efficiency": {"all_gather": curve, ...}.
  std::array<std::optional<Curve>, kNumLinkOps> op_efficiency;
  const Curve& efficiency_of(LinkOp op) const {
    const auto& c = op_efficiency[static_cast<int>(op)];
    return c ? *c : efficiency;
  }
};

struct NetworkSpec {
  int nics_per_node = 1;
  double nic_bandwidth_gbs = 0;  // per NIC, per direction
  double latency_s = 0;
  // One step of a ring all-gather or reduce-scatter that spans nodes, at
  // scale (JSON ring_step_us): the step each rank of the ring takes n - 1
  // times. 0: the sum of the ring's hop latencies (collective.cc).
  double ring_step_s = 0;
  Curve efficiency;              // over bytes per call
  double node_bandwidth_gbs() const { return nics_per_node * nic_bandwidth_gbs; }
};

struct MemorySpec {
  double hbm_bytes = 0;
  double bandwidth_gbs = 0;        // per device
  double elementwise_efficiency = 0.7;  // achieved / nominal for memory-bound kernels
  double reserved_bytes = 0;       // runtime, library workspaces, communicator buffers
  double fragmentation = 0.0;      // extra fraction of dynamic (activation, buffer) bytes
};

struct ComputeSpec {
  double peak_tflops_bf16 = 0;
  double peak_tflops_fp32 = 0;
  Curve matmul_efficiency_bf16;    // over the smallest of (M, N, K)
  Curve matmul_efficiency_fp32;
  double flash_attention_efficiency = 0.5;  // of peak, over the FLOPs a causal kernel executes
  double attention_matmul_efficiency = 0.0; // non-flash score GEMMs; 0: matmul curve at head_dim
  // The largest fraction of the bf16 peak one bare GEMM reaches (a measured
  // maximum-achievable-matmul figure), for GEMMs that stand alone rather than
  // inside a transformer block (the output layer); 0: the matmul curve.
  double matmul_ceiling_bf16 = 0.0;
  // Share of the device's SMs (CUs) a collective running beside compute
  // holds: its CTAs, one per channel. Compute that a collective hides
  // behind loses this share for the overlapped time; 0: not modelled.
  double collective_sm_share = 0.0;
  double kernel_overhead_s = 0;    // launch and synchronization cost per kernel
  double action_overhead_s = 0;    // host-side cost per forward or backward of one chunk
  // Wave quantization: a GEMM's output is cut into tiles that run `gemm_units`
  // at a time (SMs, CUs), so the last wave may leave units idle. 0: not
  // modelled (CPUs). JSON "gemm_units", "gemm_tile": [rows, cols].
  int gemm_units = 0;
  std::array<int, 2> gemm_tile = {256, 128};
};

// Efficiency data of one software generation (a framework profile,
// perf/framework_profile.h) on a system, fitted to that profile's published
// runs and shrunk toward the system's pooled fit (docs/PERFORMANCE-MODEL.md,
// "Fitting the efficiency data"). JSON, in "profile_efficiency": {"<profile>":
// {"matmul_efficiency_bf16": curve, "flash_attention_efficiency": x,
// "elementwise_efficiency": y, "cv_abs_error": e}}; a field left out keeps
// the system's value.
struct ProfileEfficiency {
  std::optional<Curve> matmul_efficiency_bf16;
  std::optional<double> flash_attention_efficiency;
  std::optional<double> elementwise_efficiency;
  double prediction_error = 0;  // as SystemSpec::prediction_error, over the profile's rows; 0: the system's
};

struct SystemSpec {
  std::string name;
  std::string description;
  int devices_per_node = 1;
  // CPU cores the ranks of one node share (JSON "cores_per_node"); 0: every
  // device computes on its own (GPUs, or CPU ranks with a core each). With
  // more ranks than cores the ranks time-share the cores: see
  // time_sharing.h. Compute and memory figures are then those of one rank
  // running alone on one core.
  int cores_per_node = 0;
  ComputeSpec compute;
  MemorySpec memory;
  std::vector<LinkClass> links;  // increasing span; the last spans the node
  NetworkSpec network;
  std::map<std::string, std::string> sources;
  // Relative error to expect of a throughput prediction on this system: the
  // 80th percentile of |error| of its published runs, each predicted with
  // efficiency data fitted, and per-profile shrinkage chosen, without its
  // own source (`meshtrain validate --cv source`, nested). JSON "cv_abs_error"; 0 when not known.
  double prediction_error = 0;
  // The profile whose own held-out rows prediction_error is from (set by
  // for_profile where it has its own); empty: the system's.
  std::string prediction_error_profile;
  // Whose error the interval is, for saying so: "this system's
  // leave-one-source-out error", or that profile's published runs.
  std::string prediction_error_basis() const;
  std::map<std::string, ProfileEfficiency> profile_efficiency;  // by profile name
  // Systems of one device (the same silicon and kernels in other nodes:
  // DGX A100 40GB and 80GB, an IBM A100 cluster) share their efficiency
  // data: the fit pools their rows. JSON "efficiency_group"; empty: the
  // system's name.
  std::string efficiency_group;
  const std::string& group() const { return efficiency_group.empty() ? name : efficiency_group; }

  // This system as software of `profile` runs on it: the profile's
  // efficiency data and error in place of the pooled ones (a copy without
  // profile_efficiency); the system as it is for a profile it has no entry
  // for, or an empty name.
  SystemSpec for_profile(const std::string& profile) const;

  double peak_flops(bool bf16) const {
    return 1e12 * (bf16 ? compute.peak_tflops_bf16 : compute.peak_tflops_fp32);
  }
  // Whether `ranks_per_node` ranks on one node outnumber its cores.
  bool oversubscribed(int ranks_per_node) const { return cores_per_node > 0 && ranks_per_node > cores_per_node; }
  const Curve& matmul_efficiency(bool bf16) const {
    return bf16 ? compute.matmul_efficiency_bf16 : compute.matmul_efficiency_fp32;
  }
  // Fraction of the tile slots of a [rows, cols] GEMM output that hold
  // useful elements: tiles of gemm_tile (either orientation, the better one,
  // as a library's heuristic would pick) run in waves of gemm_units; partial
  // tiles and a partial last wave waste the rest. 1 when not modelled.
  double gemm_wave_utilization(double rows, double cols) const;

  // Throws Error naming the first inconsistent field.
  void validate() const;
};

// Where the group {r0 + i * stride : i < size} of a Megatron-ordered job
// sits: how many of its ranks share a node, how many nodes it spans, and the
// link class joining its ranks inside a node (nullptr with one rank per node).
struct GroupPlacement {
  int size = 1;
  int ranks_per_node = 1;
  int nodes = 1;
  const LinkClass* link = nullptr;
};
GroupPlacement place_group(const SystemSpec& s, int size, int stride);

// The link class joining ranks a and b, or nullptr when they sit on
// different nodes (they talk over the NICs).
const LinkClass* link_between(const SystemSpec& s, int a, int b);

void from_json(const nlohmann::json& j, SystemSpec& s);
void to_json(nlohmann::json& j, const SystemSpec& s);

// Loads a system by name ("frontier") from configs/systems, or a JSON path.
// "NAME@GBS" ("dgx-a100-40gb@50") is that system with its NICs' rate scaled
// so that a node moves GBS GB/s per direction: the same nodes on another
// fabric (perf/system_match.h names such a system for a published run whose
// stated network no file has).
SystemSpec load_system_spec(const std::string& name_or_path);

// Whether load_system_spec finds `name_or_path` (a preset, a file, or either
// with "@GBS").
bool system_exists(const std::string& name_or_path);

}  // namespace meshtrain::perf
