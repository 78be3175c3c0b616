#include "meshtrain/perf/system_match.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>

#include <fmt/format.h>

#include "meshtrain/core/text.h"
#include "meshtrain/model/model_config.h"
#include "meshtrain/perf/system_spec.h"

namespace meshtrain::perf {

namespace {

bool alnum_at(const std::string& t, size_t k) { return k < t.size() && std::isalnum(static_cast<unsigned char>(t[k])); }

// Whether lower-case `t` holds `w` as a word of its own ("Eos", not "videos";
// "NDR", not "hundred").
bool has_word(const std::string& t, const std::string& w) {
  for (size_t i = t.find(w); i != std::string::npos; i = t.find(w, i + 1))
    if ((i == 0 || !alnum_at(t, i - 1)) && !alnum_at(t, i + w.size())) return true;
  return false;
}

bool has_any(const std::string& t, std::initializer_list<const char*> words) {
  return std::any_of(words.begin(), words.end(), [&](const char* w) { return t.find(w) != std::string::npos; });
}

// Network technologies as interconnect text names them: the technology, and
// one link's rate in Gb/s (0 where the name does not fix it).
struct TechWord {
  const char* word;
  const char* technology;
  double gbits;
};
constexpr TechWord kTechWords[] = {{"omni-path", "omni-path", 100},
                                   {"omnipath", "omni-path", 100},
                                   {"omni path", "omni-path", 100},
                                   {"slingshot", "slingshot", 200},
                                   {"connectx-7", "infiniband", 400},
                                   {"ndr", "infiniband", 400},
                                   {"connectx-6", "infiniband", 200},
                                   {"hdr", "infiniband", 200},
                                   {"edr", "infiniband", 100},
                                   {"infiniband", "infiniband", 0},
                                   {"roce", "roce", 0},
                                   {"efa", "efa", 0}};

const TechWord* first_tech(const std::string& t) {
  for (const TechWord& w : kTechWords)
    if (has_word(t, w.word)) return &w;
  return nullptr;
}

// Whether a file's description names technology `tech` (any of its words).
bool names_technology(const std::string& description, const std::string& tech) {
  const std::string d = ascii_lower(description);
  for (const TechWord& w : kTechWords)
    if (w.technology == tech && has_word(d, w.word)) return true;
  return false;
}

// A count as tables write it: digits or a number word (read_count).
const std::string kCount = "(\\d+|one|two|three|four|six|eight|ten|twelve|sixteen)";

int read_count(const std::string& w) {
  static const std::map<std::string, int> words = {{"one", 1},  {"two", 2},     {"three", 3},
                                                   {"four", 4}, {"six", 6},     {"eight", 8},
                                                   {"ten", 10}, {"twelve", 12}, {"sixteen", 16}};
  const auto it = words.find(w);
  if (it != words.end()) return it->second;
  return w.size() <= 3 ? std::stoi(w) : 0;  // a count of links has few digits
}

// GB/s per node that a rate written in a clause gives ("4x25 GB/s", "eight
// 200 Gb/s NICs", "400 Gbps inter-node", "RoCE 400 Gb/s per GPU"); -1 when
// the clause writes no rate, 0 when it does not say how many links share it.
double rate_node_gbs(const std::string& clause, int devices_per_node) {
  static const std::regex rate(
      "(?:\\b" + kCount + "(?:\\s*x\\s*|\\s+))?"
      "(\\d{1,6}(?:\\.\\d{1,6})?)\\s*(gbps|gb/s|gbit/s|gbit|gbyte/s|tbps|tb/s)",
      std::regex::icase);
  std::smatch m;
  if (!std::regex_search(clause, m, rate)) return -1;
  const std::string c = ascii_lower(clause), unit = m[3].str();
  const bool bytes = unit.rfind("GB", 0) == 0 || ascii_lower(unit).find("byte") != std::string::npos;
  const bool tera = ascii_lower(unit)[0] == 't';
  const double gbs = std::stod(m[2].str()) * (tera ? 1000 : 1) / (bytes ? 1 : 8);
  const std::string after = c.substr(size_t(m.position(0) + m.length(0)));
  if (has_any(after, {"per gpu", "per device", "per gcd", "per accelerator", "/gpu", "each gpu"}))
    return gbs * devices_per_node;
  if (m[1].matched) return read_count(ascii_lower(m[1].str())) * gbs;
  // "HDR (200 Gb/s) x 8": a count after the rate.
  static const std::regex times("^\\)?\\s*x\\s*(\\d{1,3})\\b");
  std::smatch x;
  if (std::regex_search(after, x, times) && std::stoi(x[1].str()) <= 32) return std::stoi(x[1].str()) * gbs;
  // "4 NICs per node at 200 Gb/s": a count of links elsewhere in the clause.
  static const std::regex links(
      "\\b" + kCount + "\\s*(?:x\\s*)?"
      "(?:[a-z0-9-]+\\s+){0,2}(nics?|hcas?|links?|ports?|adapters?|rails?|cards?)\\b");
  std::smatch k;
  if (std::regex_search(c, k, links) && read_count(k[1].str()) <= 32) return read_count(k[1].str()) * gbs;
  if (has_any(c, {"per nic", "per link", "per port", "per hca", "per rail", "each"})) return 0;
  if (has_any(c, {"per node", "inter-node", "internode", "between nodes", "per server", "node"})) return gbs;
  return 0;
}

// GB/s per node of a count of links of a named kind ("4 Omni-Path links",
// "8x HDR InfiniBand", "4 ConnectX-6 HCAs"); 0 for none.
double counted_links_gbs(const std::string& clause) {
  static const std::regex counted(
      "\\b" + kCount + "\\s*(?:x\\s*)?(?:[a-z]+[- ])?"
      "(omni-?path|omni path|connectx-[67]|hdr|ndr|edr|slingshot)");
  const std::string c = ascii_lower(clause);
  std::smatch m;
  if (!std::regex_search(c, m, counted)) return 0;
  const int n = read_count(m[1].str());
  const TechWord* w = first_tech(m[2].str());
  const std::string after = c.substr(size_t(m.position(0) + m.length(0)));
  const bool links = has_any(after, {"link", "nic", "hca", "port", "adapter", "rail", "card", "infiniband"}) ||
                     c.find('x', size_t(m.position(1) + m.length(1))) < size_t(m.position(2));
  return w && w->gbits > 0 && n >= 1 && n <= 32 && links ? n * w->gbits / 8 : 0;
}

// GB/s per node a network clause states (0: none), `clause` as written.
double clause_node_gbs(const std::string& clause, int devices_per_node) {
  const double rate = rate_node_gbs(clause, devices_per_node);
  return rate >= 0 ? rate : counted_links_gbs(clause);
}

// Whether a clause of an interconnect text is about links inside a node:
// it names one (NVLink, NVSwitch, Infinity Fabric, "in node") and no network
// ("NVLink 600 GB/s per GPU" is not a NIC rate).
bool in_node_clause(const std::string& c) {
  const bool inside = has_any(c, {"nvlink", "nvswitch", "infinity fabric", "xgmi", "in node", "in-node", "intra-node",
                                  "within a node", "in the node"});
  const bool network = has_any(c, {"inter-node", "internode", "between nodes", "nic", "hca", "infiniband", "roce",
                                   "omni", "slingshot", "ethernet", "rdma", "efa", "network", "connectx"}) ||
                       has_word(c, "hdr") || has_word(c, "ndr") || has_word(c, "edr");
  return inside && !network;
}

// Loaded system files, by name (read once; validate asks for every row).
const SystemSpec& preset(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, SystemSpec> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, load_system_spec(name)).first;
  return it->second;
}

bool same_device(const SystemSpec& a, const SystemSpec& b) {
  return a.efficiency_group == b.efficiency_group && a.memory.hbm_bytes == b.memory.hbm_bytes &&
         a.devices_per_node == b.devices_per_node;
}

bool close(double a, double b) { return std::fabs(a / b - 1) <= 0.1; }

// Whether the GPU text states a memory size ("40GB", "80 GB").
bool states_memory(const std::string& gpu_text) {
  static const std::regex size("\\b\\d+\\s*gb\\b", std::regex::icase);
  return std::regex_search(gpu_text, size);
}

// The preset of `start`'s device whose network the interconnect text states,
// else "": a file whose node bandwidth is the stated one (within 10%), and
// of those one whose description names the stated technology before one
// that names none, before one that names another. A technology without a
// rate moves only to a file that names it.
std::string network_match(const std::string& start, const std::string& interconnect) {
  const SystemSpec& s = preset(start);
  const NodeNetworkText net = read_node_network(interconnect, s.devices_per_node);
  if (net.node_gbs <= 0 && net.technology.empty()) return "";
  auto rate_fits = [&](const SystemSpec& c) {
    return net.node_gbs <= 0 || close(net.node_gbs, c.network.node_bandwidth_gbs());
  };
  auto score = [&](const SystemSpec& c) {
    if (!net.technology.empty() && names_technology(c.description, net.technology)) return 2;
    const bool other = std::any_of(std::begin(kTechWords), std::end(kTechWords), [&](const TechWord& w) {
      return w.technology != net.technology && names_technology(c.description, w.technology);
    });
    return other ? 0 : 1;
  };
  std::string best;
  int best_score = rate_fits(s) ? score(s) : -1;
  for (const std::string& name : system_presets()) {
    const SystemSpec& c = preset(name);
    if (name == start || !same_device(c, s) || !rate_fits(c)) continue;
    if (const int sc = score(c); sc > best_score) best = name, best_score = sc;
  }
  if (net.node_gbs <= 0) return best_score < 2 ? "" : best;
  // No file of the device has the stated network: the named one with it.
  if (best.empty() && !rate_fits(s)) return fmt::format("{}@{:g}", start, net.node_gbs);
  return best;
}

// The preset of `start`'s device whose cluster the text names by the first
// word of the file's name ("Jean Zay" -> jeanzay-a100-80gb, "Grand Teton",
// "IBM"), else "". Node types (dgx, hgx) name no cluster.
std::string cluster_match(const std::string& start, const std::string& text) {
  const std::string t = ascii_lower(text);
  std::string joined;  // "jean zay" -> "jeanzay"
  for (char ch : t)
    if (ch != ' ' && ch != '-') joined += ch;
  const SystemSpec& s = preset(start);
  for (const std::string& name : system_presets()) {
    const std::string word = name.substr(0, name.find('-'));
    if (name == start || word.size() < 3 || word == "dgx" || word == "hgx" || word == "local") continue;
    if (!has_word(t, word) && joined.find(word) == std::string::npos) continue;
    if (same_device(preset(name), s) && start.rfind(word, 0) != 0) return name;
  }
  return "";
}

}  // namespace

