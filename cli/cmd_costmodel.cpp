// paci costmodel — writes the analytic cost model of a GPT split into stages (sim/cost_model.hpp,
// docs/costmodel.md) as a paci.costmodel/1 file for paci simulate: a preset and/or shape flags,
// a device's speed and the link between stages. Only the JSON goes to stdout.
#include <fmt/format.h>
#include <algorithm>
#include <charconv>
#include <optional>

#include "cli/common.hpp"
#include "cli/load.hpp"
#include "sim/cost_model.hpp"

namespace paci::cli {

int run_costmodel(const std::vector<std::string>& args) {
  std::string preset, dtype, partition, output = "-";
  std::int32_t stages = 0;
  DeviceSpeed device;
  po::options_description shape_options("model (explicit flags override the preset)");
  auto add_shape = shape_options.add_options();
  add_shape("preset", po::value(&preset),
            "tiny | gpt2-small | gpt2-medium | gpt2-large | gpt2-xl (docs/costmodel.md)");
  add_shape("layers", po::value<std::int32_t>(), "transformer blocks L");
  add_shape("d-model", po::value<std::int32_t>(), "model width d");
  add_shape("heads", po::value<std::int32_t>(), "attention heads (must divide d)");
  add_shape("seq-len", po::value<std::int32_t>(), "sequence length T");
  add_shape("vocab", po::value<std::int32_t>(), "vocabulary V");
  add_shape("batch", po::value<std::int32_t>(), "sequences per micro-batch b (default 1)");
  add_shape("dtype", po::value(&dtype), "fp32 | bf16 | fp16 (default bf16)");
  po::options_description options("pipeline, device and output");
  auto add = options.add_options();
  add("stages,p", po::value(&stages)->required(), "pipeline stages P");
  add("partition", po::value(&partition),
      "layers per stage, e.g. 3,3,2,2 (default: balanced by forward time)");
  add("flops", po::value(&device.flops_per_s)->default_value(100e12, "1e14"),
      "sustained FLOP/s of one device");
  add("mem-bandwidth", po::value(&device.memory_bytes_per_s)->default_value(2e12, "2e12"),
      "memory bandwidth of one device in bytes/s (bounds the optimizer step)");
  add("latency", po::value(&device.link.latency_s)->default_value(10e-6, "1e-05"),
      "link latency between neighbouring stages in seconds");
  add("bandwidth", po::value(&device.link.bandwidth_bytes_per_s)->default_value(50e9, "5e+10"),
      "link bandwidth in bytes/s (inf: free)");
  add("output,o", po::value(&output)->default_value("-"), "output file, - for standard output");
  po::options_description all;
  all.add(shape_options).add(options);
  po::variables_map vm;
  if (!parse_options("costmodel",
                     "(--preset NAME | --layers L --d-model D ...) --stages P [-o FILE]", all, {},
                     args, vm))
    return 0;

  GptShape shape;
  if (!preset.empty()) {
    shape = gpt_shape_preset(preset);
  } else {
    std::string missing;
    for (const char* flag : {"layers", "d-model", "heads", "seq-len", "vocab"})
      if (!vm.count(flag)) missing += fmt::format("{}--{}", missing.empty() ? "" : ", ", flag);
    if (!missing.empty())
      throw UsageError(fmt::format("give --preset, or the whole shape (missing {})", missing));
    shape.microbatch_size = 1;
    shape.dtype_bytes = 2;
  }
  const auto override_with = [&vm](const char* flag, std::int32_t& field) {
    if (vm.count(flag)) field = vm[flag].as<std::int32_t>();
  };
  override_with("layers", shape.layers);
  override_with("d-model", shape.d_model);
  override_with("heads", shape.heads);
  override_with("seq-len", shape.seq_len);
  override_with("vocab", shape.vocab);
  override_with("batch", shape.microbatch_size);
  if (!dtype.empty()) shape.dtype_bytes = dtype_bytes(dtype);

  const std::vector<std::int32_t> layers =
      partition.empty() ? std::vector<std::int32_t>{}
                        : parse_counts<std::int32_t>(partition, "partition", 1 << 20);
  write_output(output, write_cost_model(gpt_cost_model(shape, device, stages, layers)));
  return 0;
}

}  // namespace paci::cli
