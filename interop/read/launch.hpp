// A launch a user already has, read back into the configuration paci predicts: Megatron-LM's
// pretrain_gpt.py flags (paci plan --from-megatron) or torchtitan 0.3.0's command line (paci plan
// --from-torchtitan; it reads no TOML file). Every option is checked against the tool's own parser
// as recorded (read/options.hpp); what the tool itself refuses, what paci does not model and what
// cannot be read are InputError, one line naming it. What paci assumes is said in notes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/evaluate/evaluate.hpp"

namespace paci::interop {

// What the launch does not say and paci's own flags do.
struct LaunchContext {
  plan::ClusterSpec cluster;
  std::optional<std::int64_t> gpus;   // --gpus; else the launcher's (torchrun's nodes × processes)
  std::optional<std::int64_t> vocab;  // --vocab; Megatron-LM takes it from its tokenizer
};

struct ReadLaunch {
  plan::PlanConfig config;           // check_config() passed
  std::vector<std::string> notes;    // what paci assumed or approximates, one line each
  std::vector<std::string> program;  // the launcher's words before the tool's options
};

// The words of a launch: environment assignments (A=1), a launcher (torchrun or python -m
// torch.distributed.run, with its options; python [-m MODULE]), the program (a .py file or a
// module), then the tool's options. Without a launcher or program, every word is an option.
struct LaunchWords {
  std::vector<std::string> env, launcher, options;
  std::string program;
  std::optional<std::int64_t> nnodes, nproc_per_node;  // torchrun's, when given as numbers
};
LaunchWords split_launch(const std::vector<std::string>& words, std::string_view what);

// The GPUs: --gpus, else torchrun's nodes × processes per node; InputError when neither says.
std::int64_t launch_gpus(const LaunchContext& context, const LaunchWords& words,
                         std::string_view tool);

ReadLaunch read_megatron(std::string_view text, const LaunchContext& context);
ReadLaunch read_torchtitan(std::string_view text, const LaunchContext& context);

}  // namespace paci::interop
