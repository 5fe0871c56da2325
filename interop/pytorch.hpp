// A plan's schedule for PyTorch's pipelining runtime (torch.distributed.pipelining's
// _PipelineScheduleRuntime, which loads a compute-only CSV): what it can run, and the CSV.
#pragma once

#include <string>

#include "plan/evaluate/evaluate.hpp"

namespace paci::interop {

// The PyTorch release whose runtime the interop checks load paci's CSV with.
inline constexpr const char* kPytorchVersion = "2.15.0";

// Why PyTorch's pipelining cannot run `config`'s schedule, or "": an asynchronous kind (PyTorch
// keeps one weight version and steps the optimizer after the schedule, so PACI, PipeDream and
// 2BW would silently run as gradient accumulation), 1F1B with fewer micro-batches than stages
// (PyTorch's Schedule1F1B refuses it; GPipe is the same schedule then).
std::string pytorch_refusal(const plan::PlanConfig& config);

// The configuration's one-step schedule in PyTorch's CSV (schedules/formats.hpp's pytorch
// format). InputError with pytorch_refusal()'s line when it cannot run.
std::string pytorch_csv(const plan::PlanConfig& config);

}  // namespace paci::interop
