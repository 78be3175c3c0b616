#include "meshtrain/core/host_memory.h"

#include <fstream>
#include <sstream>

namespace meshtrain {

namespace {

std::string slurp(const char* path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The value of `key` in /proc/meminfo's text, bytes; -1 when absent.
int64_t meminfo_bytes(const std::string& meminfo, const std::string& key) {
  std::istringstream in(meminfo);
  std::string k;
  int64_t kib = 0;
  while (in >> k >> kib) {
    if (k == key + ":") return kib * 1024;
    in.ignore(1 << 10, '\n');
  }
  return -1;
}

// A cgroup file's number; -1 for "max", an empty or unreadable file.
int64_t cgroup_number(const std::string& text) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    return v >= 0 ? v : -1;
  } catch (...) {
    return -1;
  }
}

}  // namespace

int64_t node_memory_total_bytes() { return std::max<int64_t>(0, meminfo_bytes(slurp("/proc/meminfo"), "MemTotal")); }

AvailableMemory available_memory_from(const std::string& meminfo, const std::string& limit,
                                      const std::string& usage) {
  AvailableMemory a;
  if (const int64_t m = meminfo_bytes(meminfo, "MemAvailable"); m >= 0) a = {m, "MemAvailable"};
  const int64_t lim = cgroup_number(limit), use = cgroup_number(usage);
  // A v1 cgroup without a limit reports a number near 2^63.
  if (lim >= 0 && lim < (int64_t{1} << 60)) {
    const int64_t left = std::max<int64_t>(0, lim - std::max<int64_t>(0, use));
    if (a.source.empty() || left < a.bytes) a = {left, "the cgroup's memory limit"};
  }
  return a;
}

AvailableMemory node_available_memory() {
  const std::string meminfo = slurp("/proc/meminfo");
  std::string limit = slurp("/sys/fs/cgroup/memory.max"), usage = slurp("/sys/fs/cgroup/memory.current");
  if (limit.empty()) {
    limit = slurp("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    usage = slurp("/sys/fs/cgroup/memory/memory.usage_in_bytes");
  }
  return available_memory_from(meminfo, limit, usage);
}

}  // namespace meshtrain
