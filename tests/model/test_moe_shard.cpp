// Expert parallelism in the model (config.hpp, ExpertShard; stage.hpp, ExpertExchange): a stage
// holding part of its experts, its layout and the copies between it and the whole stage, and a
// group of such stages, one thread each, sharing rows through an in-process exchange: every loss,
// load-balancing loss and gradient bit for bit the whole stage's, fused and split, any threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <thread>

#include "model/check.hpp"
#include "model/layout.hpp"
#include "model/stage.hpp"
#include "stage_runs.hpp"

namespace paci::model {
namespace {

using namespace stage_runs;

// The group's all-gather in one process: each member publishes its buffer, then copies every
// other member's rows out of theirs; the second barrier keeps a buffer until all have read it.
class ThreadExchange {
 public:
  explicit ThreadExchange(std::size_t members)
      : buffers_(members), barrier_(static_cast<std::ptrdiff_t>(members)) {}

  class Member final : public ExpertExchange {
   public:
    Member(ThreadExchange& group, std::size_t index) : group_(group), index_(index) {}
    void share(std::span<float> rows, std::span<const std::size_t> first,
               std::size_t width) override {
      group_.buffers_[index_] = rows.data();
      group_.barrier_.arrive_and_wait();
      for (std::size_t m = 0; m + 1 < first.size(); ++m)
        if (m != index_)
          std::copy(group_.buffers_[m] + first[m] * width,
                    group_.buffers_[m] + first[m + 1] * width, rows.data() + first[m] * width);
      group_.barrier_.arrive_and_wait();
      ++calls;
    }
    std::size_t calls = 0;

   private:
    ThreadExchange& group_;
    std::size_t index_;
  };

