// Generators for the schedules of SCHEDULES.md. Each returns a complete, valid schedule on P
// devices: P stages (identity placement; interleaved: P·v round-robin; zb-v and dualpipev: 2P in
// a V; dualpipe: two copies of P), N·M micro-batches, per-stage optimizer steps.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "schedules/ir.hpp"

namespace paci {

// gpipe, 1f1b, pipedream, 2bw, paci, zb-h1, zb-h2, interleaved, zb-v, dualpipev, dualpipe — in the
// order the CLI and reports list them.
const std::vector<std::string>& generator_kinds();

// True for the kinds that place 2P model stages in a V, two on each device (zb-v, dualpipev).
bool v_shaped(std::string_view kind);

// Generates `kind` with P stages, M micro-batches per optimizer step and N optimizer steps.
//   gpipe     flush every step; all M forwards, all M backwards, then U          (current)
//   1f1b      flush every step; warm-up P-1-s forwards, F/B pairs, cool-down, U   (current)
//   pipedream no flush; continuous 1F1B, U after every backward                 (stash)
//             — no accumulation, so the schedule records M=1 and N·M steps
//   2bw       no flush; continuous 1F1B, U after every M-th backward, M >= P     (double_buffer)
//   paci      no flush; continuous 1F1B, U after every M-th backward of a stage (current)
//   zb-h1     flush every step; backward split into I and W, Zero Bubble's handcrafted ZB-H1:
//             W lags s micro-batches at stage s; at most P micro-batches' activations per stage
//             (1F1B's peak)                                                      (current)
//   zb-h2     the same split with up to 2P − 1 micro-batches' activations per stage (ZB-H2's
//             memory), its order found by running the step at unit costs       (current)
//   interleaved flush every step; Megatron-LM's interleaved 1F1B, `chunks` = v model stages per
//             device (stage k on device k mod P, P·v stages), M a multiple of P  (current)
//   zb-v      flush every step; ZB-V: 2P stages in a V (device d holds d and 2P − 1 − d), the
//             backward split, at most P micro-batches' activations per stage, its order found by
//             running the step at unit costs; `chunks` must be 2                (current)
//   dualpipev flush every step; DualPipeV (DualPipe cut in half): ZB-V's V, M >= 2P, its steady
//             state overlapped pairs (F of one stage; full B of the other), full and split
//             backwards mixed, DualPipe's order exactly; `chunks` must be 2     (current)
//   dualpipe  flush every step; DualPipe: two copies of the model in opposite directions (copy
//             0's stage j on device j, copy 1's stage P + j on device P − 1 − j; Schedule::copies
//             2), P even, M even and >= 2P, each copy M/2 micro-batches, DualPipe's order
//             exactly; `chunks` must be 2                                       (current)
// `chunks` 0 means the kind's default (2 for interleaved, zb-v, dualpipev and dualpipe, 1
// otherwise). Throws
// InputError for an unknown kind or an impossible configuration.
Schedule generate_schedule(std::string_view kind, std::int32_t stages, std::int32_t microbatches,
                           std::int32_t steps, std::int32_t chunks = 0);

}  // namespace paci