std::string infer_system(const std::string& device_text) {
  const std::string t = ascii_lower(device_text);
  auto has = [&](const char* w) { return t.find(w) != std::string::npos; };
  const bool gb40 = has("40gb") || has("40 gb");
  // PCIe cards (and the H100 NVL, two PCIe cards bridged) run at lower
  // clocks and power, without NVSwitch: no system file describes them, and
  // the SXM node's would overstate both peak and links.
  if ((has("pcie") || has_word(t, "nvl")) && !has("sxm")) return "";
  if (has("mi250") || has_word(t, "frontier") || has_word(t, "lumi")) return "frontier";
  if (has("mi300")) return "mi300x-node";
  if (has("h200")) return "h200-node";
  // The export variants: the H100's and A100's silicon with NVLink capped
  // at 400 GB/s bidirectional.
  if (has("h800")) return "hgx-h800";
  if (has("h100") || has_word(t, "eos")) return has("96gb") || has("96 gb") ? "grandteton-h100-96gb-500w" : "dgx-h100";
  if (has("jean zay") || has("jeanzay")) return "jeanzay-a100-80gb";
  if (has("a800")) return "dgx-a800-80gb";
  if (has("a100") || has("ampere") || has_word(t, "selene")) return gb40 ? "dgx-a100-40gb" : "dgx-a100-80gb";
  return "";
}