 private:
  std::vector<float*> buffers_;
  std::barrier<> barrier_;
};

struct MemberRun {
  float loss = 0;
  std::vector<float> aux_losses;
  std::vector<float> grads;  // the member's layout
  std::size_t shares = 0;
};

// One micro-batch through a whole-model stage holding part m of n of the experts, every member
// in its own thread.
std::vector<MemberRun> run_group(const StageShape& whole, const std::vector<float>& params,
                                 const Batch& batch, std::size_t n, std::size_t threads,
                                 bool split) {
  const ParamLayout full(whole.config, whole.range);
  ThreadExchange group(n);
  std::vector<MemberRun> runs(n);
  std::vector<std::thread> workers;
  for (std::size_t m = 0; m < n; ++m)
    workers.emplace_back([&, m] {
      StageShape shape = whole;
      shape.experts = {m, n};
      Stage stage(shape, threads);
      ThreadExchange::Member exchange(group, m);
      stage.set_expert_exchange(&exchange);
      std::vector<float> mine(stage.layout().size());
      copy_tensors(full, params, stage.layout(), mine);
      ActivationSlot slot = stage.make_slot();
      MemberRun& run = runs[m];
      run.loss =
          stage.forward_loss(mine, StageInput::tokens(batch.tokens), batch.targets, 0.5f, slot);
      for (std::size_t l = 0; l < shape.range.num_layers; ++l)
        run.aux_losses.push_back(slot.block_aux_loss(l));
      run.grads.assign(mine.size(), 0.0f);
      if (split) {
        WeightGradStash stash = stage.make_weight_stash();
        stage.backward_input(mine, slot, {}, {}, stash);
        stage.backward_weight(run.grads, slot, stash);
      } else {
        stage.backward(mine, run.grads, slot, {}, {});
      }
      run.shares = exchange.calls;
    });
  for (auto& w : workers) w.join();
  return runs;
}

TEST(MoeShard, LayoutHoldsItsPartOfTheExperts) {
  const StageShape shape = capacity_moe(2);
  const ParamLayout whole(shape.config, shape.range);
  const ParamLayout part(shape.config, shape.range, {1, 2});
  EXPECT_TRUE(part.contains("h.0.moe.experts.2.w1.weight"));
  EXPECT_TRUE(part.contains("h.1.moe.experts.3.w2.weight"));
  EXPECT_FALSE(part.contains("h.0.moe.experts.1.w1.weight"));
  EXPECT_TRUE(part.contains("h.0.moe.router.weight"));
  EXPECT_TRUE(part.contains("h.1.moe.shared.w3.weight"));
  // Two experts of four fewer in each of the two blocks.
  EXPECT_EQ(part.size(), whole.size() - 2 * 2 * expert_floats(shape.config));
  // Parts tile the experts: copied into the whole from every part, the whole comes back.
  std::vector<float> values(whole.size());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  std::vector<float> back(whole.size(), -1.0f);
  for (std::size_t m = 0; m < 4; ++m) {
    const ParamLayout p(shape.config, shape.range, {m, 4});
    std::vector<float> mine(p.size());
    copy_tensors(whole, values, p, mine);
    copy_tensors(p, mine, whole, back);
  }
  EXPECT_EQ(back, values);
  EXPECT_THROW((void)part.model_offset(), ModelError);
}

TEST(MoeShard, AGroupOfPartsIsBitwiseTheWholeStage) {
  const StageShape shape = capacity_moe(2);
  const ParamLayout full(shape.config, shape.range);
  const auto params = make_params(full, 3);
  const Batch batch = make_batch(shape, 4);
  const std::vector<MemberRun> whole = run_group(shape, params, batch, 1, 1, false);
  ASSERT_EQ(whole.front().shares, 0u);  // one part: nothing to share
  for (std::size_t n : {2, 4})
    for (std::size_t threads : {1, 2})
      for (bool split : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << n << " parts, " << threads << " threads, split " << split);
        const auto runs = run_group(shape, params, batch, n, threads, split);
        for (std::size_t m = 0; m < n; ++m) {
          const MemberRun& run = runs[m];
          EXPECT_EQ(run.loss, whole.front().loss);
          EXPECT_EQ(run.aux_losses, whole.front().aux_losses);
          EXPECT_EQ(run.shares, 4u);  // each block: the outputs forward, the inputs' gradients back
          const ParamLayout part(shape.config, shape.range, {m, n});
          std::vector<float> want(part.size());
          copy_tensors(full, whole.front().grads, part, want);
          std::size_t equal = 0;
          for (std::size_t i = 0; i < want.size(); ++i)
            equal += std::memcmp(&want[i], &run.grads[i], sizeof(float)) == 0;
          EXPECT_EQ(equal, want.size());
        }
      }
}

TEST(MoeShard, ErrorsNameTheProblem) {
  StageShape shape = capacity_moe(2);
  const auto message = [](const auto& f) {
    try {
      f();
    } catch (const ModelError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] {
              ParamLayout(shape.config, shape.range, {0, 3});
            }).find("4 experts do not split into 3 equal parts"),
            std::string::npos);
  EXPECT_NE(message([&] {
              ParamLayout(shape.config, shape.range, {2, 2});
            }).find("expert part 2 of 2 does not exist"),
            std::string::npos);
  GptConfig dense = shape.config;
  dense.moe = {};
  EXPECT_NE(message([&] {
              ParamLayout(dense, shape.range, {0, 2});
            }).find("no experts"),
            std::string::npos);
  // A part with nobody to share with stops at its first mixture-of-experts block.
  shape.experts = {0, 2};
  Stage stage(shape);
  const auto params = make_params(stage.layout(), 1);
  const Batch batch = make_batch(shape, 2);
  ActivationSlot slot = stage.make_slot();
  EXPECT_NE(message([&] {
              stage.forward_loss(params, StageInput::tokens(batch.tokens), batch.targets, 1.0f,
                                 slot);
            }).find("no expert group"),
            std::string::npos);
}

}  // namespace
}  // namespace paci::model
