// The tools a plan leaves paci for, and whether each can run a configuration: PyTorch's pipelining
// runtime (the schedule CSV), Megatron-LM and torchtitan. A plan a tool cannot run gets one line
// saying why, never a configuration that would launch something else.
#pragma once

#include <string>
#include <string_view>

#include "plan/evaluate/evaluate.hpp"

namespace paci::interop {

enum class Tool { pytorch, megatron, torchtitan };
std::string_view to_string(Tool tool);
Tool parse_tool(std::string_view text);  // "pytorch" | "megatron" | "torchtitan"; InputError

// Why `tool` cannot run `config` as paci planned it, in one line; "" when it can. Fast: a search
// asks it of every candidate (--emit TOOL searches only what TOOL runs).
std::string refusal(Tool tool, const plan::PlanConfig& config);

// The plan in the tool's terms, as --emit prints it: the schedule CSV, Megatron-LM's flags,
// torchtitan's arguments, each preceded by "#" comment lines. `dir`: the folder -o DIR wrote the
// plan's schedule.csv in, which torchtitan's arguments name by absolute path for a zero-bubble
// schedule ("": none written, and such a plan is refused). InputError with refusal()'s line when
// the tool cannot run it.
std::string emit(Tool tool, const plan::PlanResult& plan, const std::string& dir = "");

}  // namespace paci::interop
