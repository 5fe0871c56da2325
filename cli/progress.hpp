// A one-line progress display on a terminal (step, loss, tokens/s, ETA), silent when stderr is
// not a terminal or --quiet was given.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace paci::cli {

class Progress {
 public:
  // Steps are numbered first_step+1 .. total_steps in this run.
  Progress(std::string label, std::int64_t first_step, std::int64_t total_steps, bool quiet);
  // step counts from 1; tokens since the run started.
  void update(std::int64_t step, double loss, double tokens, double elapsed_s);
  void finish();  // ends the line
  bool enabled() const { return enabled_; }

 private:
  std::string label_;
  std::int64_t first_, total_;
  bool enabled_;
  bool printed_ = false;
};

std::string format_duration(double seconds);  // 1:02:03, 4:05, 12.3s

}  // namespace paci::cli
