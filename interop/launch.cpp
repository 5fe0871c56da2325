// launch_script, write_launch_files.
#include "interop/launch.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <filesystem>

#include "base/errors.hpp"
#include "interop/megatron.hpp"
#include "interop/pytorch.hpp"
#include "interop/torchtitan.hpp"
#include "interop/words.hpp"
#include "schedules/formats.hpp"

namespace paci::interop {

namespace {

// The lines every script starts with: how to run it, the node variables, the environment.
std::string preamble(const plan::PlanResult& p, Tool tool,
                     const std::vector<std::pair<std::string, std::string>>& env) {
  const plan::PlanConfig& c = p.config;
  const Launch l = launch_of(c);
  std::string s = fmt::format(
      "#!/usr/bin/env bash\n"
      "# paci plan: {} on {} GPUs ({} x {}), {} t={} p={} d={}{} b={} M={}: {:.3f} s a step "
      "predicted, {:.1f} GiB a GPU\n"
      "# Run it once on every node: NODE_RANK=<0..{}> MASTER_ADDR=<node 0's address> bash {}.sh\n"
      "# or under Slurm: srun --nodes {} --ntasks-per-node 1 bash {}.sh (the node rank and master "
      "come from Slurm)\n"
      "# PACI_DRY_RUN=1 prints the command, one word a line, and launches nothing.\n"
      "set -euo pipefail\n"
      "NNODES={}\nNPROC_PER_NODE={}\n"
      "NODE_RANK=${{NODE_RANK:-${{SLURM_NODEID:-0}}}}\n"
      "if [ -z \"${{MASTER_ADDR:-}}\" ] && [ -n \"${{SLURM_JOB_NODELIST:-}}\" ]; then\n"
      "  MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
      "fi\n"
      "MASTER_ADDR=${{MASTER_ADDR:-localhost}}\nMASTER_PORT=${{MASTER_PORT:-29500}}\n",
      c.model.name, c.gpus, l.nodes, l.processes_per_node, c.kind, c.tp, c.pp, c.dp(),
      c.kind == "interleaved" ? fmt::format(" v={}", c.chunks) : "", c.microbatch_size,
      c.microbatches(), p.step_s, static_cast<double>(p.peak_memory_bytes) / (1 << 30), l.nodes - 1,
      to_string(tool), l.nodes, to_string(tool), l.nodes, l.processes_per_node);
  for (const auto& [name, value] : env)
    s += fmt::format("export {}={}\n", name, shell_quote(value));
  return s;
}

// The script's end: the command as an array, printed or run.
std::string run_lines() {
  return "TORCHRUN=(\"${TORCHRUN:-torchrun}\" --nnodes \"$NNODES\" --nproc-per-node "
         "\"$NPROC_PER_NODE\" --node-rank \"$NODE_RANK\" --master-addr \"$MASTER_ADDR\" "
         "--master-port \"$MASTER_PORT\")\n"
         "if [ \"${PACI_DRY_RUN:-0}\" = 1 ]; then\n"
         "  printf '%s\\n' \"${COMMAND[@]}\"\n"
         "  exit 0\n"
         "fi\n"
         "exec \"${COMMAND[@]}\"\n";
}

std::string array(const char* name, const std::vector<std::string>& words) {
  std::string s = fmt::format("{}=(\n", name);
  for (std::size_t i = 0; i < words.size(); ++i) {
    // A flag and its values on one line.
    const bool flag = words[i].size() > 1 && words[i][0] == '-' && words[i][1] == '-';
    if (flag && i > 0) s += "\n";
    s += (flag || i == 0 ? "  " : " ") + shell_quote(words[i]);
  }
  return s + "\n)\n";
}

std::string megatron_script(const plan::PlanResult& p) {
  const plan::PlanConfig& c = p.config;
  std::string s = preamble(p, Tool::megatron, megatron_env(c));
  s += ": \"${MEGATRON_LM:?set MEGATRON_LM to your Megatron-LM checkout, the folder with "
       "pretrain_gpt.py (" +
       std::string(kMegatronTag) + " was checked)}\"\n";
  s += array("PLAN", megatron_args(p));
  s += fmt::format(
      "# Data: DATA_PATH (Megatron's indexed dataset prefix) and TOKENIZER_MODEL (a Hugging Face "
      "tokenizer), else Megatron's mock data with a null tokenizer of the model's vocabulary.\n"
      "if [ -n \"${{DATA_PATH:-}}\" ]; then\n"
      "  DATA=(--data-path \"$DATA_PATH\" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "
      "\"${{TOKENIZER_MODEL:?set TOKENIZER_MODEL with DATA_PATH}}\")\n"
      "else\n"
      "  DATA=(--mock-data --tokenizer-type NullTokenizer --vocab-size {})\n"
      "fi\n"
      "TRAIN=(--train-iters \"${{TRAIN_ITERS:-100}}\" --lr \"${{LR:-3e-4}}\" --min-lr "
      "\"${{MIN_LR:-3e-5}}\" "
      "--lr-decay-style cosine --lr-warmup-iters \"${{WARMUP_ITERS:-10}}\" --weight-decay 0.1 "
      "--clip-grad 1.0 --log-interval 1 --eval-iters 0)\n",
      c.model.vocab);
  s += run_lines();
  s.insert(s.rfind("if [ \"${PACI_DRY_RUN"),
           "COMMAND=(\"${TORCHRUN[@]}\" \"$MEGATRON_LM/pretrain_gpt.py\" \"${PLAN[@]}\" "
           "\"${DATA[@]}\" \"${TRAIN[@]}\" \"$@\")\n");
  return s;
}

std::string torchtitan_script(const plan::PlanResult& p, const std::string& dir) {
  std::string s = preamble(p, Tool::torchtitan, torchtitan_env(p.config));
  std::vector<std::string> args = torchtitan_args(p, dir + "/schedule.csv");
  const std::string checkpointing = args.back();  // a subcommand: after every option
  args.pop_back();
  s += "# torchrun of a Python environment with torchtitan " + std::string(kTorchtitanVersion) +
       " (TORCHRUN= to name another)\n";
  s += array("PLAN", args);
  s += "# Data: torchtitan's config default; --hf-assets-path names the tokenizer folder.\n";
  s += "TRAIN=(--training.steps \"${TRAIN_ITERS:-100}\")\n";
  s += run_lines();
  s.insert(
      s.rfind("if [ \"${PACI_DRY_RUN"),
      "COMMAND=(\"${TORCHRUN[@]}\" -m torchtitan.train \"${PLAN[@]}\" \"${TRAIN[@]}\" \"$@\" " +
          shell_quote(checkpointing) + ")\n");
  return s;
}

void write_script(const std::string& path, const std::string& text) {
  write_file_atomic(path, text);
  ::chmod(path.c_str(), 0755);
}

}  // namespace

Launch launch_of(const plan::PlanConfig& c) {
  const std::int64_t per_node = std::max<std::int64_t>(1, c.cluster.gpus_per_node);
  if (c.gpus <= per_node) return {1, c.gpus};
  return {(c.gpus + per_node - 1) / per_node, per_node};
}

std::string launch_script(Tool tool, const plan::PlanResult& plan, const std::string& dir) {
  if (const std::string why = refusal(tool, plan.config); !why.empty()) throw InputError(why);
  if (tool == Tool::megatron) return megatron_script(plan);
  if (tool == Tool::torchtitan) return torchtitan_script(plan, dir);
  throw InputError("PyTorch's pipelining has no launcher of its own: schedule.csv is its input");
}

std::vector<std::string> write_launch_files(const plan::PlanResult& plan, const std::string& dir) {
  const std::string absolute = std::filesystem::absolute(dir).lexically_normal().string();
  std::vector<std::string> notes;
  if (const std::string why = refusal(Tool::pytorch, plan.config); why.empty())
    write_file_atomic(absolute + "/schedule.csv", pytorch_csv(plan.config));
  else
    notes.push_back("schedule.csv not written: " + why);
  for (const Tool tool : {Tool::megatron, Tool::torchtitan}) {
    const std::string name = fmt::format("{}.sh", to_string(tool));
    if (const std::string why = refusal(tool, plan.config); why.empty())
      write_script(absolute + "/" + name, launch_script(tool, plan, absolute));
    else
      notes.push_back(name + " not written: " + why);
  }
  return notes;
}

}  // namespace paci::interop
