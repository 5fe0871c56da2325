// The pipeline core's non-template part: failure text and failure injection.
#include "exec/pipeline_core.hpp"

#include <csignal>

namespace paci::exec {

std::string at_action(std::int32_t device, const Action& action) {
  return fmt::format("device {}, stage {}, action {}", device, action.stage, to_string(action));
}

std::runtime_error deadlock(std::int32_t device, const Action& action) {
  return std::runtime_error(
      fmt::format("deadlock: device {} waits at {}", device, to_string(action)));
}

void fail_if_injected(const TrainingConfig& config, const Action& action) {
  if (!config.fail_at || !(*config.fail_at == action)) return;
  if (config.fail_kills) std::raise(SIGKILL);
  throw std::runtime_error("injected failure (--fail-at)");
}

}  // namespace paci::exec
