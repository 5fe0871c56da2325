// Resolution of paci train's flags: schedule, shape (flags, --init, --resume), data, optimizer.
#include "cli/train_setup.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <thread>
#include <utility>

namespace paci::cli {

void add_train_options(po::options_description& options, TrainFlags& f) {
  po::options_description schedule("schedule");
  auto add_schedule = schedule.add_options();
  add_schedule(
      "kind,k", po::value(&f.kind)->default_value(f.kind),
      "gpipe | 1f1b | pipedream | 2bw | paci | zb-h1 | zb-h2 | interleaved | zb-v | dualpipev | "
      "dualpipe (two copies of the model)");
  add_schedule("stages,p", po::value(&f.stages)->default_value(f.stages),
               "pipeline stages P (devices: one thread or process each)");
  add_schedule("microbatches,m", po::value(&f.microbatches)->default_value(f.microbatches),
               "micro-batches per optimizer step M");
  add_schedule("chunks,v", po::value(&f.chunks)->notifier(check_chunks_flag),
               "interleaved: model stages per device (default 2; stage k on device k mod P)");
  add_schedule("steps,n", po::value(&f.steps)->default_value(f.steps),
               "optimizer steps N of the whole training (the LR schedule's length)");
  add_schedule("stop-after", po::value(&f.stop_after),
               "stop after this many steps (with --save, to --resume later)");
  add_schedule("schedule", po::value(&f.schedule_path), "run this schedule file instead of --kind");
  add_schedule("partition", po::value(&f.partition),
               "blocks per stage, e.g. 3,3,2,2 (default: balanced)");
  add_schedule("sequential", po::bool_switch(&f.sequential),
               "replay all devices in one thread (CPU)");
  add_schedule("device", po::value(&f.device)->default_value(f.device),
               "cpu | cuda (every stage on the current GPU, a stream each; under mpirun, srun or "
               "PACI_RANK/PACI_WORLD_SIZE: one process per GPU over NCCL, see docs/cuda.md)");
  add_schedule("ep", po::value(&f.ep)->default_value(f.ep),
               "expert parallelism: each device's experts split over this many processes (under "
               "mpirun -np P*ep; every other tensor and the tokens whole in each, the experts' "
               "rows all-gathered)");
  add_schedule("precision", po::value(&f.precision)->default_value(f.precision),
               "fp32 | bf16 (bf16: --device cuda; fp32 master weights and AdamW)");
  po::options_description model("model (ignored with --init or --resume, which carry a shape)");
  auto add_model = model.add_options();
  add_model("layers", po::value(&f.layers)->default_value(f.layers), "transformer blocks L");
  add_model("heads", po::value(&f.heads)->default_value(f.heads), "attention heads");
  add_model("d-model", po::value(&f.d_model)->default_value(f.d_model), "channels C");
  add_model("seq-len", po::value(&f.seq_len)->default_value(f.seq_len), "tokens per sequence T");
  add_model("vocab", po::value(&f.vocab)->default_value(f.vocab), "vocabulary V (256: bytes)");
  add_model("batch", po::value(&f.batch)->default_value(f.batch), "sequences per micro-batch B");
  add_model("experts", po::value(&f.experts)->default_value(f.experts),
            "mixture of experts: E SwiGLU experts in every block's MLP (0: dense)");
  add_model("top-k", po::value(&f.top_k)->default_value(f.top_k), "experts per token K (1..E)");
  add_model("expert-hidden", po::value(&f.expert_hidden)->default_value(0, "auto"),
            "an expert's hidden width H (auto: the K experts, and the shared one, cost the dense "
            "MLP's FLOPs: 8C/(3K))");
  add_model("shared-expert", po::bool_switch(&f.shared_expert),
            "also one ungated expert of width H that every token passes through");
  add_model("capacity-factor", po::value(&f.capacity_factor)->default_value(f.capacity_factor),
            "each expert takes ceil(c*B*T*K/E) tokens of a micro-batch, the rest dropped "
            "(0: dropless)");
  add_model("aux-loss-coef", po::value(&f.aux_loss_coef)->default_value(f.aux_loss_coef),
            "load-balancing loss coefficient (Switch Transformer's alpha)");
  add_model("init", po::value(&f.init_path), "start from an llm.c GPT-2 fp32 model file");
  add_model("seed", po::value(&f.seed)->default_value(f.seed),
            "initialisation and data-order seed");
  add_model(
      "threads", po::value(&f.threads)->default_value(0, "auto"),
      "compute threads per stage (auto: cores / devices, or under mpirun cores / the processes "
      "on this machine; at least 1)");
  po::options_description optim("optimizer");
  auto add_optim = optim.add_options();
  add_optim("lr", po::value(&f.lr)->default_value(f.lr), "peak learning rate");
  add_optim("min-lr", po::value(&f.min_lr), "floor of the cosine decay (default lr/10)");
  add_optim("warmup-steps", po::value(&f.warmup_steps),
            "linear warm-up steps (default 1% of --steps)");
  add_optim("lr-decay", po::value(&f.lr_decay)->default_value(f.lr_decay), "cosine | constant");
  add_optim("weight-decay", po::value(&f.weight_decay)->default_value(f.weight_decay),
            "AdamW decay");
  add_optim("beta1", po::value(&f.beta1)->default_value(f.beta1), "AdamW beta1");
  add_optim("beta2", po::value(&f.beta2)->default_value(f.beta2), "AdamW beta2");
  add_optim("eps", po::value(&f.eps)->default_value(f.eps), "AdamW epsilon");
  add_optim("clip", po::value(&f.clip)->default_value(f.clip),
            "clip each stage's gradient norm to this (0: off)");
  po::options_description data("data");
  auto add_data = data.add_options();
  add_data("data", po::value(&f.data)->default_value(f.data), "training token shards (comma list)");
  add_data("val-data", po::value(&f.val_data)->default_value(f.val_data),
           "validation shards, or 'none'");
  add_data("data-order", po::value(&f.data_order)->default_value(f.data_order),
           "shuffled | sequential");
  add_data("val-every", po::value(&f.val_every)->default_value(0),
           "validation loss every K steps (0: at the end only)");
  add_data("val-microbatches", po::value(&f.val_microbatches)->default_value(f.val_microbatches),
           "micro-batches per validation pass");
  po::options_description out("output");
  auto add_out = out.add_options();
  add_out("metrics", po::value(&f.metrics_path), "JSONL: one line per step, plus val_loss lines");
  add_out("report", po::value(&f.report_path), "the shared report JSON (source: measured)");
  add_out("trace", po::value(&f.trace_path), "Chrome trace of the measured run");
  add_out("save", po::value(&f.save_path), "training-state checkpoint at the end");
  add_out("save-every", po::value(&f.save_every),
          "with --save: also write it after every K-th optimizer step (PipeDream: one per "
          "micro-batch), each replacing the last whole (PACI, PipeDream, 2BW: a cut of the "
          "running pipeline; CPU, one process)");
  add_out("resume", po::value(&f.resume_path), "continue from a training-state checkpoint");
  add_out("export-llmc", po::value(&f.export_path), "write the model as an llm.c fp32 file");
  add_out("quiet,q", po::bool_switch(&f.quiet), "no progress display, no summary");
  add_out("fail-at", po::value(&f.fail_at),
          "testing: fail when about to run this action (e.g. 1B3)");
  add_out("kill-at", po::value(&f.kill_at),
          "testing: end this process with SIGKILL when about to run this action (crash tests)");
  options.add(schedule).add(model).add(optim).add(data).add(out);
}

TrainSetup make_train_setup(TrainFlags flags, const po::variables_map& vm) {
  for (const auto& [name, value] : vm)
    if (!value.defaulted()) flags.given.insert(name);
  return exec::make_train_setup(flags);
}

#ifndef PACI_HAVE_CUDA
int run_train_gpu(TrainSetup&, const TrainFlags&, const exec::LaunchInfo&) {
  throw InputError(
      "--device cuda: this paci was built without the CUDA backend (PACI_CUDA=OFF, or no nvcc "
      "when it was configured; see docs/cuda.md)");
}
#endif

}  // namespace paci::cli
