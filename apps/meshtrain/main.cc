// meshtrain: train, measure, predict and tune GPT training across many
// accelerators. One subcommand per file (commands.h).
#include <malloc.h>

#include <cstdio>
#include <exception>
#include <new>

#include "commands.h"
#include "meshtrain/core/backends.h"
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
  // A bad flag is one line too (CLI11's default adds a second).
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("meshtrain: error: ") + e.what() + " (--help lists the flags)\n";
  });
  app.set_help_all_flag("--help-all", "Print help for every subcommand");
  app.set_version_flag("--version",
                       std::string("meshtrain ") + meshtrain::build_commit() +
                           "\nbackends: " + meshtrain::compiled_backends(),
                       "Print the source revision this binary was built from and its compiled backends");
  meshtrain::cli::Runner run;
  meshtrain::cli::add_train_command(app, run);
  meshtrain::cli::add_prepare_data_command(app, run);
  meshtrain::cli::add_bench_command(app, run);
  meshtrain::cli::add_sweep_command(app, run);
  meshtrain::cli::add_predict_command(app, run);
  meshtrain::cli::add_plan_command(app, run);
  meshtrain::cli::add_validate_command(app, run);
  meshtrain::cli::add_tune_command(app, run);
  meshtrain::cli::add_report_command(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a bad command line exits 2, as every
    // other input error does (not CLI11's own codes, 100 and up).
    return app.exit(e) == 0 ? 0 : 2;
  }
  // No exception reaches the user as a signal (std::terminate's abort):
  // each is one line and exit status 2. (Multi-rank commands end every rank
  // themselves: comm/abort.h.)
  try {
    return run();
  } catch (const meshtrain::Error& e) {
    std::fprintf(stderr, "meshtrain: error: %s\n", e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "meshtrain: error: out of memory (an allocation failed)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "meshtrain: error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "meshtrain: error: unknown exception\n");
  }
  return 2;
}
