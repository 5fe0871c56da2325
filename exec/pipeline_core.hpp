// The pipeline core: what running a schedule means, written once for both backends — the CPU
// executor (exec/executor.hpp: a thread per device, blocking queues) and the GPU pipeline
// (exec/cuda/pipeline.hpp: one host thread queueing every stage's work on its stream, CUDA
// events). A backend keeps only how it waits, moves data and tells time.
//
//   Pipeline<Runtime, Config>  the checks and the stage allocation of a run, and the accessors of
//                              its stage runtimes (StageRuntime or GpuStageRuntime: the same names)
//   advance(backend, device)   one device's next action: its receives, the action, its sends, in
//                              the lowered program's order (schedules/lower.hpp), and what it
//                              records: times, the version read, memory; each backend runs its
//                              own loop over its devices around it (threads, or one issue loop)
//   DeviceLog<Stamp>           what a device recorded, in the backend's timestamps, turned into
//                              the run's result (ExecResult) in seconds
//   evaluate_stages()          forward-only validation loss through every stage
#pragma once

#include <fmt/format.h>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/rank_plan.hpp"
#include "exec/stage_plan.hpp"
#include "exec/stage_set.hpp"
#include "model/init.hpp"
#include "schedules/analysis.hpp"
#include "schedules/ir.hpp"
#include "schedules/lower.hpp"
#include "traces/report.hpp"
#include "traces/timeline.hpp"

namespace paci::exec {

// "device 1, stage 2, action 2B1": where a failure happened, for its message.
std::string at_action(std::int32_t device, const Action& action);
// The error of a run that cannot go on: `device` waits at `action` for a message never sent.
std::runtime_error deadlock(std::int32_t device, const Action& action);
// Failure injection (TrainingConfig::fail_at): throws, or ends the process with SIGKILL, when
// `action` is the one to fail at.
void fail_if_injected(const TrainingConfig& config, const Action& action);

// A stage's data of the micro-batch in hand: its input tokens (first stage) and targets (last).
struct StageTokens {
  std::vector<std::int32_t> tokens, targets;
  explicit StageTokens(std::size_t rows = 0) : tokens(rows), targets(rows) {}
};

// Runs `a` on its stage: the action switch of every backend. `batch` holds the micro-batch's
// tokens and targets (filled from `data` on the first and last stages), `received` what the
// action's receives brought (the input activation of F, the output gradient of B and I),
// `d_input` where B and I write the input gradient the previous stage gets (ignored on the first
// stage), `loss` where the last stage's F puts its loss (used by F only). Returns the weight
// version the action read (U: the one it created; I reads the current weights, W adds to the
// version its I read).
template <typename Runtime>
std::int32_t run_action(Runtime& rt, const Action& a, const DataFn& data, StageTokens& batch,
                        typename Runtime::View received, typename Runtime::MutableView d_input,
                        typename Runtime::Loss* loss) {
  using View = typename Runtime::View;
  using MutableView = typename Runtime::MutableView;
  using Input = typename Runtime::Input;
  const View d_output = rt.is_last() ? View() : received;
  const MutableView into = rt.is_first() ? MutableView() : d_input;
  switch (a.kind) {
    case ActionKind::F:
      if (rt.is_first() || rt.is_last())
        data(static_cast<std::uint64_t>(a.microbatch), batch.tokens, batch.targets);
      rt.forward(a.microbatch,
                 rt.is_first() ? Input::tokens(batch.tokens) : Input::activations(received),
                 batch.targets, loss);
      return rt.v_f(a.microbatch);
    case ActionKind::B:
      rt.backward(a.microbatch, d_output, into);
      return rt.v_b(a.microbatch);
    case ActionKind::I:
      rt.input_grad(a.microbatch, d_output, into);
      return rt.version();
    case ActionKind::W:
      rt.weight_grad(a.microbatch);
      return rt.v_b(a.microbatch);
    case ActionKind::U:
      // Two copies: `received` holds the twin's gradients of the step (empty otherwise).
      if constexpr (requires { rt.add_gradients(received); }) {
        if (!received.empty()) rt.add_gradients(received);
      }
      rt.update();
      return rt.version();
  }
  return rt.version();
}

// What a send of `m` carries: the producer's output (an activation), the input gradient its
// B or I wrote into `d_input`, or (two copies, after the step's last backward) the stage's
// accumulated weight gradients for its twin.
template <typename Runtime>
typename Runtime::View message_data(Runtime& rt, const StageMessage& m,
                                    typename Runtime::MutableView d_input) {
  if (m.kind == DependencyKind::activation) return rt.output(m.producer.microbatch);
  if (m.kind == DependencyKind::twin_gradients) {
    if constexpr (requires { rt.add_gradients(rt.grads()); }) {
      return rt.grads();
    } else {
      throw std::logic_error("this backend does not run two copies of the model");
    }
  }
  return d_input;
}

// What one device records as it runs, in its backend's timestamps (CPU: RunClock seconds; GPU:
// EventClock ids), until collect() turns them into seconds.
template <typename Stamp>
class DeviceLog {
 public:
  void reserve(std::size_t actions) { actions_.reserve(actions); }
  // A resumed run: the device starts at `position` of its list; the actions before it get no
  // times (zeros) and no compute slices.
  void skip(std::size_t position) { skipped_ = position; }
  void action(Stamp start, Stamp end, std::int32_t version) {
    actions_.push_back({start, end, end, version});
  }
  // When the device could begin its next action (after its sends were queued).
  void freed(Stamp at) { actions_.back().free = at; }
  // The end of the action at `position` of the device's list (run already).
  Stamp end_at(std::size_t position) const { return actions_[position - skipped_].end; }
  // The bytes the device holds from `at` on (recorded when they change and `record` is set).
  void memory(Stamp at, std::int64_t bytes, bool record) {
    peak_memory_ = std::max(peak_memory_, bytes);
    if (record && (memory_.empty() || memory_.back().bytes != bytes))
      memory_.push_back({at, bytes});
  }

