// The CLI's subcommands: one file each (cmd_<name>.cc). Each `add_*` adds its
// subcommand and options to the app and sets `run` to the function that
// executes it once parsing succeeded; `run` returns the process exit code.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace meshtrain::cli {

using Runner = std::function<int()>;

void add_train_command(CLI::App& app, Runner& run);
void add_prepare_data_command(CLI::App& app, Runner& run);
void add_predict_command(CLI::App& app, Runner& run);
void add_plan_command(CLI::App& app, Runner& run);
void add_validate_command(CLI::App& app, Runner& run);
void add_bench_command(CLI::App& app, Runner& run);
void add_sweep_command(CLI::App& app, Runner& run);
void add_tune_command(CLI::App& app, Runner& run);
void add_report_command(CLI::App& app, Runner& run);

}  // namespace meshtrain::cli
