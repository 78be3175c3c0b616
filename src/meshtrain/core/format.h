// Human-readable quantities for console lines and tables: bytes in binary
// units ("1.5 MiB"), rates in decimal units ("12.30 GB/s"), durations
// ("45s", "3m07s", "2h05m"). Formatting only; reports keep raw numbers.
#pragma once

#include <string>

namespace meshtrain {

std::string format_bytes(double bytes);           // "0 B", "1.5 KiB", ... "TiB"; negative keeps its sign
std::string format_rate(double bytes_per_s);      // "12.30 GB/s" (1e9), "MB/s", "kB/s", "B/s"
std::string format_duration(double seconds);      // "45s", "3m07s", "2h05m"

}  // namespace meshtrain
