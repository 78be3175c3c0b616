// Which system file a published run ran on, read from the run's own words:
// its system column, its GPU column ("A100 80GB (Selene DGX A100)") and its
// interconnect column ("4 Omni-Path links per node", "400 Gbps inter-node").
//
// The system column names a file; the hardware text refines it. A table
// written against a handful of generic node files (one A100 80GB node with 8
// HDR NICs) labels a cluster with four Omni-Path links by the DGX file, and
// that cluster's network is a quarter of the DGX's at half its efficiency:
// its data-parallel runs are priced up to 60% too fast. So where the text
// states a different memory size or a different node network, match_system
// takes the file of the same device that has it; where no file has that
// network, the named file with its network scaled to it.
#pragma once

#include <string>
#include <vector>

namespace meshtrain::perf {

// The system file closest to a device description such as a published
// run's GPU column ("A100 80GB (Selene DGX A100)", "MI250X GCD") or a
// cluster's name: MI250X, Frontier or LUMI -> frontier, MI300X ->
// mi300x-node, H200 -> h200-node, H100 or Eos -> dgx-h100 (96 GB:
// grandteton-h100-96gb-500w), Jean Zay -> jeanzay-a100-80gb, A100, Ampere or
// Selene -> dgx-a100-80gb (40 GB: dgx-a100-40gb). Empty when it names none.
// The network is the node type's standard one (match_system reads the
// interconnect).
std::string infer_system(const std::string& device_text);

// A node's network as an interconnect column states it: GB/s per node and
// direction (0 when the text states no count or rate), and the technology it
// names ("omni-path", "infiniband", "roce", "slingshot", "efa"; empty when
// none). Rates read as written ("400 Gbps inter-node", "4x25 GB/s",
// "eight 200 Gb/s NICs", "RoCE 400 Gb/s per GPU" times `devices_per_node`),
// or as a count of links of a named kind ("4 Omni-Path links": 100 Gb/s
// each; HDR, ConnectX-6 and Slingshot 200, NDR and ConnectX-7 400, EDR 100).
// Clauses about links inside a node (NVLink, NVSwitch, Infinity Fabric, "in
// node") are not the network, and a node figure outside 5-800 GB/s is taken
// as a misreading (0).
struct NodeNetworkText {
  double node_gbs = 0;
  std::string technology;
};
NodeNetworkText read_node_network(const std::string& interconnect, int devices_per_node);

struct SystemMatch {
  std::string name;  // the file; empty when neither column names a device
  std::string from;  // "" as named, else "gpu" or "interconnect": the column that chose it
};

// The system a row ran on: the named file when it is one and the text does
// not contradict it; else, for a blank or unknown name, the file the name or
// the GPU text describes (infer_system). A named preset of a device is
// replaced by the file the GPU text describes where that is another device
// (efficiency group or peak: "MI300X" on the MI250X's file), another memory
// size of it ("A100 40GB" on an 80 GB file) or its export variant with
// slower NVLink ("H800" on the H100's); and by another of the same device
// (efficiency group, memory, devices per node) when
// the GPU or interconnect text names that file's cluster (the first word of
// its name: "Jean Zay", "Grand Teton", "IBM"), or the interconnect states
// another node network (within 10%), preferring a file whose description
// names the stated technology; where no file of the device has that network,
// the named file with its network scaled to it ("NAME@GBS",
// load_system_spec). A path to a JSON file is taken as given.
SystemMatch match_system(const std::string& named, const std::string& gpu_text, const std::string& interconnect_text);

// The names of the system presets (configs/systems/*.json), sorted.
const std::vector<std::string>& system_presets();

}  // namespace meshtrain::perf
