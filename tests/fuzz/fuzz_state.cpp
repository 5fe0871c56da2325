// Fuzz target: a paci.state checkpoint (paci train --resume), read as load_state() reads it. The
// CRC-32 in the input's last four bytes is set to the checksum of the rest first, so the fuzzer
// gets past the checksum to the metadata and sections (a wrong checksum is refused whole, and the
// unit tests cover that). Every section of an accepted checkpoint must be recoverable through
// stage_state(); the whole model either is or is refused with InputError.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "model/checkpoint_io.hpp"
#include "model/checkpoint_state.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace paci;
  static const fuzz::InputFile file;
  std::string content(fuzz::bytes(data, size));
  if (content.size() >= sizeof(std::uint32_t)) {
    const std::size_t covered = content.size() - sizeof(std::uint32_t);
    const std::uint32_t crc = model::crc32_update(0, content.data(), covered);
    std::memcpy(content.data() + covered, &crc, sizeof crc);
  }
  const std::string& path = file.write(content);
  model::TrainingState state;
  if (!fuzz::accepts([&] { state = model::load_state(path); })) return 0;
  for (const model::StageState& section : state.stages) {
    model::StageState got;
    fuzz::require(fuzz::accepts([&] { got = model::stage_state(state, section.range); }),
                  "a section of an accepted checkpoint cannot be recovered");
    const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    };
    fuzz::require(same_bits(got.weights, section.weights) &&
                      same_bits(got.first_moment, section.first_moment) &&
                      same_bits(got.second_moment, section.second_moment) &&
                      got.optimizer_steps == section.optimizer_steps,
                  "stage_state changes a section's own buffers");
  }
  fuzz::accepts([&] { model::stage_state(state, model::whole_model(state.metadata.config)); });
  return 0;
}
