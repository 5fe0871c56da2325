// What leaves paci for the tools that run a plan on the rented cluster: Megatron-LM's launch flags
// and torchtitan's job-config section for a plan (the option names of those tools' releases named
// in docs/plan.md), and the frontier's plot.
#pragma once

#include <string>
#include <string_view>

#include "plan/evaluate.hpp"

namespace paci::plan {

enum class Emitter { megatron, torchtitan };
Emitter parse_emitter(std::string_view text);  // InputError naming the choices

// The plan as `emitter`'s configuration: Megatron-LM's command-line flags (parallel sizes,
// virtual stages, micro and global batch, recomputation, sequence parallelism, distributed
// optimizer, overlaps, the model's shape) or torchtitan's TOML sections. A plan the tool cannot
// run (PACI, PipeDream, 2BW; the zero-bubble schedules in Megatron-LM) gets one line saying so,
// starting with "#", instead.
std::string emit(Emitter emitter, const PlanResult& plan);

// Step time against peak memory, staleness as colour, from frontier_csv()'s file, with python3's
// matplotlib (scripts' python3, else /usr/bin/python3). Returns "" when written, else why not.
std::string plot_frontier(const std::string& csv_path, const std::string& svg_path);

}  // namespace paci::plan
