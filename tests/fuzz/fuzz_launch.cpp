// Fuzz target: a user's launch, read as paci plan --from-megatron / --from-torchtitan reads it.
// The first byte picks the tool (odd: Megatron-LM, even: torchtitan), the rest is the launch's
// text (shell words: flags, a torchrun line, Megatron-LM's layout and --moe-layer-freq patterns).
// An accepted launch must give a configuration the plan's checks pass (read_* promises it) and,
// for a tool that can run it, words that tool's writer emits without anything but InputError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "interop/megatron.hpp"
#include "interop/read/launch.hpp"
#include "interop/torchtitan.hpp"
#include "plan/evaluate/evaluate.hpp"
#include "plan/hardware/cluster.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace paci;
  if (size == 0) return 0;
  static const plan::ClusterSpec h100 = plan::cluster_preset("h100-80gb");
  const bool megatron = data[0] % 2 == 1;
  const std::string_view text = fuzz::bytes(data + 1, size - 1);
  interop::LaunchContext context;
  context.cluster = h100;
  context.gpus = 256;
  interop::ReadLaunch read;
  if (!fuzz::accepts([&] {
        read = megatron ? interop::read_megatron(text, context)
                        : interop::read_torchtitan(text, context);
      }))
    return 0;
  fuzz::require(read.config.gpus > 0 && read.config.stages() >= 1,
                "an accepted launch has no GPUs or no stage");
  plan::PlanResult p;
  p.config = read.config;
  if (p.config.partition.empty())
    fuzz::accepts([&] { p.config.partition = plan::default_partition(p.config); });
  p.dp = p.config.dp();
  p.microbatches = p.config.microbatches();
  if (megatron && interop::megatron_refusal(p.config).empty())
    fuzz::accepts([&] { interop::megatron_args(p); });
  return 0;
}
