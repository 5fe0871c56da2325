// Generators for the five schedules of SCHEDULES.md. Each returns a complete, valid schedule:
// P stages on P devices (identity placement), N·M micro-batches, per-stage optimizer steps.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "schedules/ir.hpp"

namespace paci {

// gpipe, 1f1b, pipedream, 2bw, paci — in the order the CLI and reports list them.
const std::vector<std::string>& generator_kinds();

// Generates `kind` with P stages, M micro-batches per optimizer step and N optimizer steps.
//   gpipe     flush every step; all M forwards, all M backwards, then U          (current)
//   1f1b      flush every step; warm-up P-1-s forwards, F/B pairs, cool-down, U   (current)
//   pipedream no flush; continuous 1F1B, U after every backward                 (stash)
//             — no accumulation, so the schedule records M=1 and N·M steps
//   2bw       no flush; continuous 1F1B, U after every M-th backward, M >= P     (double_buffer)
//   paci      no flush; continuous 1F1B, U after every M-th backward of a stage (current)
// Throws InputError for an unknown kind or an impossible configuration.
Schedule generate_schedule(std::string_view kind, std::int32_t stages, std::int32_t microbatches,
                           std::int32_t steps);

}  // namespace paci