NodeNetworkText read_node_network(const std::string& text, int devices_per_node) {
  NodeNetworkText out;
  std::string interconnect = text;  // the multiplication sign as an x
  for (size_t at = interconnect.find("\xc3\x97"); at != std::string::npos; at = interconnect.find("\xc3\x97", at))
    interconnect.replace(at, 2, "x");
  const std::string t = ascii_lower(interconnect);
  if (const TechWord* w = first_tech(t)) out.technology = w->technology;
  size_t start = 0;
  while (start <= interconnect.size() && out.node_gbs <= 0) {
    const size_t end = std::min(interconnect.find_first_of(";,", start), interconnect.size());
    const std::string clause = interconnect.substr(start, end - start);
    if (!in_node_clause(ascii_lower(clause))) out.node_gbs = clause_node_gbs(clause, devices_per_node);
    start = end + 1;
  }
  // One 100 Gb/s link (12.5 GB/s) to eight 800 Gb/s ones (800 GB/s) a node;
  // a figure outside is a misreading (an in-node rate taken for the NICs').
  if (out.node_gbs < 5 || out.node_gbs > 800) out.node_gbs = 0;
  return out;
}

const std::vector<std::string>& system_presets() {
  namespace fs = std::filesystem;
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    const fs::path dir = fs::path(config_root()) / "systems";
    if (fs::is_directory(dir))
      for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".json") v.push_back(e.path().stem().string());
    std::sort(v.begin(), v.end());
    return v;
  }();
  return names;
}

