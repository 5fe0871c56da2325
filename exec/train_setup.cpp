// make_train_setup: the schedule, shape, data, optimizer and executor configuration of a run.
#include "exec/train_setup.hpp"

#include <fmt/format.h>

#include <sys/sysinfo.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <thread>
#include <utility>

#include "exec/partition.hpp"
#include "exec/train_cut.hpp"
#include "model/check.hpp"
#include "model/checkpoint_io.hpp"
#include "model/checkpoint_llmc.hpp"
#include "model/checkpoint_state.hpp"
#include "model/layout.hpp"
#include "model/shards.hpp"
#include "schedules/generators.hpp"
#include "schedules/validate.hpp"

namespace paci::exec {

namespace {

model::ShapeRequest requested_shape(const TrainOptions& f) {
  model::ShapeRequest r;
  if (f.was_given("layers")) r.layers = f.layers;
  if (f.was_given("heads")) r.heads = f.heads;
  if (f.was_given("d-model")) r.d_model = f.d_model;
  if (f.was_given("vocab")) r.vocab = f.vocab;
  return r;
}

std::size_t given_moe_flags(const TrainOptions& f) {
  std::size_t n = 0;
  for (const char* flag :
       {"experts", "top-k", "expert-hidden", "shared-expert", "capacity-factor", "aux-loss-coef"})
    n += f.was_given(flag);
  return n;
}

// --ep: a divisor of the expert count, on a mixture of experts, without --clip (a stage's norm
// would need every part's gradients).
void check_expert_parallel(const TrainOptions& f, const model::GptConfig& config) {
  if (f.ep < 1) throw InputError(fmt::format("--ep must be at least 1, got {}", f.ep));
  if (f.ep == 1) return;
  if (!config.moe.enabled() && !f.resume_path.empty())
    throw UsageError(fmt::format(
        "--ep {} splits a mixture of experts' experts over processes: {} holds a dense model", f.ep,
        f.resume_path));
  if (!config.moe.enabled())
    throw UsageError(fmt::format(
        "--ep {} splits a mixture of experts' experts over processes: give --experts E too", f.ep));
  const std::size_t E = config.moe.experts;
  if (E % static_cast<std::size_t>(f.ep) != 0) {
    std::string divisors;
    for (std::size_t d = 1; d <= E; ++d)
      if (E % d == 0) divisors += fmt::format("{}{}", divisors.empty() ? "" : ", ", d);
    throw InputError(
        fmt::format("--ep {} does not divide the {} experts (--ep {} would)", f.ep, E, divisors));
  }
  if (f.clip > 0)
    throw UsageError(fmt::format(
        "--clip with --ep {}: a stage's gradient norm needs every expert part's gradients, which "
        "each process does not hold; train without --clip, or without --ep",
        f.ep));
}

bool moe_given(const TrainOptions& f) {
  return given_moe_flags(f) > 0;
}

// The MoE flags on a model of width d_model; --expert-hidden auto: 3·C·H per active expert
// against the dense MLP's 8·C², H = 8C / (3·active), rounded.
model::MoeConfig requested_moe(const TrainOptions& f, std::size_t d_model) {
  model::MoeConfig m{.experts = f.experts,
                     .top_k = f.top_k,
                     .hidden = f.expert_hidden,
                     .shared_expert = f.shared_expert,
                     .capacity_factor = f.capacity_factor,
                     .aux_loss_coef = f.aux_loss_coef};
  if (m.enabled() && m.hidden == 0 && m.top_k <= m.experts) {
    const std::size_t active = m.top_k + (m.shared_expert ? 1 : 0);
    m.hidden = std::max<std::size_t>(1, (8 * d_model + 3 * active / 2) / (3 * active));
  }
  return m;
}

// Refuses a model whose smallest stage cannot hold its weights, gradients and AdamW's two moments
// (16 bytes a parameter, before any activation) in this machine's memory and swap: whichever
// stages this process holds (all of them on threads, its own under a launcher), they are at least
// that. Without this, the allocation fails after the machine has swapped.
void check_memory(const model::GptConfig& c, std::span<const model::StageRange> ranges) {
  double smallest = std::numeric_limits<double>::infinity();
  for (const model::StageRange& r : ranges)
    smallest = std::min(smallest,
                        static_cast<double>(model::section_floats(c, r.first_layer, r.num_layers)));
  const double need = 16 * smallest;
  struct sysinfo info {};
  if (sysinfo(&info) != 0) return;
  const double have = (static_cast<double>(info.totalram) + static_cast<double>(info.totalswap)) *
                      static_cast<double>(info.mem_unit);
  if (have > 0 && need > have)
    throw InputError(fmt::format(
        "the model ({}) needs at least {:.1f} GiB on its smallest stage ({:.3g} parameters: "
        "weights, gradients and AdamW's two moments in fp32), more than this machine's {:.1f} "
        "GiB of memory and swap",
        model::describe_shape(c), need / (1 << 30), smallest, have / (1 << 30)));
}

struct Request {
  model::ShapeRequest shape;
  const TrainOptions* moe = nullptr;  // set when a mixture-of-experts flag was given
};

void check_shape(const model::GptConfig& c, const Request& request, const std::string& source) {
  const model::ShapeRequest& r = request.shape;
  auto differs = [](const std::optional<std::size_t>& want, std::size_t have) {
    return want && *want != have;
  };
  if (differs(r.layers, c.layers) || differs(r.heads, c.heads) || differs(r.d_model, c.d_model) ||
      differs(r.vocab, c.vocab) ||
      (request.moe && requested_moe(*request.moe, r.d_model.value_or(c.d_model)) != c.moe))
    throw InputError(
        fmt::format("{}: the checkpoint's shape is {}, the flags ask for another "
                    "(drop the shape flags to use the checkpoint's)",
                    source, model::describe_shape(c)));
}

}  // namespace

TrainSetup make_train_setup(const TrainOptions& f) {
  TrainSetup t;
  if (f.steps <= 0 || f.microbatches <= 0 || f.stages <= 0)
    throw InputError(
        fmt::format("--stages, --microbatches and --steps must be positive (got P={}, "
                    "M={}, N={})",
                    f.stages, f.microbatches, f.steps));
  constexpr std::size_t kMaxSize = std::size_t{1} << 31;  // a negative flag wraps past this
  for (const auto& [flag, value] :
       {std::pair{"--batch", f.batch}, std::pair{"--seq-len", f.seq_len},
        std::pair{"--layers", f.layers}, std::pair{"--heads", f.heads},
        std::pair{"--d-model", f.d_model}, std::pair{"--vocab", f.vocab},
        std::pair{"--val-microbatches", f.val_microbatches}})
    if (value == 0 || value > kMaxSize)
      throw InputError(fmt::format("{} must be a positive integer, got {}", flag,
                                   static_cast<std::int64_t>(value)));
  if (f.threads > 1024)
    throw InputError(fmt::format("--threads must be between 0 (auto) and 1024, got {}",
                                 static_cast<std::int64_t>(f.threads)));
  if (f.device != "cpu" && f.device != "cuda")
    throw UsageError(fmt::format("--device must be cpu or cuda, got '{}'", f.device));
  if (f.precision != "fp32" && f.precision != "bf16")
    throw UsageError(fmt::format("--precision must be fp32 or bf16, got '{}'", f.precision));
  if (f.device == "cpu" && f.precision != "fp32")
    throw UsageError("--precision bf16 needs --device cuda (the CPU backend computes in fp32)");
  if (f.device == "cuda" && (f.sequential || f.was_given("threads")))
    throw UsageError(
        "--sequential and --threads are for the CPU executor (the GPU pipeline issues every "
        "stage from one host thread)");
  std::optional<model::TrainingState> state;
  std::size_t resumed_step = 0;  // the checkpoint's step: where this run takes over
  model::GptConfig config;
  config.layers = f.layers;
  config.heads = f.heads;
  config.d_model = f.d_model;
  config.max_seq_len = f.seq_len;
  config.vocab = f.vocab;
  for (const auto& [flag, value] :
       {std::pair{"--experts", f.experts}, std::pair{"--top-k", f.top_k},
        std::pair{"--expert-hidden", f.expert_hidden}})
    if (value > kMaxSize)
      throw InputError(
          fmt::format("{} must be a whole number, got {}", flag, static_cast<std::int64_t>(value)));
  if (f.experts == 0 && given_moe_flags(f) > (f.was_given("experts") ? 1u : 0u))
    throw UsageError(
        "--top-k, --expert-hidden, --shared-expert, --capacity-factor and --aux-loss-coef shape a "
        "mixture of experts: give --experts E too");
  config.moe = requested_moe(f, f.d_model);
  const Request request{requested_shape(f), moe_given(f) ? &f : nullptr};
  if (!f.resume_path.empty()) {
    if (!f.init_path.empty()) throw UsageError("--init and --resume cannot be combined");
    state = model::load_state(f.resume_path);
    config = state->metadata.config;
    check_shape(config, request, f.resume_path);
    resumed_step = state->metadata.step;
    // A cut continues the schedule it was taken in, which starts at its base step.
    t.first_step = holds_cut(*state) ? cut_base_step(*state) : resumed_step;
    const auto& extra = state->metadata.extra;
    for (const auto& [key, value] :
         {std::pair{"batch", f.batch}, std::pair{"seq_len", f.seq_len}}) {
      if (!extra.contains(key)) continue;
      if (!extra[key].is_number_unsigned())
        throw InputError(fmt::format("{}: bad metadata: extra.{} is {}, expected a whole number",
                                     f.resume_path, key, extra[key].dump()));
      if (extra[key].get<std::size_t>() != value)
        throw InputError(
            fmt::format("{}: the run was saved with {} {}, the flags ask for {} (the "
                        "data position counts micro-batches of that shape)",
                        f.resume_path, key, extra[key].get<std::size_t>(), value));
    }
  } else if (!f.init_path.empty()) {
    if (config.moe.enabled())
      throw UsageError(
          "--init reads an llm.c GPT-2 file, a dense model: it cannot start a mixture of experts "
          "(--experts)");
    config = model::read_llmc_config(f.init_path, requested_shape(f));
  }
  if (f.seq_len > config.max_seq_len)
    throw InputError(fmt::format("--seq-len {} is longer than the model's {} positions", f.seq_len,
                                 config.max_seq_len));
  try {
    config.validate();
  } catch (const model::ModelError& e) {
    throw InputError(e.explanation());  // the user's shape flags, not a bug: no file and line
  }
  if (config.moe.enabled() && !f.export_path.empty())
    throw UsageError(
        "--export-llmc writes llm.c's dense GPT-2 file: a mixture of experts has no such layout "
        "(--save writes a training state that holds it)");
  if (config.moe.enabled() && f.device == "cuda")
    throw UsageError(
        "--experts: the CUDA backend's GPT is dense; a mixture of experts runs on --device cpu");
  check_expert_parallel(f, config);
  // A cut of a schedule file's run carries that schedule: --resume runs it again, with or without
  // --schedule (which must then name the same schedule).
  std::optional<Schedule> carried;
  if (state && holds_cut(*state)) carried = cut_schedule(*state);
  const bool from_file = !f.schedule_path.empty() || carried;
  // Checkpoints count optimizer steps; --steps and --stop-after count steps of M micro-batches.
  // PipeDream updates after every micro-batch: M optimizer steps per step. The others: one.
  const std::size_t updates_per_step =
      from_file ? 1
                : static_cast<std::size_t>(
                      generate_schedule(f.kind, f.stages, f.microbatches, 1, f.chunks).steps);
  const auto updates = [&](std::int32_t steps) {
    return static_cast<std::size_t>(steps) * updates_per_step;
  };
  const auto unit = updates_per_step == 1 ? std::string("steps") : "optimizer steps";
  if (from_file) {
    if (state && !carried)
      throw UsageError(fmt::format(
          "--resume with --schedule takes a checkpoint that --save-every wrote while running a "
          "schedule file; {} was saved by a --kind run: resume it with the same --kind flags",
          f.resume_path));
    if (f.stop_after > 0) throw UsageError("--stop-after works with --kind, not --schedule");
    if (!f.schedule_path.empty()) {
      t.schedule = load_valid_schedule(f.schedule_path);
      t.schedule_file = f.schedule_path;
      if (carried && !(*carried == t.schedule))
        throw InputError(fmt::format(
            "{}: its cut was taken in the schedule of {}, not in {} (a {} schedule, P={}, M={}); "
            "resume with that file, or with --resume alone (the checkpoint carries it)",
            f.resume_path, cut_schedule_file(*state), f.schedule_path, t.schedule.kind,
            t.schedule.stages, t.schedule.microbatches));
    } else {
      for (const char* flag : {"kind", "stages", "microbatches", "chunks"})
        if (f.was_given(flag))
          throw UsageError(fmt::format(
              "{} carries the schedule it was cut from ({}); --{} does not apply (drop it)",
              f.resume_path, cut_schedule_file(*state), flag));
      t.schedule = std::move(*carried);
      t.schedule_file = cut_schedule_file(*state);
    }
    if (resumed_step >= t.first_step + static_cast<std::size_t>(t.schedule.steps))
      throw InputError(fmt::format("{} already holds {} steps; its schedule has no more to run",
                                   f.resume_path, resumed_step));
  } else {
    if (resumed_step >= updates(f.steps))
      throw InputError(fmt::format("{} already holds {} {}; --steps {} leaves none to run",
                                   f.resume_path, resumed_step, unit, f.steps));
    if (f.stop_after < 0 || (f.stop_after > 0 && updates(f.stop_after) <= resumed_step))
      throw InputError(fmt::format("--stop-after {} must lie after step {} (where this run starts)",
                                   f.stop_after, resumed_step / updates_per_step));
    if (t.first_step % updates_per_step != 0)
      throw InputError(fmt::format(
          "{} continues a run from optimizer step {}, not a whole number of {}'s steps of {} "
          "micro-batches",
          f.resume_path, t.first_step, f.kind, f.microbatches));
    const std::int32_t end = f.stop_after > 0 ? std::min(f.stop_after, f.steps) : f.steps;
    const auto remaining = end - static_cast<std::int32_t>(t.first_step / updates_per_step);
    t.schedule = generate_schedule(f.kind, f.stages, f.microbatches, remaining, f.chunks);
  }
  t.last_step = t.first_step + static_cast<std::size_t>(t.schedule.steps);
  t.start_step = std::max(t.first_step, resumed_step);
  t.total_steps = std::max(t.last_step, updates(f.steps));

  ExecConfig& e = t.exec;
  e.config = config;
  e.batch = f.batch;
  e.seq_len = f.seq_len;
  // Two copies (DualPipe): the partition is one copy's, and the second copy holds the same.
  const auto P = static_cast<std::size_t>(t.schedule.stages_per_copy());
  e.ranges = f.partition.empty() ? balanced_partition(config, P, f.batch, f.seq_len)
                                 : explicit_partition(config, P, f.partition);
  if (t.schedule.copies > 1) {
    const std::vector<model::StageRange> one = e.ranges;
    e.ranges.insert(e.ranges.end(), one.begin(), one.end());
  }
  if (f.device == "cpu") check_memory(config, e.ranges);
  e.adamw = {f.beta1, f.beta2, f.eps, f.weight_decay};
  for (const auto& [flag, value] : {std::pair{"--lr", f.lr}, std::pair{"--min-lr", f.min_lr}})
    if (!std::isfinite(value) || (value < 0 && flag != std::string_view("--min-lr")))
      throw InputError(fmt::format("{} must be a finite number >= 0, got {}", flag, value));
  e.lr.max_lr = f.lr;
  e.lr.min_lr = f.min_lr >= 0 ? f.min_lr : f.lr / 10;
  e.lr.warmup_steps =
      f.warmup_steps >= 0
          ? static_cast<std::size_t>(f.warmup_steps)
          : static_cast<std::size_t>(std::ceil(0.01 * static_cast<double>(t.total_steps)));
  if (f.lr_decay != "cosine" && f.lr_decay != "constant")
    throw UsageError(fmt::format("--lr-decay must be cosine or constant, got '{}'", f.lr_decay));
  e.lr.decay = f.lr_decay == "cosine" ? model::LrDecay::cosine : model::LrDecay::constant;
  e.lr.total_steps = t.total_steps;
  try {  // refused here, before any stage is built (a run would end at its first NaN loss)
    e.lr.validate();
    e.adamw.validate();
  } catch (const model::ModelError& err) {
    throw InputError(err.explanation());
  }
  if (!std::isfinite(f.clip) || f.clip < 0)
    throw InputError("--clip must be finite and non-negative");
  e.clip = f.clip;
  e.seed = f.seed;
  e.first_step = t.first_step;
  // auto: the cores shared by the device threads of this process, or by the processes of a
  // launch on this machine (more OpenMP threads than cores spin against each other at every
  // collective: 2 threads in each of 4 processes on 2 cores ran 25x slower).
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t workers = f.processes_here > 0
                                  ? f.processes_here
                                  : static_cast<std::size_t>(t.schedule.num_devices()) *
                                        static_cast<std::size_t>(std::max(f.ep, 1));
  e.threads_per_device = f.threads > 0 ? f.threads : std::max<std::size_t>(1, cores / workers);
  e.sequential = f.sequential;
  e.record_timeline = !f.trace_path.empty();
  if (f.val_every < 0) throw InputError("--val-every must be non-negative");
  e.snapshot_every = f.val_every;
  if (f.val_every > 0) {  // every validation point keeps a copy of the weights until the end
    const double copies = static_cast<double>(t.schedule.steps) / f.val_every;
    const double bytes =
        copies *
        static_cast<double>(model::ParamLayout(config, model::whole_model(config)).bytes());
    if (bytes > 8.0 * (1 << 30))
      throw InputError(
          fmt::format("--val-every {} would keep {:.0f} copies of the weights ({:.1f} "
                      "GiB) until the run ends; validate less often",
                      f.val_every, copies, bytes / (1 << 30)));
  }
  if (!f.fail_at.empty() && !f.kill_at.empty())
    throw UsageError("--fail-at and --kill-at cannot be combined");
  if (!f.fail_at.empty()) e.fail_at = parse_action(f.fail_at);
  if (!f.kill_at.empty() && f.device != "cpu")
    throw UsageError("--kill-at is the CPU executor's (--device cpu)");
  if (!f.kill_at.empty()) {
    e.fail_at = parse_action(f.kill_at);
    e.fail_kills = true;
  }
  if (f.save_every < 0)
    throw InputError(fmt::format("--save-every must be positive (0: off), got {}", f.save_every));
  if (f.save_every > 0) {
    if (f.save_path.empty()) throw UsageError("--save-every needs --save FILE (where to write)");
    if (f.device != "cpu")
      throw UsageError("--save-every runs on the CPU executor; --device cuda saves at the end");
  }

  t.data_seed = state ? state->metadata.data_seed : f.seed;
  t.data_order = state ? model::parse_data_order(state->metadata.data_order)
                       : model::parse_data_order(f.data_order);
  auto read = [&](const std::string& list) {
    try {
      return model::read_shards(list, config.vocab);
    } catch (const InputError& e) {
      if (list != TrainOptions().data && list != TrainOptions().val_data) throw;
      throw InputError(
          fmt::format("{} (scripts/prepare_data.sh makes the default corpus)", e.what()));
    }
  };
  t.train = std::make_shared<model::TokenData>(read(f.data), t.data_order, t.data_seed, f.data);
  t.train->windows(f.batch, f.seq_len);  // throws when the data is too small
  // Naming your own training data without validation data means no validation: the default
  // corpus's validation file says nothing about another corpus (docs/data.md).
  const bool own_data_only = f.was_given("data") && !f.was_given("val-data");
  if (own_data_only)
    t.notes.push_back(fmt::format(
        "--data {} without --val-data: no validation loss (add --val-data FILE to get one)",
        f.data));
  if (!own_data_only && f.val_data != "none" && !f.val_data.empty()) {
    t.val = std::make_shared<model::TokenData>(read(f.val_data), model::DataOrder::sequential, 0,
                                               f.val_data);
    t.val->windows(f.batch, f.seq_len);
  }
  const std::uint64_t offset = state ? state->metadata.next_microbatch : 0;
  t.first_microbatch = offset;
  e.data = [train = t.train, offset, B = f.batch, T = f.seq_len](
               std::uint64_t i, std::span<std::int32_t> in, std::span<std::int32_t> out) {
    train->microbatch(offset + i, B, T, in, out);
  };
  t.init_path = f.init_path;
  if (state && holds_cut(*state)) {
    if (f.device != "cpu")
      throw UsageError(fmt::format(
          "{} is a cut of a running pipeline (paci train --save-every on {}); only the CPU "
          "executor resumes one",
          f.resume_path, t.schedule.kind));
    // The executor restores every stage from the cut (init_stage is not called).
    e.resume_from = load_cut(std::move(*state), t.schedule, e.ranges, e.snapshot_every);
  } else {
    // One copy of the loaded state, shared by the CPU initialiser and the GPU backend's.
    if (state) t.resume_state = std::make_shared<const model::TrainingState>(std::move(*state));
    e.init_stage = stage_initialiser<StageRuntime>(t);
  }
  return t;
}

}  // namespace paci::exec
