// Tests of resuming from model/checkpoint_state.hpp: stage sections re-sliced to any other
// partition (stage_state), and AdamW saved mid-run and restored into a fresh optimizer continuing
// bitwise like the uninterrupted run.
#include <gtest/gtest.h>

#include <cmath>

#include "model/checkpoint_state.hpp"
#include "model/optimizer.hpp"
#include "tests/model/checkpoint_test_util.hpp"

namespace paci::model {
namespace {

using namespace testing_util;

class ResumeCheckpoint : public CheckpointTest {};

const GptConfig kConfig{.layers = 3, .heads = 2, .d_model = 4, .max_seq_len = 3, .vocab = 5};

TEST_F(ResumeCheckpoint, SectionsReassembleIntoAnyPartition) {
  std::vector<StageState> stages = make_stages(kConfig, {1, 2});
  for (StageState& s : stages) s.optimizer_steps = 7;
  save_state(path("run.state"), {.config = kConfig}, views(stages));
  const TrainingState loaded = load_state(path("run.state"));
  std::vector<float> whole_m;  // the whole model's first moment, concatenated
  for (const StageState& s : stages) {
    whole_m.insert(whole_m.end(), s.first_moment.begin(), s.first_moment.end());
  }
  for (StageRange range : {StageRange{0, 3}, StageRange{0, 1}, StageRange{1, 1}, StageRange{2, 1},
                           StageRange{1, 2}, StageRange{0, 2}}) {
    const ParamLayout layout(kConfig, range);
    const StageState got = stage_state(loaded, range);
    EXPECT_EQ(got.range, range);
    EXPECT_EQ(got.optimizer_steps, 7u);
    EXPECT_TRUE(same_bits(got.first_moment,
                          std::span(whole_m).subspan(layout.model_offset(), layout.size())))
        << "blocks from " << range.first_layer;
  }
  EXPECT_TRUE(same_bits(stage_state(loaded, {1, 2}).weights, stages[1].weights));
  EXPECT_TRUE(same_bits(stage_state(loaded, {1, 2}).second_moment, stages[1].second_moment));

  const std::vector<StageState> disagreeing = make_stages(kConfig, {1, 2});  // steps 10 and 11
  save_state(path("run.state"), {.config = kConfig}, views(disagreeing));
  const TrainingState mixed = load_state(path("run.state"));
  EXPECT_EQ(stage_state(mixed, {1, 2}).optimizer_steps, 11u);
  expect_input_error(
      [&] {
        stage_state(mixed, {0, 3});
      },
      {path("run.state"), "disagree on the optimizer step count (10 and 11)"});

  save_state(path("part.state"), {.config = kConfig}, views({stages[0]}));
  expect_input_error(
      [&] {
        stage_state(load_state(path("part.state")), {0, 3});
      },
      {path("part.state"), "sections (blocks [0, 1)) do not cover blocks [0, 3)"});
}

// Six AdamW steps straight through, against three steps, a save, a load into a fresh optimizer and
// buffer, and three more: the same bits. This is the wiring a trainer does with the state.
TEST_F(ResumeCheckpoint, AdamWContinuesBitwiseAfterSaveAndLoad) {
  const ParamLayout layout(kConfig, whole_model(kConfig));
  const LrSchedule schedule{.max_lr = 1e-2, .min_lr = 1e-3, .warmup_steps = 2, .total_steps = 6};
  const auto grads = [&](std::size_t step) {
    std::vector<float> g(layout.size());
    for (std::size_t i = 0; i < g.size(); ++i) {
      g[i] = 0.1f * std::sin(static_cast<float>(i) + 0.7f * static_cast<float>(step));
    }
    return g;
  };
  std::vector<float> initial(layout.size());
  for (std::size_t i = 0; i < initial.size(); ++i)
    initial[i] = 0.01f * std::cos(static_cast<float>(i));

  std::vector<float> straight = initial;
  AdamW straight_adamw(layout);
  for (std::size_t step = 0; step < 6; ++step)
    straight_adamw.step(straight, grads(step), schedule.at(step));

  std::vector<float> before = initial;
  AdamW before_adamw(layout);
  for (std::size_t step = 0; step < 3; ++step)
    before_adamw.step(before, grads(step), schedule.at(step));
  StateMetadata metadata{.config = kConfig, .step = 3, .lr_schedule = schedule};
  const StageStateView view{whole_model(kConfig), before_adamw.steps(), before,
                            before_adamw.first_moment(), before_adamw.second_moment()};
  save_state(path("run.state"), metadata, std::span(&view, 1));

  const TrainingState loaded = load_state(path("run.state"), kConfig);
  const StageState state = stage_state(loaded, whole_model(kConfig));
  std::vector<float> resumed = state.weights;
  AdamW resumed_adamw(layout);
  std::copy(state.first_moment.begin(), state.first_moment.end(),
            resumed_adamw.first_moment().begin());
  std::copy(state.second_moment.begin(), state.second_moment.end(),
            resumed_adamw.second_moment().begin());
  resumed_adamw.set_steps(state.optimizer_steps);
  for (std::size_t step = loaded.metadata.step; step < 6; ++step) {
    resumed_adamw.step(resumed, grads(step), loaded.metadata.lr_schedule.at(step));
  }
  EXPECT_EQ(resumed_adamw.steps(), 6u);
  EXPECT_TRUE(same_bits(resumed, straight));
  EXPECT_TRUE(same_bits(resumed_adamw.first_moment(), straight_adamw.first_moment()));
  EXPECT_TRUE(same_bits(resumed_adamw.second_moment(), straight_adamw.second_moment()));
}

}  // namespace
}  // namespace paci::model
