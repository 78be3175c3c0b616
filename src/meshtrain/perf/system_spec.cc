#include "meshtrain/perf/system_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/core/text.h"
#include "meshtrain/model/model_config.h"

namespace meshtrain::perf {

namespace {

const LinkClass* smallest_link_holding(const SystemSpec& s, int block) {
  for (const auto& l : s.links)
    if (l.span >= block) return &l;
  return s.links.empty() ? nullptr : &s.links.back();
}

// Integer fields must be JSON integers in int's range (never truncated or
// wrapped); numbers must be numbers.
template <typename T>
void get(const nlohmann::json& j, const char* key, T& v) {
  if (!j.contains(key)) return;
  const nlohmann::json& x = j.at(key);
  if constexpr (std::is_same_v<T, int>) {
    check(x.is_number_integer(), "system field '{}' must be an integer (got {})", key, x.dump());
    const bool fits = x.is_number_unsigned() ? x.get<uint64_t>() <= uint64_t{INT32_MAX}
                                             : x.get<int64_t>() >= INT32_MIN && x.get<int64_t>() <= INT32_MAX;
    check(fits, "system field '{}' = {} is out of range", key, x.dump());
  } else if constexpr (std::is_same_v<T, double>) {
    check(x.is_number(), "system field '{}' must be a number (got {})", key, x.dump());
  }
  x.get_to(v);
}

bool finite_nonneg(double v) { return std::isfinite(v) && v >= 0; }

// Efficiencies are fractions of a nominal figure, and rates are positive:
// both at least kMinFigure, so that no time computed from them (bytes or
// FLOPs over a rate times an efficiency) can become infinite.
constexpr double kMinFigure = 1e-6;
void check_efficiency(const Curve& c, const std::string& system, const std::string& what) {
  for (const auto& [x, y] : c.points())
    check(y >= kMinFigure && y <= 1, "system {}: {} efficiency {} at {} is not in [{}, 1]", system, what, y, x,
          kMinFigure);
}
bool rate(double v) { return std::isfinite(v) && v >= kMinFigure; }

}  // namespace

double SystemSpec::gemm_wave_utilization(double rows, double cols) const {
  const int units = compute.gemm_units;
  if (units <= 0 || rows <= 0 || cols <= 0) return 1;
  auto utilization = [&](double tr, double tc) {
    const double tiles = std::ceil(rows / tr) * std::ceil(cols / tc);
    const double waves = std::ceil(tiles / units);
    return rows * cols / (waves * units * tr * tc);
  };
  const double a = compute.gemm_tile[0], b = compute.gemm_tile[1];
  return std::max({utilization(a, b), utilization(b, a), utilization(b, b)});
}

void SystemSpec::validate() const {
  check(!name.empty(), "system: name is missing");
  check(devices_per_node >= 1, "system {}: devices_per_node must be positive", name);
  check(cores_per_node >= 0, "system {}: cores_per_node must not be negative (0: a core or more per device)", name);
  check(compute.peak_tflops_bf16 > 0 && compute.peak_tflops_fp32 > 0, "system {}: peak TFLOP/s must be positive",
        name);
  check(memory.hbm_bytes > 0 && memory.bandwidth_gbs > 0, "system {}: memory bytes and bandwidth must be positive",
        name);
  check(network.nics_per_node >= 1 && network.nic_bandwidth_gbs > 0, "system {}: network needs NICs with bandwidth",
        name);
  if (devices_per_node > 1) check(!links.empty(), "system {}: a node of several devices needs link classes", name);
  check(prediction_error >= 0 && prediction_error < 1, "system {}: cv_abs_error must be in [0, 1) (got {})", name,
        prediction_error);
  for (size_t i = 0; i < links.size(); ++i) {
    check(links[i].bandwidth_gbs > 0, "system {}: link {} needs a positive bandwidth", name, links[i].name);
    check(links[i].span >= 2 && devices_per_node % links[i].span == 0,
          "system {}: link {} spans {} devices, not a divisor of devices_per_node {}", name, links[i].name,
          links[i].span, devices_per_node);
    if (i > 0)
      check(links[i].span > links[i - 1].span, "system {}: link classes must be listed by increasing span", name);
  }
  if (!links.empty())
    check(links.back().span == devices_per_node, "system {}: the widest link class must span the node", name);
  // Every figure finite, times non-negative, fractions in (0, 1]: a zero or
  // negative efficiency would predict infinite or faster-than-possible runs.
  check(rate(compute.peak_tflops_bf16) && rate(compute.peak_tflops_fp32) && std::isfinite(memory.hbm_bytes) &&
            rate(memory.bandwidth_gbs) && rate(network.nic_bandwidth_gbs),
        "system {}: peaks, memory and bandwidths must be finite and at least {}", name, kMinFigure);
  check_efficiency(compute.matmul_efficiency_bf16, name, "bf16 matmul");
  check_efficiency(compute.matmul_efficiency_fp32, name, "fp32 matmul");
  check_efficiency(Curve(compute.flash_attention_efficiency), name, "flash attention");
  check_efficiency(Curve(memory.elementwise_efficiency), name, "elementwise");
  if (compute.attention_matmul_efficiency != 0)
    check_efficiency(Curve(compute.attention_matmul_efficiency), name, "attention matmul");
  if (compute.matmul_ceiling_bf16 != 0)
    check_efficiency(Curve(compute.matmul_ceiling_bf16), name, "bf16 matmul ceiling");
  check(finite_nonneg(compute.collective_sm_share) && compute.collective_sm_share < 1,
        "system {}: collective_sm_share must be at least 0 and below 1", name);
  check(finite_nonneg(compute.kernel_overhead_s) && finite_nonneg(compute.action_overhead_s),
        "system {}: kernel and action overheads must be finite and not negative", name);
  check(compute.gemm_units >= 0 && compute.gemm_tile[0] >= 1 && compute.gemm_tile[1] >= 1,
        "system {}: gemm_units must be at least 0 and gemm_tile two sizes of at least 1", name);
  check(finite_nonneg(memory.reserved_bytes) && memory.reserved_bytes < memory.hbm_bytes,
        "system {}: reserved memory must be at least 0 and below the device's memory", name);
  check(finite_nonneg(memory.fragmentation), "system {}: fragmentation must be finite and not negative", name);
  for (const LinkClass& l : links) {
    check(rate(l.bandwidth_gbs), "system {}: link {} needs a finite bandwidth of at least {} GB/s", name, l.name,
          kMinFigure);
    check(finite_nonneg(l.latency_s), "system {}: link {}: latency must be finite and not negative (got {} us)", name,
          l.name, l.latency_s * 1e6);
    check_efficiency(l.efficiency, name, "link " + l.name);
    for (int op = 0; op < kNumLinkOps; ++op)
      if (l.op_efficiency[op]) check_efficiency(*l.op_efficiency[op], name, "link " + l.name + " " + kLinkOpNames[op]);
  }
  check(finite_nonneg(network.latency_s), "system {}: network latency must be finite and not negative (got {} us)",
        name, network.latency_s * 1e6);
  check(finite_nonneg(network.ring_step_s),
        "system {}: network ring_step_us must be finite and not negative (got {} us)", name, network.ring_step_s * 1e6);
  check_efficiency(network.efficiency, name, "network");
  for (const auto& [profile, e] : profile_efficiency) {
    const std::string what = "profile " + profile;
    if (e.matmul_efficiency_bf16) check_efficiency(*e.matmul_efficiency_bf16, name, what + " bf16 matmul");
    if (e.flash_attention_efficiency)
      check_efficiency(Curve(*e.flash_attention_efficiency), name, what + " flash attention");
    if (e.elementwise_efficiency) check_efficiency(Curve(*e.elementwise_efficiency), name, what + " elementwise");
    check(e.prediction_error >= 0 && e.prediction_error < 1, "system {}: {}: cv_abs_error must be in [0, 1) (got {})",
          name, what, e.prediction_error);
  }
}

SystemSpec SystemSpec::for_profile(const std::string& profile) const {
  SystemSpec s = *this;
  s.profile_efficiency.clear();
  const auto it = profile_efficiency.find(profile);
  if (it == profile_efficiency.end()) return s;
  const ProfileEfficiency& e = it->second;
  if (e.matmul_efficiency_bf16) s.compute.matmul_efficiency_bf16 = *e.matmul_efficiency_bf16;
  if (e.flash_attention_efficiency) s.compute.flash_attention_efficiency = *e.flash_attention_efficiency;
  if (e.elementwise_efficiency) s.memory.elementwise_efficiency = *e.elementwise_efficiency;
  if (e.prediction_error > 0) {
    s.prediction_error = e.prediction_error;
    s.prediction_error_profile = profile;
  }
  return s;
}

std::string SystemSpec::prediction_error_basis() const {
  if (prediction_error_profile.empty()) return "this system's leave-one-source-out error";
  return fmt::format("the held-out error of {}'s published runs on this device", prediction_error_profile);
}

GroupPlacement place_group(const SystemSpec& s, int size, int stride) {
  GroupPlacement g;
  g.size = size;
  const int d = s.devices_per_node;
  g.ranks_per_node = stride >= d ? 1 : std::clamp(d / stride, 1, size);
  g.nodes = (size + g.ranks_per_node - 1) / g.ranks_per_node;
  if (g.ranks_per_node > 1) g.link = smallest_link_holding(s, g.ranks_per_node * stride);
  return g;
}

const LinkClass* link_between(const SystemSpec& s, int a, int b) {
  const int d = s.devices_per_node;
  if (a / d != b / d) return nullptr;
  for (const auto& l : s.links)
    if (a / l.span == b / l.span) return &l;
  return s.links.empty() ? nullptr : &s.links.back();
}

namespace {

// A field written in `unit`s, in base units (seconds, bytes); 0 if absent.
double scaled(const nlohmann::json& j, const char* key, double unit) {
  double x = 0;
  get(j, key, x);
  return x * unit;
}
constexpr double kMicrosecond = 1e-6, kGiB = 1073741824.0, kGB = 1e9;

void read_compute(const nlohmann::json& c, ComputeSpec& s) {
  get(c, "peak_tflops_bf16", s.peak_tflops_bf16);
  get(c, "peak_tflops_fp32", s.peak_tflops_fp32);
  get(c, "matmul_efficiency_bf16", s.matmul_efficiency_bf16);
  get(c, "matmul_efficiency_fp32", s.matmul_efficiency_fp32);
  get(c, "flash_attention_efficiency", s.flash_attention_efficiency);
  get(c, "attention_matmul_efficiency", s.attention_matmul_efficiency);
  get(c, "matmul_ceiling_bf16", s.matmul_ceiling_bf16);
  get(c, "collective_sm_share", s.collective_sm_share);
  s.kernel_overhead_s = scaled(c, "kernel_overhead_us", kMicrosecond);
  s.action_overhead_s = scaled(c, "action_overhead_us", kMicrosecond);
  get(c, "gemm_units", s.gemm_units);
  get(c, "gemm_tile", s.gemm_tile);
}

void read_memory(const nlohmann::json& m, MemorySpec& s) {
  if (const double b = scaled(m, "hbm_gib", kGiB); b > 0) s.hbm_bytes = b;
  if (const double b = scaled(m, "hbm_gb", kGB); b > 0) s.hbm_bytes = b;
  get(m, "bandwidth_gbs", s.bandwidth_gbs);
  get(m, "elementwise_efficiency", s.elementwise_efficiency);
  s.reserved_bytes = scaled(m, "reserved_gib", kGiB);
  get(m, "fragmentation", s.fragmentation);
}

LinkClass read_link(const nlohmann::json& l, const std::string& system) {
  LinkClass c;
  get(l, "name", c.name);
  get(l, "span", c.span);
  get(l, "bandwidth_gbs", c.bandwidth_gbs);
  c.latency_s = scaled(l, "latency_us", kMicrosecond);
  get(l, "efficiency", c.efficiency);
  if (l.contains("op_efficiency"))
    for (auto it = l.at("op_efficiency").begin(); it != l.at("op_efficiency").end(); ++it) {
      const auto* name = std::find(std::begin(kLinkOpNames), std::end(kLinkOpNames), it.key());
      check(name != std::end(kLinkOpNames), "system {}: link {}: unknown operation '{}' in op_efficiency", system,
            c.name, it.key());
      c.op_efficiency[name - std::begin(kLinkOpNames)] = it.value().get<Curve>();
    }
  return c;
}

void read_network(const nlohmann::json& n, NetworkSpec& s) {
  get(n, "nics_per_node", s.nics_per_node);
  get(n, "nic_bandwidth_gbs", s.nic_bandwidth_gbs);
  s.latency_s = scaled(n, "latency_us", kMicrosecond);
  if (n.contains("ring_step_us")) s.ring_step_s = scaled(n, "ring_step_us", kMicrosecond);
  get(n, "efficiency", s.efficiency);
}

ProfileEfficiency read_profile_efficiency(const nlohmann::json& v) {
  ProfileEfficiency e;
  if (v.contains("matmul_efficiency_bf16")) e.matmul_efficiency_bf16 = v.at("matmul_efficiency_bf16").get<Curve>();
  if (v.contains("flash_attention_efficiency"))
    e.flash_attention_efficiency = v.at("flash_attention_efficiency").get<double>();
  if (v.contains("elementwise_efficiency")) e.elementwise_efficiency = v.at("elementwise_efficiency").get<double>();
  get(v, "cv_abs_error", e.prediction_error);
  return e;
}

}  // namespace

void from_json(const nlohmann::json& j, SystemSpec& s) {
  get(j, "name", s.name);
  get(j, "description", s.description);
  get(j, "devices_per_node", s.devices_per_node);
  get(j, "cores_per_node", s.cores_per_node);
  get(j, "cv_abs_error", s.prediction_error);
  get(j, "efficiency_group", s.efficiency_group);
  if (j.contains("compute")) read_compute(j.at("compute"), s.compute);
  if (j.contains("memory")) read_memory(j.at("memory"), s.memory);
  if (j.contains("links"))
    for (const auto& l : j.at("links")) s.links.push_back(read_link(l, s.name));
  if (j.contains("network")) read_network(j.at("network"), s.network);
  if (j.contains("profile_efficiency"))
    for (auto it = j.at("profile_efficiency").begin(); it != j.at("profile_efficiency").end(); ++it)
      s.profile_efficiency[it.key()] = read_profile_efficiency(it.value());
  if (j.contains("sources"))
    for (auto it = j.at("sources").begin(); it != j.at("sources").end(); ++it)
      s.sources[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
}

void to_json(nlohmann::json& j, const SystemSpec& s) {
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : s.links) {
    links.push_back({{"name", l.name},
                     {"span", l.span},
                     {"bandwidth_gbs", l.bandwidth_gbs},
                     {"latency_us", l.latency_s * 1e6},
                     {"efficiency", l.efficiency}});
    nlohmann::json ops = nlohmann::json::object();
    for (int i = 0; i < kNumLinkOps; ++i)
      if (l.op_efficiency[i]) ops[kLinkOpNames[i]] = *l.op_efficiency[i];
    if (!ops.empty()) links.back()["op_efficiency"] = ops;
  }
  j = nlohmann::json{
      {"name", s.name},
      {"description", s.description},
      {"devices_per_node", s.devices_per_node},
      {"compute",
       {{"peak_tflops_bf16", s.compute.peak_tflops_bf16},
        {"peak_tflops_fp32", s.compute.peak_tflops_fp32},
        {"matmul_efficiency_bf16", s.compute.matmul_efficiency_bf16},
        {"matmul_efficiency_fp32", s.compute.matmul_efficiency_fp32},
        {"flash_attention_efficiency", s.compute.flash_attention_efficiency},
        {"attention_matmul_efficiency", s.compute.attention_matmul_efficiency},
        {"matmul_ceiling_bf16", s.compute.matmul_ceiling_bf16},
        {"collective_sm_share", s.compute.collective_sm_share},
        {"kernel_overhead_us", s.compute.kernel_overhead_s * 1e6},
        {"action_overhead_us", s.compute.action_overhead_s * 1e6},
        {"gemm_units", s.compute.gemm_units},
        {"gemm_tile", s.compute.gemm_tile}}},
      {"memory",
       {{"hbm_gib", s.memory.hbm_bytes / kGiB},
        {"bandwidth_gbs", s.memory.bandwidth_gbs},
        {"elementwise_efficiency", s.memory.elementwise_efficiency},
        {"reserved_gib", s.memory.reserved_bytes / kGiB},
        {"fragmentation", s.memory.fragmentation}}},
      {"links", links},
      {"network",
       {{"nics_per_node", s.network.nics_per_node},
        {"nic_bandwidth_gbs", s.network.nic_bandwidth_gbs},
        {"latency_us", s.network.latency_s * 1e6},
        {"efficiency", s.network.efficiency}}},
      {"sources", s.sources}};
  if (s.prediction_error > 0) j["cv_abs_error"] = s.prediction_error;
  if (s.network.ring_step_s > 0) j["network"]["ring_step_us"] = s.network.ring_step_s * 1e6;
  if (!s.efficiency_group.empty()) j["efficiency_group"] = s.efficiency_group;
  for (const auto& [profile, e] : s.profile_efficiency) {
    nlohmann::json v = nlohmann::json::object();
    if (e.matmul_efficiency_bf16) v["matmul_efficiency_bf16"] = *e.matmul_efficiency_bf16;
    if (e.flash_attention_efficiency) v["flash_attention_efficiency"] = *e.flash_attention_efficiency;
    if (e.elementwise_efficiency) v["elementwise_efficiency"] = *e.elementwise_efficiency;
    if (e.prediction_error > 0) v["cv_abs_error"] = e.prediction_error;
    j["profile_efficiency"][profile] = v;
  }
  if (s.cores_per_node > 0) j["cores_per_node"] = s.cores_per_node;
}

namespace {

SystemSpec load_file(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  // A name with a NUL byte would name another path to the OS.
  const bool nul = name_or_path.find('\0') != std::string::npos;
  fs::path p = nul ? fs::path() : fs::path(name_or_path);
  std::error_code ec;  // a name the OS refuses (too long, a file as a folder) is no file
  if (!nul && !fs::is_regular_file(p, ec)) p = fs::path(config_root()) / "systems" / (name_or_path + ".json");
  check(!nul && fs::is_regular_file(p, ec), "system '{}' not found (neither a file nor a preset in {}/systems)",
        nul ? "(a name with a NUL byte)" : name_or_path, config_root());
  std::ifstream f(p);
  SystemSpec s;
  try {
    const nlohmann::json j = nlohmann::json::parse(f);
    check(j.is_object(), "a system description is a JSON object (got {})", j.type_name());
    s = j.get<SystemSpec>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("system file {}: {}", p.string(), e.what()));
  } catch (const Error& e) {
    throw Error(fmt::format("system file {}: {}", p.string(), e.what()));
  }
  s.validate();
  return s;
}

bool file_exists(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  if (name_or_path.empty() || name_or_path.find('\0') != std::string::npos) return false;
  const fs::path p = name_or_path;
  std::error_code ec;  // a name the OS refuses (too long, a file as a folder) is no file
  if (fs::is_regular_file(p, ec)) return true;
  return fs::is_regular_file(fs::path(config_root()) / "systems" / (name_or_path + ".json"), ec);
}

// "NAME@GBS": the preset and the node bandwidth, when `name` is one.
std::optional<std::pair<std::string, double>> with_network(const std::string& name) {
  const size_t at = name.rfind('@');
  if (at == std::string::npos || at == 0) return std::nullopt;
  const std::string base = name.substr(0, at), rate = name.substr(at + 1);
  size_t used = 0;
  double gbs = 0;
  try {
    gbs = std::stod(rate, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != rate.size() || !(gbs > 0) || !std::isfinite(gbs) || !file_exists(base)) return std::nullopt;
  return std::make_pair(base, gbs);
}

}  // namespace

SystemSpec load_system_spec(const std::string& name_or_path) {
  const auto net = with_network(name_or_path);
  if (!net) return load_file(name_or_path);
  SystemSpec s = load_file(net->first);
  const double was = s.network.node_bandwidth_gbs();
  s.network.nic_bandwidth_gbs = net->second / s.network.nics_per_node;
  s.description += fmt::format(" (network taken as {:g} GB/s per node, the file's {:g} scaled)", net->second, was);
  s.name = name_or_path;
  s.validate();
  return s;
}

bool system_exists(const std::string& name_or_path) {
  return with_network(name_or_path).has_value() || file_exists(name_or_path);
}

}  // namespace meshtrain::perf
