// What the executor tests of both backends (tests/exec on the CPU, exec/cuda/tests on the GPU)
// build their runs from: a training configuration over the synthetic tokens, and every stage's
// final weights in stage order.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/partition.hpp"
#include "model/config.hpp"
#include "synthetic.hpp"

namespace paci::exec::testing {

// `stages` balanced stages of `gpt` on B x T micro-batches of the synthetic tokens, a one-step
// warm-up to `max_lr`, decaying to `min_lr`, seed 7. Config: ExecConfig or GpuExecConfig.
template <typename Config>
Config training_config(const model::GptConfig& gpt, std::int32_t stages, std::size_t batch,
                       std::size_t seq_len, double max_lr, double min_lr) {
  Config c;
  c.config = gpt;
  c.ranges = balanced_partition(c.config, static_cast<std::size_t>(stages), batch, seq_len);
  c.batch = batch;
  c.seq_len = seq_len;
  c.lr.max_lr = max_lr;
  c.lr.min_lr = min_lr;
  c.lr.warmup_steps = 1;
  c.seed = 7;
  c.data = synthetic;
  return c;
}

// Every stage's weights after a run, in stage order (an Executor or a GpuPipeline).
template <typename Pipeline>
std::vector<float> whole_params(const Pipeline& pipeline, std::int32_t stages) {
  std::vector<float> all;
  for (std::int32_t s = 0; s < stages; ++s) {
    const std::vector<float> w = pipeline.stage(s).params();
    all.insert(all.end(), w.begin(), w.end());
  }
  return all;
}

}  // namespace paci::exec::testing
