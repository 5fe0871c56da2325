// StageRuntime: everything one pipeline stage owns while it trains on the CPU — its blocks'
// parameters, the gradient accumulation buffer, its own AdamW and LR schedule (stepped at its U),
// an activation store keyed by micro-batch and the stashed weight copies its policy keeps. The
// versions each F and B read, the split backward's stashes and the snapshots are kept in
// StageBooks, as on the GPU; the pipeline core (exec/pipeline_core.hpp) calls both runtimes by
// the same names and types (View, MutableView, Input, Loss).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exec/stage_books.hpp"
#include "exec/stage_plan.hpp"
#include "model/checkpoint_state.hpp"
#include "model/gpt.hpp"
#include "schedules/ir.hpp"

namespace paci::exec {

struct StageRuntimeConfig : StagePlan {
  std::size_t threads = 1;
  // Expert parallelism (shape.experts of more than one part): the stage's expert group.
  model::ExpertExchange* exchange = nullptr;
};

class StageRuntime : public StageBooks {
 public:
  using View = std::span<const float>;
  using MutableView = std::span<float>;
  using Input = model::StageInput;
  using Loss = float;

  explicit StageRuntime(const StageRuntimeConfig& config);

  const model::Stage& compute() const { return stage_; }
  model::Stage& compute() { return stage_; }
  const model::ParamLayout& layout() const { return stage_.layout(); }
  // The weights the stage computes with now.
  View weights() const { return params_; }
  // A host copy of the weights; the weights from the host (the layout's size).
  std::vector<float> params() const { return params_; }
  void set_params(std::span<const float> host);
  std::span<const float> grads() const { return grads_; }
  model::AdamW& optimizer() { return optimizer_; }
  const model::AdamW& optimizer() const { return optimizer_; }

  // F(s, mb). `input` is tokens on the first stage, received activations elsewhere. On the last
  // stage `targets` are used and the unscaled mean loss is written to *loss (when given; throws
  // if it is not finite); elsewhere the output is in output(mb).
  void forward(std::int32_t mb, const Input& input, std::span<const std::int32_t> targets,
               Loss* loss = nullptr);
  View output(std::int32_t mb);
  // B(s, mb): reads the weights its policy says, accumulates gradients, frees the activations.
  // d_output is empty on the last stage, d_input empty on the first.
  void backward(std::int32_t mb, View d_output, MutableView d_input);
  // The same backward split in two (zero-bubble schedules; the plan's split_backward):
  // I(s, mb) computes d_input reading the weights its policy says and keeps what W needs;
  // W(s, mb) adds the micro-batch's weight gradients and frees its activations. Together they
  // add exactly what backward() adds.
  void input_grad(std::int32_t mb, View d_output, MutableView d_input);
  void weight_grad(std::int32_t mb);
  // U(s): (clip,) AdamW step with this stage's LR schedule, zero gradients, new version.
  void update();
  // Two copies of the model (DualPipe): before U, the twin stage's gradients of the step added to
  // this stage's (own + twin; the twin adds the same two the other way round, which IEEE addition
  // makes bitwise the same sum, so both copies step to the same weights).
  void add_gradients(View twin);

  // What the run measured (versions, snapshots: StageBooks).
  std::size_t peak_activations() const { return activations_.peak_in_use(); }
  std::int64_t static_bytes() const;  // params, gradients, AdamW moments
  std::int64_t memory_bytes() const;  // static + activations in use + stashed weight copies
  // Weights after the i-th global step that is a multiple of snapshot_every (steps counted from
  // the start of training, resumed runs included), for i < snapshots(): validation after the run.
  View snapshot(std::size_t i) const { return snapshots_.at(i); }
  // One micro-batch's kept output gradients, from its I to its W (0 without a split backward).
  std::size_t weight_stash_bytes() const {
    return w_stashes_.empty() ? 0 : w_stashes_.front().bytes();
  }
  std::int64_t activation_slot_bytes() const {
    return static_cast<std::int64_t>(activations_.slot_bytes());
  }

  // Weights, AdamW moments and step count into / from a checkpoint's stage section of this
  // stage's layout (buffers already sized); from also takes the whole stage's section when this
  // stage holds part of its experts (its part is copied).
  void copy_state_to(model::StageState& into) const;
  void copy_state_from(const model::StageState& from);
  // The stage's part of a cut of a run (exec/cut.hpp) other than its weights and AdamW state
  // (a checkpoint's stage section holds those): the gradient accumulator, the version book, the
  // stashed weight copies, the activation store, the split backward's stashes and the validation
  // snapshots, whole. image_bytes() depends only on how the runtime was planned; load_image
  // throws InputError (naming `what`) for an image of another size or impossible contents.
  std::size_t image_bytes() const;
  void save_image(std::span<std::byte> out) const;
  void load_image(std::span<const std::byte> in, const std::string& what);
  // After load_image at a device position: InputError (naming `what`) unless the bookkeeping is
  // what replaying the stage's actions before the position records: its version book, the
  // micro-batches holding activations and those awaiting their W. A crafted image with sizes
  // right but versions or micro-batches wrong is refused here, before it can index anything.
  void check_image(std::span<const Action> before_cut, const std::string& what) const;

 private:
  // A mixture of experts: the forward's load-balancing loss and expert choices, into the books.
  void record_routing(std::int32_t mb, const model::ActivationSlot& slot);
  model::Stage stage_;
  std::vector<float> params_, grads_;
  model::AdamW optimizer_;
  model::ActivationStore activations_;
  std::vector<std::vector<float>> stash_;      // one weight copy per VersionBook stash slot
  std::vector<std::vector<float>> snapshots_;  // preallocated: nothing allocates during the run
  // Split backward: one stash per activation slot (which micro-batch holds each: StageBooks).
  std::vector<model::WeightGradStash> w_stashes_;
  void write_image(model::ImageWriter& out) const;
  // The weights a backward (or I) reads from.
  View weights_at(const Read& read) const;
};

}  // namespace paci::exec
