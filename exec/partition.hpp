// Partitioning the transformer blocks into P contiguous stages: balanced by analytic cost by
// default (stage 0 also carries the embeddings, the last stage the final LayerNorm, head and
// loss), or as given (--partition 3,3,2,2).
#pragma once

#include <string_view>
#include <vector>

#include "model/config.hpp"

namespace paci::exec {

// Blocks per stage, as even in forward FLOPs as contiguous ranges allow (the slowest stage is as
// fast as possible; ties go to the more even split). Throws InputError when P exceeds the number
// of blocks: every stage owns at least one block.
std::vector<model::StageRange> balanced_partition(const model::GptConfig& config,
                                                  std::size_t stages, std::size_t batch,
                                                  std::size_t seq_len);

// Parses "3,3,2,2" (blocks per stage) and checks it: one positive entry per stage, summing to the
// number of blocks. Throws InputError naming the problem.
std::vector<model::StageRange> explicit_partition(const model::GptConfig& config,
                                                  std::size_t stages, std::string_view text);

}  // namespace paci::exec
