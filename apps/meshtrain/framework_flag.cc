#include "framework_flag.h"

#include <fmt/format.h>

#include "meshtrain/core/error.h"

namespace meshtrain::cli {

void add_framework_flag(CLI::App* cmd, std::string& name) {
  std::string known;
  for (const perf::FrameworkProfile& p : perf::framework_profiles()) known += (known.empty() ? "" : ", ") + p.name;
  cmd->add_option("--framework-profile", name,
                  "Cost the layout as this framework release runs it: its schedules, overlaps, ZeRO runtime and "
                  "fitted efficiency (" +
                      known + "; default: this project's engine)");
}

const perf::FrameworkProfile* apply_framework_flag(const std::string& name, perf::PerfOptions& options,
                                                   perf::SystemSpec& sys) {
  if (name.empty()) return nullptr;
  const perf::FrameworkProfile& f = perf::framework_profile(name);
  perf::PerfOptions o = f.options;
  o.overlap_grad_reduce |= options.overlap_grad_reduce;
  o.overlap_param_gather |= options.overlap_param_gather;
  o.tp_comm_overlap |= options.tp_comm_overlap;
  o.overlap_p2p_comm |= options.overlap_p2p_comm;
  options = o;
  sys = sys.for_profile(f.name);
  return &f;
}

void check_context_parallel_flag(int cp, const perf::FrameworkProfile* f) {
  if (cp == 1 || f) return;  // a profile without CP refuses it by name (unsupported_by)
  std::string with;
  for (const perf::FrameworkProfile& p : perf::framework_profiles())
    if (p.context_parallel) with += (with.empty() ? "" : " or ") + p.name;
  throw Error(fmt::format("--context-parallel-size {}: this project's engine runs no context parallelism; price it "
                          "as a framework that does (--framework-profile {})",
                          cp, with));
}

void print_framework(const perf::FrameworkProfile* f) {
  if (f) fmt::print("as {} runs it: {}\n", f->name, f->basis);
}

}  // namespace meshtrain::cli
