// meshtrain: train, measure, predict and tune GPT training across many
// accelerators. One subcommand per file (commands.h).
#include <malloc.h>

#include <cstdio>

#include "commands.h"
#include "meshtrain/core/build_commit.h"
#include "meshtrain/core/error.h"

int main(int argc, char** argv) {
  // Medium blocks stay in the heap rather than being mapped and unmapped
  // each time (large ones are reused by the Buffer cache, core/memory.h).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);

  CLI::App app{"meshtrain: GPT training with tensor, pipeline and ZeRO data parallelism over MPI;\n"
               "measures, predicts and tunes the combination.",
               "meshtrain"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");
  app.set_version_flag("--version", std::string("meshtrain ") + meshtrain::build_commit(),
                       "Print the source revision this binary was built from");
  meshtrain::cli::Runner run;
  meshtrain::cli::add_train_command(app, run);
  meshtrain::cli::add_prepare_data_command(app, run);
  meshtrain::cli::add_bench_command(app, run);
  meshtrain::cli::add_sweep_command(app, run);
  meshtrain::cli::add_predict_command(app, run);
  meshtrain::cli::add_plan_command(app, run);
  meshtrain::cli::add_validate_command(app, run);
  meshtrain::cli::add_report_command(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run();
  } catch (const meshtrain::Error& e) {
    std::fprintf(stderr, "meshtrain: error: %s\n", e.what());
    return 2;
  }
}
