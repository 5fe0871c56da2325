// refusal() and emit() for each tool.
#include "interop/tool.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "base/errors.hpp"
#include "interop/megatron.hpp"
#include "interop/pytorch.hpp"
#include "interop/torchtitan.hpp"
#include "interop/words.hpp"

namespace paci::interop {

std::string_view to_string(Tool tool) {
  switch (tool) {
    case Tool::pytorch:
      return "pytorch";
    case Tool::megatron:
      return "megatron";
    case Tool::torchtitan:
      return "torchtitan";
  }
  return "?";
}

Tool parse_tool(std::string_view text) {
  if (text == "pytorch") return Tool::pytorch;
  if (text == "megatron") return Tool::megatron;
  if (text == "torchtitan") return Tool::torchtitan;
  throw InputError(fmt::format("--emit takes pytorch, megatron or torchtitan, got '{}'", text));
}

std::string refusal(Tool tool, const plan::PlanConfig& config) {
  switch (tool) {
    case Tool::pytorch:
      return pytorch_refusal(config);
    case Tool::megatron:
      return megatron_refusal(config);
    case Tool::torchtitan:
      return torchtitan_refusal(config);
  }
  return "unknown tool";
}

std::string emit(Tool tool, const plan::PlanResult& plan, const std::string& dir) {
  if (const std::string why = refusal(tool, plan.config); !why.empty()) throw InputError(why);
  const plan::PlanConfig& c = plan.config;
  switch (tool) {
    case Tool::pytorch:
      return pytorch_csv(c);
    case Tool::megatron:
      return fmt::format(
          "# paci plan -> Megatron-LM pretrain_gpt.py ({}); {} GPUs, data parallel {}{}\n{}\n",
          kMegatronTag, c.gpus, c.dp(), env_comment(megatron_env(c)),
          shell_join(megatron_args(plan)));
    case Tool::torchtitan:
      if (c.pp > 1 && torchtitan_schedule(c).empty() && dir.empty())
        throw InputError(fmt::format(
            "torchtitan loads a {} schedule from paci's CSV: add -o DIR to write it (the "
            "arguments then name it by its absolute path)",
            c.kind));
      return fmt::format(
          "# paci plan -> torchtitan {} (python -m torchtitan.train); {} GPUs{}\n{}\n",
          kTorchtitanVersion, c.gpus, env_comment(torchtitan_env(c)),
          shell_join(torchtitan_args(
              plan, std::filesystem::absolute(dir + "/schedule.csv").lexically_normal().string())));
  }
  return "";
}

}  // namespace paci::interop
