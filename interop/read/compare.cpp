#include "interop/read/compare.hpp"

#include <fmt/format.h>

#include "interop/read/options.hpp"
#include "plan/report/report.hpp"

namespace paci::interop {

LaunchComparison compare_launch(Tool tool, std::string_view text, const LaunchContext& context,
                                std::optional<Tool> target, plan::SearchOptions options) {
  LaunchComparison c;
  c.tool = tool;
  c.runs = target.value_or(tool);
  c.launch = tool == Tool::megatron ? read_megatron(text, context) : read_torchtitan(text, context);
  const plan::PlanConfig& config = c.launch.config;
  SimResult simulated;
  c.mine = plan::evaluate_best_partition(config, options.memory_limit_bytes, {}, simulated);
  c.space.model = config.model;
  c.space.cluster = config.cluster;
  c.space.gpus = config.gpus;
  c.space.global_batch = config.global_batch;
  c.space.flash_attention = config.flash_attention;
  c.space.precision = config.precision;
  c.space.bf16_gradients =
      config.bf16_gradients;  // the launch's numerics: not the search's to change
  c.space.fp8_params = config.fp8_params;
  c.space.bf16_moments = config.bf16_moments;
  if (c.runs == Tool::torchtitan) c.space.cp_all_gather = {true};  // its only context parallelism
  if (config.shard_group > 0) c.space.shard_group = {0, config.shard_group};  // the launch's HSDP
  if (config.offload_layers > 0) c.space.offload_layers = {0, config.offload_layers};
  options.max_staleness = 0;
  const Tool runs = c.runs;
  options.runnable = [runs](const plan::PlanConfig& p) { return refusal(runs, p); };
  c.search = plan::search(c.space, options);
  if (c.search.plans.empty()) return c;
  plan::PlanResult found = c.search.plans.front();
  found.memory_limit_bytes = c.search.memory_limit_bytes;
  c.launch_wins = c.mine.fits && c.mine.step_s <= found.step_s;
  c.best = c.launch_wins ? c.mine : found;
  if (!c.launch_wins)
    c.walk = plan::walk(c.mine, found, c.search.memory_limit_bytes, options.runnable);
  return c;
}

std::string launch_text(const LaunchComparison& c) {
  const OptionTable& table = c.tool == Tool::megatron ? megatron_options() : torchtitan_options();
  std::string out = fmt::format("the launch, read as {} reads it:\n", table.tool());
  out += plan::plan_text(c.mine);
  for (const std::string& note : c.launch.notes) out += "  note: " + note + '\n';
  return out + '\n';
}

ordered_json launch_json(const LaunchComparison& c) {
  const plan::PlanConfig& config = c.launch.config;
  return {{"tool", to_string(c.tool)},
          {"gpus", config.gpus},
          {"global_batch", config.global_batch},
          {"seq_len", config.model.seq_len},
          {"notes", c.launch.notes},
          {"plan", plan::plan_json(c.mine)},
          {"best_is_launch", c.launch_wins},
          {"walk", plan::walk_json(c.walk)}};
}

}  // namespace paci::interop
