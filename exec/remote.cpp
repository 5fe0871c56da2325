// What both multi-process transports share: the link timeout, the result and state gathers.
#include "exec/remote.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cstdlib>

#include "exec/rank_results.hpp"

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
