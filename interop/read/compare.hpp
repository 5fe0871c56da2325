// A user's launch against the best plan the same tool runs (paci plan --from-megatron,
// --from-torchtitan): the launch read and predicted with its best partition, the search for the
// same model, GPUs and global batch kept to what the tool runs, and the walk from one to the other.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "interop/read/launch.hpp"
#include "interop/tool.hpp"
#include "plan/search/compare.hpp"
#include "plan/search/search.hpp"
#include "traces/report.hpp"  // ordered_json

namespace paci::interop {

struct LaunchComparison {
  Tool tool = Tool::megatron;  // whose launch was read
  Tool runs = Tool::megatron;  // whose plans the search kept to (the tool, or --emit's)
  ReadLaunch launch;
  plan::PlanResult mine;  // the launch predicted (its own partition, else its best)
  plan::SearchSpace space;
  plan::SearchResult search;
  // The launch is a candidate too: when the search's best is no faster, the launch is the answer.
  bool launch_wins = false;
  std::optional<plan::PlanResult> best;  // empty when no plan the tool runs fits
  std::vector<plan::GapStep> walk;       // from mine to best, one knob at a time
};

// Reads `text` as `tool` reads it (read_megatron / read_torchtitan: InputError for what cannot be
// read), predicts it, and searches at staleness 0 (the tools run flushed schedules) with
// `options`' memory limit, top, jobs and interruption, kept to what `target` (else `tool`) runs.
LaunchComparison compare_launch(Tool tool, std::string_view text, const LaunchContext& context,
                                std::optional<Tool> target, plan::SearchOptions options);

// "the launch, read as <tool> reads it:", its plan and notes, a blank line.
std::string launch_text(const LaunchComparison& c);
// {"tool", "gpus", "global_batch", "seq_len", "notes", "plan", "best_is_launch", "walk"}.
ordered_json launch_json(const LaunchComparison& c);

}  // namespace paci::interop