  // This device's part of the result: its actions' times, its compute slices (with the
  // timeline), its memory samples and peak. `seconds(stamp)` converts a timestamp.
  template <typename Seconds>
  void collect(ExecResult& result, std::int32_t device, std::span<const Action> list,
               bool record_timeline, Seconds&& seconds) const {
    auto& times = result.times[static_cast<std::size_t>(device)];
    times.assign(skipped_, ActionTime{});
    for (std::size_t i = 0; i < actions_.size(); ++i) {
      const Entry& e = actions_[i];
      const ActionTime t{seconds(e.start), seconds(e.end), seconds(e.free)};
      times.push_back(t);
      if (record_timeline)
        result.timeline.compute.push_back(
            {list[skipped_ + i], device, t.start_s, t.end_s, e.version});
    }
    for (const Sample& m : memory_)
      result.timeline.memory.push_back({device, seconds(m.at), m.bytes});
    result.device_peak_memory_bytes[static_cast<std::size_t>(device)] = peak_memory_;
  }

 private:
  struct Entry {
    Stamp start, end, free;
    std::int32_t version;
  };
  struct Sample {
    Stamp at;
    std::int64_t bytes;
  };
  std::size_t skipped_ = 0;
  std::vector<Entry> actions_;  // in list order from skipped_ on, as run
  std::vector<Sample> memory_;
  std::int64_t peak_memory_ = 0;
};

// One schedule device of a run: where it is in its list and what it recorded.
template <typename Stamp>
struct DeviceRun {
  DeviceRun(const Schedule& schedule, const LoweredProgram& lowered, std::int32_t d)
      : device(d),
        list(schedule.devices[static_cast<std::size_t>(d)]),
        program(lowered.devices[static_cast<std::size_t>(d)]) {
    log.reserve(list.size());
  }
  bool done() const { return next >= list.size(); }
  void start_at(std::size_t position) {
    next = position;
    log.skip(position);
  }
  // The action it runs (or would run) now; the last one once done.
  const Action& current() const { return list[std::min(next, list.size() - 1)]; }

