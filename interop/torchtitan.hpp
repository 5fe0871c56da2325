// A plan as torchtitan's command line (python -m torchtitan.train --module M --config C and
// overrides: torchtitan 0.3.0 reads no TOML file), and the environment it needs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "plan/evaluate/evaluate.hpp"

namespace paci::interop {

inline constexpr const char* kTorchtitanVersion = "0.3.0";

// torchtitan's model module and config for a paci model preset ("llama3", "llama3_8b"), or
// empty strings when torchtitan 0.3.0 defines no such model.
std::pair<std::string, std::string> torchtitan_model(const plan::ModelSpec& model);

// Why torchtitan cannot run `config`, or "": an asynchronous kind (PyTorch's pipelining flushes
// every step), a model torchtitan does not define (it builds models from its own configs: the
// Llama 3 presets), Llama 3 405B (its config trains in float8, paci plans bf16), what PyTorch's
// schedules refuse (pytorch_refusal).
std::string torchtitan_refusal(const plan::PlanConfig& config);

// The arguments after `python -m torchtitan.train`: module and config, the parallel degrees
// (data parallelism as FSDP shards: torchtitan refuses DDP beside TP or PP), the schedule (a
// zero-bubble one as `schedule_csv`, the CSV's absolute path), the stages' modules, micro-batch,
// batch and sequence, bf16 mixed precision, the compile async TP needs, CUDA graphs off with PP,
// activation checkpointing. InputError with torchtitan_refusal()'s line.
std::vector<std::string> torchtitan_args(const plan::PlanResult& plan,
                                         const std::string& schedule_csv);

// torchtitan's schedule name for the kind, "" for the zero-bubble kinds (loaded from a CSV).
std::string torchtitan_schedule(const plan::PlanConfig& config);

// Each model stage's modules, in model order (torchtitan's module_fqns_per_model_part): the
// embedding on the first, layers.i of the partition, the norm and lm_head on the last.
std::vector<std::string> torchtitan_module_parts(const plan::PlanConfig& config);

// The activation checkpointing subcommand ("activation-checkpoint:full"), which ends the
// arguments (torchtitan_args' last word).
std::string torchtitan_activation_checkpoint(const plan::PlanConfig& config);

std::vector<std::pair<std::string, std::string>> torchtitan_env(const plan::PlanConfig& config);

}  // namespace paci::interop
