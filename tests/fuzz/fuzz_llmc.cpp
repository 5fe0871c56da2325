// Fuzz target: an llm.c GPT-2 model file (paci train --init), read as the trainer reads it: the
// header's shape, then the parameters of the whole model and of each stage of a two-stage split.
// The reader checks the body's size against the header before reading it, so nothing it
// allocates outgrows the file.
#include <cstddef>
#include <cstdint>

#include "model/checkpoint_llmc.hpp"
#include "model/layout.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace paci;
  static const fuzz::InputFile file;
  const std::string& path = file.write(fuzz::bytes(data, size));
  model::GptConfig config;
  if (!fuzz::accepts([&] { config = model::read_llmc_config(path); })) return 0;
  fuzz::require(fuzz::accepts([&] { config.validate(); }),
                "an accepted header's shape fails GptConfig::validate");
  std::vector<model::StageRange> ranges{model::whole_model(config)};
  if (config.layers >= 2) {
    const std::size_t half = config.layers / 2;
    ranges.push_back({0, half});
    ranges.push_back({half, config.layers - half});
  }
  for (const model::StageRange& range : ranges) {
    const model::ParamLayout layout(config, range);
    fuzz::require(fuzz::accepts([&] { model::import_llmc(path, layout); }),
                  "an accepted header's parameters cannot be imported");
  }
  return 0;
}
