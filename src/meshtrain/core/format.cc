#include "meshtrain/core/format.h"

#include <cmath>

#include <fmt/format.h>

namespace meshtrain {

std::string format_bytes(double b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  const bool neg = b < 0;
  b = std::abs(b);
  while (b >= 1024 && i < 4) b /= 1024, ++i;
  return fmt::format("{}{:.{}f} {}", neg ? "-" : "", b, i == 0 ? 0 : 1, u[i]);
}

std::string format_rate(double bps) {
  if (bps >= 1e9) return fmt::format("{:.2f} GB/s", bps / 1e9);
  if (bps >= 1e6) return fmt::format("{:.2f} MB/s", bps / 1e6);
  if (bps >= 1e3) return fmt::format("{:.2f} kB/s", bps / 1e3);
  return fmt::format("{:.0f} B/s", bps);
}

std::string format_duration(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  const int64_t t = static_cast<int64_t>(s);
  if (s < 3600) return fmt::format("{}m{:02d}s", t / 60, t % 60);
  return fmt::format("{}h{:02d}m", t / 3600, (t % 3600) / 60);
}

}  // namespace meshtrain