  std::int32_t device;
  std::span<const Action> list;
  const DeviceProgram& program;
  std::size_t next = 0;
  DeviceLog<Stamp> log;
};

// One step of a device: runs (or queues) device `dev`'s next action when its inputs are there;
// false when they are not and `wait` is not set (a backend that waits for them when asked, the
// CPU's threads, returns true from inputs_ready and waits in take). Each backend keeps its own
// loop over its devices around it. `Backend` supplies, for its device type `Device` (a
// DeviceRun) and stage runtime `Runtime`:
//   bool inputs_ready(Device&, std::span<const Op> receives, bool wait)
//   Taken take(Device&, std::span<const Op> receives, Runtime&)  -- Taken::view, the data received
//   Stamp stamp(Runtime&)                                        -- now, on the stage's stream
//   Buffers& buffers(std::int32_t stage)  -- StageTokens with d_input(): B's and I's output
//   Loss* loss(std::int32_t microbatch)   -- asked for F only
//   void consumed(Device&, Taken&, const Action&, Stamp start)  -- the inputs are read (may do
//                                                                  nothing: the CPU copied them)
//   void finished(Device&, const Action&, Runtime&, Stamp end)  -- after the action, before sends
//   void send(Device&, const Op&, View data, Runtime&)
//   Stamp free_stamp(Stamp end)            -- when the device may begin its next action
//   Runtime& stage(std::int32_t); std::int64_t memory_bytes(std::int32_t device);
//   const TrainingConfig& config()
template <typename Backend, typename Device>
bool advance(Backend& be, Device& dev, bool wait) {
  const std::size_t at = dev.next;
  const Action& a = dev.list[at];
  const std::span<const Op> receives = dev.program.receives(at);
  if (!be.inputs_ready(dev, receives, wait)) return false;
  const TrainingConfig& config = be.config();
  fail_if_injected(config, a);
  auto& rt = be.stage(a.stage);
  auto taken = be.take(dev, receives, rt);
  auto& buffers = be.buffers(a.stage);
  const auto start = be.stamp(rt);
  // U has no micro-batch (-1): only F gets a loss to write.
  const auto loss = a.kind == ActionKind::F ? be.loss(a.microbatch) : nullptr;
  const std::int32_t version =
      run_action(rt, a, config.data, buffers, taken.view, buffers.d_input(), loss);
  const auto end = be.stamp(rt);
  be.consumed(dev, taken, a, start);
  dev.log.action(start, end, version);
  dev.log.memory(end, be.memory_bytes(dev.device), config.record_timeline);
  be.finished(dev, a, rt, end);
  for (const Op& op : dev.program.sends(at))
    be.send(dev, op, message_data(rt, op.message, buffers.d_input()), rt);
  dev.log.freed(be.free_stamp(end));
  ++dev.next;
  return true;
}

// The fields of a run's result that do not depend on the backend's clock: losses and what the
// stages observed; sized per device for collect().
template <typename T, typename Runtime>
ExecResult result_of(const Schedule& schedule, std::span<const T> losses,
                     const StageSet<Runtime>& stages) {
  ExecResult result;
  const auto devices = static_cast<std::size_t>(schedule.num_devices());
  result.times.resize(devices);  // one process per device: only this device's are filled
  result.device_peak_memory_bytes.assign(devices, 0);
  result.timeline.source = "measured";
  result.timeline.num_devices = schedule.num_devices();
  result.microbatch_losses.assign(losses.begin(), losses.end());
  for (std::int32_t k = 0; k < schedule.steps; ++k)
    result.step_losses.push_back(step_mean(losses, schedule.microbatches, k));
  const std::vector<StageObservation> observations = stages.observations();
  result.observed = observed_analysis(schedule, observations);
  for (const StageObservation& o : observations) {
    result.stage_aux_losses.emplace_back(o.aux_losses.begin(), o.aux_losses.end());
    result.stage_expert_tokens.emplace_back(o.expert_tokens.begin(), o.expert_tokens.end());
  }
  return result;
}

// The stages of one run on either backend: the checks a run makes before it starts, a runtime
// for each stage this process runs (seeded GPT-2 weights unless `init` sets them), and access to
// them afterwards.
template <typename Runtime, typename Config>
class Pipeline {
 public:
  // Whether this process runs stage s (always, unless the config has remote links).
  bool runs(std::int32_t s) const { return stages_.runs(s); }
  // The first stage this process runs.
  std::int32_t first_local_stage() const { return stages_.first_local(); }
  // A stage this process runs: its final weights and optimizer state after run().
  Runtime& stage(std::int32_t s) { return stages_[s]; }
  const Runtime& stage(std::int32_t s) const { return stages_[s]; }
  RunSummary summary(const ExecResult& result) const {
    return measured_summary(schedule_, result, config_);
  }
  // The weights of every stage this process runs (empty for the others), for evaluate(): the
  // current ones, or those of the i-th validation snapshot.
  std::vector<typename Runtime::View> weights_of(std::optional<std::size_t> snapshot) const {
    std::vector<typename Runtime::View> weights(stages_.size());
    for (std::int32_t s = 0; s < schedule_.stages; ++s)
      if (runs(s))
        weights[static_cast<std::size_t>(s)] =
            snapshot ? stage(s).snapshot(*snapshot) : stage(s).weights();
    return weights;
  }

