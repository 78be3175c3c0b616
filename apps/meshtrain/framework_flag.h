// --framework-profile NAME, shared by predict and plan: cost a layout as a
// named framework release runs it (perf/framework_profile.h) instead of as
// this project's engine runs it.
//   predict  refuses a layout the framework could not run, with its reason;
//   plan     searches only what the framework could run (tune/search_space.h)
//            and drops fixed knobs it lacks, counting them by reason.
// Both take its overlaps, ZeRO runtime and step overheads (the overlap flags
// given beside it are added), its stage partition where none is given, and
// the system's efficiency data fitted for it (SystemSpec::for_profile).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "meshtrain/perf/framework_profile.h"
#include "meshtrain/perf/perf_options.h"
#include "meshtrain/perf/system_spec.h"

namespace meshtrain::cli {

void add_framework_flag(CLI::App* cmd, std::string& name);

// The profile `name` names (nullptr for ""; throws Error naming the known
// ones for an unknown name). Sets `options` to its options plus the
// overlaps `options` already had, and `sys` to its efficiency data.
const perf::FrameworkProfile* apply_framework_flag(const std::string& name, perf::PerfOptions& options,
                                                   perf::SystemSpec& sys);

// --context-parallel-size CP beside --framework-profile: CP > 1 is priced only
// as a framework runs it (this project's engine has no context parallelism);
// throws Error naming the profiles that have it otherwise.
void check_context_parallel_flag(int cp, const perf::FrameworkProfile* f);

// "as NAME runs it: BASIS" on standard output; nothing for nullptr.
void print_framework(const perf::FrameworkProfile* f);

}  // namespace meshtrain::cli
