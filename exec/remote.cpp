// What both multi-process transports share: the link timeout, the result and state gathers.
#include "exec/remote.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cstdlib>

#include "exec/rank_results.hpp"
#include "model/layout.hpp"

namespace paci::exec {

std::chrono::seconds link_timeout(const std::function<const char*(const char*)>& getenv) {
  for (const char* name : {"PACI_LINK_TIMEOUT_S", "PACI_NCCL_TIMEOUT_S"}) {
    const char* text = getenv ? getenv(name) : std::getenv(name);
    if (text == nullptr || *text == '\0') continue;
    char* end = nullptr;
    const long seconds = std::strtol(text, &end, 10);
    if (*end != '\0' || seconds <= 0)
      throw InputError(
          fmt::format("{} must be a positive number of seconds, not '{}'", name, text));
    return std::chrono::seconds(seconds);
  }
  return std::chrono::seconds(600);
}

ExecResult gather_result(ProcessLinks& links, const Schedule& schedule, const ExecResult& local) {
  const std::int32_t writer = last_stage_device(schedule);
  const auto parts =
      links.gather(encode_rank_result(schedule, local, links.local_device()), writer);
  return links.local_device() == writer ? merge_rank_results(schedule, parts) : local;
}

std::vector<model::StageState> assemble_expert_parts(ProcessLinks& links,
                                                     const model::GptConfig& config,
                                                     std::span<const model::StageStateView> mine) {
  const model::ExpertShard shard = links.expert_shard();
  const auto parts = links.gather_expert_parts(encode_stage_states(mine));
  std::vector<model::StageState> whole;
  if (shard.index != 0) return whole;
  std::vector<std::vector<model::StageState>> decoded(parts.size());
  for (std::size_t j = 0; j < parts.size(); ++j) {
    decode_stage_states(parts[j], decoded[j]);
    if (decoded[j].size() != mine.size())
      throw std::runtime_error(fmt::format(
          "expert part {} holds {} stages, part 0 holds {}: the processes do not run the same "
          "schedule",
          j, decoded[j].size(), mine.size()));
  }
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const model::ParamLayout full(config, mine[i].range);
    model::StageState s;
    s.range = mine[i].range;
    s.optimizer_steps = mine[i].optimizer_steps;
    s.weights.assign(full.size(), 0.0f);
    s.first_moment.assign(full.size(), 0.0f);
    s.second_moment.assign(full.size(), 0.0f);
    for (std::size_t j = 0; j < parts.size(); ++j) {
      const model::StageState& part = decoded[j][i];
      const model::ParamLayout layout(config, mine[i].range, {j, parts.size()});
      if (part.range != s.range || part.weights.size() != layout.size())
        throw std::runtime_error(
            fmt::format("expert part {} of stage {} has {} weights where its layout has {}", j, i,
                        part.weights.size(), layout.size()));
      model::copy_tensors(layout, part.weights, full, s.weights);
      model::copy_tensors(layout, part.first_moment, full, s.first_moment);
      model::copy_tensors(layout, part.second_moment, full, s.second_moment);
    }
    whole.push_back(std::move(s));
  }
  return whole;
}

std::vector<model::StageState> gather_stage_states(ProcessLinks& links, const Schedule& schedule,
                                                   std::span<const model::StageStateView> mine) {
  const std::int32_t writer = last_stage_device(schedule);
  const auto parts = links.gather(encode_stage_states(mine), writer);
  std::vector<model::StageState> all;
  if (links.local_device() != writer) return all;
  for (const std::string& part : parts) decode_stage_states(part, all);
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.range.first_layer < b.range.first_layer; });
  return all;
}

}  // namespace paci::exec
