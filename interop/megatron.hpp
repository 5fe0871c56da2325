// A plan as Megatron-LM's pretrain_gpt.py flags (option names recorded from Megatron-LM's own
// argument parser, interop/data/megatron_options_core_v0.16.1.json), and the environment it needs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "plan/evaluate/evaluate.hpp"

namespace paci::interop {

// The Megatron-LM release whose argument parser the option names were recorded from.
inline constexpr const char* kMegatronTag = "core_v0.16.1";

// Why Megatron-LM cannot run `config`, or "": schedules other than 1F1B and interleaved 1F1B.
std::string megatron_refusal(const plan::PlanConfig& config);

// Megatron-LM's --pipeline-model-parallel-layout for layers per model stage `partition` (p·v
// stages in model order; stage k on pipeline rank k mod p, virtual stage k / p): "E" the
// embedding on the first, "L" the loss on the last, "t" a transformer layer, "|" between stages.
// "" when Megatron-LM's own even split gives `partition` (L divisible by p·v, every stage equal).
std::string megatron_layout(const plan::PlanConfig& config,
                            const std::vector<std::int32_t>& partition);

// The flags, one word a string (a value its own word): parallel sizes and the pipeline layout,
// batch, recomputation, sequence parallelism and the overlaps, the distributed optimizer, bf16,
// the model's shape. No data or training-length flags (the launch script adds those).
// InputError with megatron_refusal()'s line when Megatron-LM cannot run it.
std::vector<std::string> megatron_args(const plan::PlanResult& plan);

// Environment variables the plan needs under Megatron-LM, name and value:
// CUDA_DEVICE_MAX_CONNECTIONS=1 whenever t > 1: Megatron-LM's validate_args asserts it for tensor
// parallelism on GPUs before Blackwell, overlap or not (core_v0.16.1; docs/interop.md).
std::vector<std::pair<std::string, std::string>> megatron_env(const plan::PlanConfig& config);

}  // namespace paci::interop