 protected:
  // Throws InputError when the schedule cannot run (check_runnable), then `backend_checks()`
  // (the backend's own), then, with remote links, when it cannot run one process per device.
  // `runtime_config(plan)` is the backend's runtime configuration of a stage; `initialise` (when
  // false, the runtimes are left as constructed: a resumed run restores them) says whether each
  // gets config.init_stage or the seeded initialisation.
  template <typename Checks, typename RuntimeConfigOf>
  Pipeline(const Schedule& schedule, const Config& config, Checks&& backend_checks,
           RuntimeConfigOf&& runtime_config, bool initialise = true)
      : schedule_(schedule), config_(config) {
    check_runnable(schedule, config);
    backend_checks();
    const Analysis analysis = analyze(schedule);
    if (config.remote)  // links keep their order, or keep what arrives ahead of its turn
      check_launch(schedule, schedule.num_devices(), config.remote->in_order());
    stages_.allocate(schedule, plan_stages(schedule, analysis, config),
                     config.remote ? config.remote->local_device() : -1,
                     [&](const StagePlan& plan) {
                       auto rt = std::make_unique<Runtime>(runtime_config(plan));
                       if (!initialise) return rt;
                       if (config.init_stage) {
                         config.init_stage(plan.stage, *rt);
                       } else {
                         std::vector<float> weights(rt->layout().size());
                         model::init_gpt2(rt->layout(), weights, config.seed);
                         rt->set_params(weights);
                       }
                       return rt;
                     });
  }

  const Schedule& schedule_;
  Config config_;
  StageSet<Runtime> stages_;
};

// Mean loss of `count` micro-batches of `data` from index `first`, forward only, through every
// stage with the given weights (one per stage; empty where another process runs the stage).
// With stages on other processes, `hops` moves the activations: receive(s) returns stage s's
// input from the process running s - 1, send(s, x) gives stage s's output to the process running
// s + 1, and pass(s) hands it to the next stage of this process. The loss is known where the last
// stage runs; the other processes get 0. `model_stages` (when not 0) is how many of the stages
// make one model: the first copy's of a two-copy schedule (both copies hold the same weights).
template <typename Runtime, typename Hops>
double evaluate_stages(const StageSet<Runtime>& set,
                       const std::vector<typename Runtime::View>& weights, std::size_t rows,
                       const DataFn& data, std::uint64_t first, std::uint64_t count, Hops& hops,
                       std::size_t model_stages = 0) {
  using Input = typename Runtime::Input;
  if (weights.size() != set.size()) throw std::invalid_argument("evaluate: one weight per stage");
  const auto& all = set.all();
  const std::span stages(all.data(), model_stages > 0 ? model_stages : all.size());
  std::vector<std::int32_t> tokens(rows), targets(rows);
  using Slot = decltype(stages.front()->compute().make_slot());
  std::vector<std::optional<Slot>> slots(stages.size());
  for (std::size_t s = 0; s < stages.size(); ++s)
    if (stages[s]) slots[s].emplace(stages[s]->compute().make_slot());
  double sum = 0.0;
  for (std::uint64_t i = 0; i < count; ++i) {
    data(first + i, tokens, targets);
    typename Runtime::View x;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      if (!stages[s]) continue;  // another process runs it
      const auto stage = static_cast<std::int32_t>(s);
      const auto mb = static_cast<std::int32_t>(i);
      if (s > 0 && !stages[s - 1]) x = hops.receive(stage, mb);
      auto& st = stages[s]->compute();
      const Input input = s == 0 ? Input::tokens(tokens) : Input::activations(x);
      if (st.is_last()) {
        sum += st.forward_loss(weights[s], input, targets, 1.0f, *slots[s]);
        continue;
      }
      x = st.forward(weights[s], input, *slots[s]);
      if (!stages[s + 1])
        hops.send(stage, mb, x);
      else
        hops.pass(*stages[s]);
    }
  }
  if (!stages.back()) return 0.0;
  return count ? sum / static_cast<double>(count) : 0.0;
}

}  // namespace paci::exec
