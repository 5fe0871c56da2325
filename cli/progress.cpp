// Progress: a carriage-return line on stderr, only on a terminal.
#include "cli/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>
#include <cmath>
#include <iostream>

namespace paci::cli {

Progress::Progress(std::string label, std::int64_t first_step, std::int64_t total_steps, bool quiet)
    : label_(std::move(label)),
      first_(first_step),
      total_(total_steps),
      enabled_(!quiet && isatty(STDERR_FILENO)) {}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const auto s = static_cast<std::int64_t>(seconds + 0.5);
  if (s < 3600) return fmt::format("{}:{:02}", s / 60, s % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
}

void Progress::update(std::int64_t step, double loss, double tokens, double elapsed_s) {
  if (!enabled_) return;
  const double rate = elapsed_s > 0 ? tokens / elapsed_s : 0.0;
  const double eta =
      step > 0 ? elapsed_s / static_cast<double>(step) * static_cast<double>(total_ - step) : NAN;
  // The loss is not known where a process runs half of each step's (two copies over MPI).
  std::cerr << fmt::format("\r{} step {}/{}  loss {}  {:.0f} tok/s  elapsed {}  ETA {}   ", label_,
                           step, total_,
                           std::isnan(loss) ? std::string("-") : fmt::format("{:.4f}", loss), rate,
                           format_duration(elapsed_s), format_duration(eta))
            << std::flush;
  printed_ = true;
}

void Progress::finish() {
  if (enabled_ && printed_) std::cerr << '\n';
  printed_ = false;
}

}  // namespace paci::cli
