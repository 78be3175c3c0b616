#include "meshtrain/train/train_log.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/core/format.h"
#include "meshtrain/core/terminal.h"

namespace meshtrain {

TrainLog::TrainLog(const TrainOptions& o, bool rank0)
    : o_(o), rank0_(rank0), tty_(rank0 && !o.quiet && live_output_enabled(o.progress)) {
  if (!rank0 || o.log_file.empty()) return;
  file_ = std::fopen(o.log_file.c_str(), "a");
  check(file_ != nullptr, "cannot open --log-file {}: {}", o.log_file, std::strerror(errno));
}

TrainLog::~TrainLog() {
  if (file_) std::fclose(file_);
}

void TrainLog::iteration(const IterationMetrics& m) {
  if (!rank0_) return;
  const bool logged = (m.iteration - 1) % o_.log_interval == 0 || m.iteration == o_.train_iters;
  if (!logged) return;
  if (!o_.quiet) {
    fmt::print("{}iter {:>5}/{} | loss {:.4f} | lr {:.3e} | grad norm {:.3f} | {:.0f} tokens/s | {:.1f} GFLOP/s | "
               "peak mem {}{}\n",
               tty_ ? "\r\033[K" : "", m.iteration, o_.train_iters, m.loss, m.lr, m.grad_norm, m.tokens_per_s,
               m.gflops_per_rank, format_bytes(m.peak_bytes), m.skipped ? " | skipped (non-finite)" : "");
  }
  if (file_) {
    // JSON has no NaN or infinity: such values are written as strings.
    auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(fmt::format("{}", v)); };
    const nlohmann::json j{{"iteration", m.iteration},       {"loss", num(m.loss)},
                           {"lr", m.lr},                     {"grad_norm", num(m.grad_norm)},
                           {"step_time_s", m.step_time_s},   {"tokens_per_s", m.tokens_per_s},
                           {"peak_memory_bytes", m.peak_bytes}, {"skipped", m.skipped},
                           {"skipped_steps", m.skipped_steps}};
    std::fputs((j.dump() + "\n").c_str(), file_);
    std::fflush(file_);
  }
  std::fflush(stdout);
}

void TrainLog::progress(int done, double elapsed_s, int first) {
  if (!tty_) return;
  const double frac = double(done) / o_.train_iters, run_frac = double(done - first) / (o_.train_iters - first);
  const int w = 30, fill = static_cast<int>(frac * w);
  fmt::print("[{}{}] {:3.0f}% ETA {}", std::string(fill, '#'), std::string(w - fill, ' '), 100 * frac,
             format_duration(elapsed_s / run_frac - elapsed_s));
  std::fflush(stdout);
}

void TrainLog::validation(int iteration, double loss) {
  if (!rank0_) return;
  if (!o_.quiet)
    fmt::print("{}validation | iter {} | loss {:.4f} | ppl {:.2f}\n", tty_ ? "\r\033[K" : "", iteration, loss,
               std::exp(loss));
  if (file_) {
    std::fputs((nlohmann::json{{"iteration", iteration}, {"val_loss", loss}}.dump() + "\n").c_str(), file_);
    std::fflush(file_);
  }
  std::fflush(stdout);
}

void TrainLog::event(const std::string& line) {
  if (!rank0_ || o_.quiet) return;
  fmt::print("{}{}\n", tty_ ? "\r\033[K" : "", line);
  std::fflush(stdout);
}

void TrainLog::end_progress() {
  if (tty_) fmt::print("\r\033[K");
}

}  // namespace meshtrain