SystemMatch match_system(const std::string& named, const std::string& gpu_text, const std::string& interconnect_text) {
  const bool path = named.find('/') != std::string::npos || named.find(".json") != std::string::npos;
  SystemMatch m{named, ""};
  if (path || !system_exists(named)) {
    if (path && system_exists(named)) return m;
    m.name = infer_system(named);
    if (m.name.empty()) m.name = infer_system(gpu_text);
    m.from = "gpu";
    if (m.name.empty()) return {"", ""};
  }
  // The GPU text names another device than the file (an MI300X run labelled
  // with the MI250X's file), another memory size of it, or its export
  // variant with slower NVLink: the text's file. Only over a file that
  // itself names a device: a measured machine's file ("local") is taken as
  // given.
  const std::string device = infer_system(gpu_text);
  if (!device.empty() && device != m.name && !infer_system(m.name).empty()) {
    const SystemSpec &d = preset(device), &s = preset(m.name);
    const bool other_device =
        d.efficiency_group != s.efficiency_group || d.compute.peak_tflops_bf16 != s.compute.peak_tflops_bf16;
    const bool other_memory = states_memory(gpu_text) && d.memory.hbm_bytes != s.memory.hbm_bytes;
    const bool slower_links =
        !d.links.empty() && !s.links.empty() && d.links[0].bandwidth_gbs < s.links[0].bandwidth_gbs;
    if (other_device || other_memory || slower_links) m = {device, "gpu"};
  }
  if (const std::string c = cluster_match(m.name, gpu_text); !c.empty()) m = {c, "gpu"};
  if (const std::string c = cluster_match(m.name, interconnect_text); !c.empty()) m = {c, "interconnect"};
  if (const std::string net = network_match(m.name, interconnect_text); !net.empty()) m = {net, "interconnect"};
  return m;
}

}  // namespace meshtrain::perf
