// What memory this node (or this process's container) can give: read from
// /proc/meminfo and the cgroup (v2 memory.max/memory.current, or v1
// memory.limit_in_bytes/memory.usage_in_bytes) of this process.
#pragma once

#include <cstdint>
#include <string>

namespace meshtrain {

// MemTotal of /proc/meminfo in bytes; 0 when unknown.
int64_t node_memory_total_bytes();

struct AvailableMemory {
  int64_t bytes = 0;    // the smaller of the two limits below that is known; 0: unknown
  std::string source;   // which limit it is ("MemAvailable", "cgroup memory.max")
};

// Bytes a new allocation on this node can still get: MemAvailable, or the
// cgroup's limit minus its current usage where that is smaller.
AvailableMemory node_available_memory();

// The parsing, for tests: `meminfo` is /proc/meminfo's text; `limit` and
// `usage` a cgroup's files ("max" or a number; empty: no such file).
AvailableMemory available_memory_from(const std::string& meminfo, const std::string& limit,
                                      const std::string& usage);

}  // namespace meshtrain
