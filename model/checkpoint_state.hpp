// Our training-state checkpoint ("paci.state/1"): weights, AdamW moments and step counts of one or
// more pipeline stages plus the run's metadata (shape, step, data position, RNG, LR schedule), in
// one binary file with a CRC-32, written atomically. Resuming from it continues a run bitwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/check.hpp"  // InputError
#include "model/config.hpp"
#include "model/optimizer.hpp"

namespace paci::model {

// A mixture-of-experts shape as the state's metadata and the run report write it.
template <typename Json>
Json moe_json(const MoeConfig& m) {
  return {{"experts", m.experts},
          {"top_k", m.top_k},
          {"hidden", m.hidden},
          {"shared_expert", m.shared_expert},
          {"capacity_factor", m.capacity_factor},
          {"aux_loss_coef", m.aux_loss_coef}};
}

inline constexpr std::string_view kStateFormatTag = "paci.state/1";
// Version 2 ("paci.state/2") is version 1 plus named blobs after the sections (a cut of an
// asynchronous run, exec/cut.hpp); a file without blobs is written as version 1.
inline constexpr std::string_view kStateFormatTag2 = "paci.state/2";
inline constexpr std::string_view kStateMagic = "PACISTAT";  // the file's first 8 bytes
inline constexpr std::uint32_t kStateVersion = 1;
inline constexpr std::uint32_t kStateVersionWithBlobs = 2;

// Everything about the run except the float buffers. Saved as the file's JSON metadata.
struct StateMetadata {
  GptConfig config{};
  std::size_t step = 0;             // optimizer steps completed: the run resumes at this step
  std::size_t next_microbatch = 0;  // global index of the next micro-batch the data reads
  std::uint64_t data_seed = 0;
  std::string data_order = "shuffled";              // "shuffled" | "sequential"
  std::vector<std::uint64_t> rng_state{};           // any generator state the trainer keeps
  LrSchedule lr_schedule{};                         // the schedule the run was started with
  AdamWConfig adamw{};                              // the optimizer's hyperparameters
  nlohmann::json extra = nlohmann::json::object();  // anything else the trainer wants back
};

// One stage's buffers as the trainer holds them (no copies): each has ParamLayout(config,
// range).size() floats in that layout; the moments are AdamW::first_moment()/second_moment().
struct StageStateView {
  StageRange range;
  std::size_t optimizer_steps = 0;  // AdamW::steps()
  std::span<const float> weights, first_moment, second_moment;
};

struct StageState {
  StageRange range;
  std::size_t optimizer_steps = 0;
  std::vector<float> weights, first_moment, second_moment;

  StageStateView view() const {
    return {range, optimizer_steps, weights, first_moment, second_moment};
  }
};

// Bytes the format does not interpret, saved and loaded whole under a name (version 2).
struct StateBlobView {
  std::string name;
  std::span<const std::byte> bytes;
};
struct StateBlob {
  std::string name;
  std::vector<std::byte> bytes;
};

struct TrainingState {
  std::string source;  // the file it was loaded from, for error messages
  StateMetadata metadata;
  std::vector<StageState> stages;  // in file order
  std::vector<StateBlob> blobs;    // in file order (version 2)
  // The blob called `name`; InputError naming the file when there is none.
  const StateBlob& blob(std::string_view name) const;
  StateBlob& blob(std::string_view name) {
    return const_cast<StateBlob&>(std::as_const(*this).blob(name));
  }
};

// Writes one file holding every given stage section (the whole pipeline, or one stage for a
// file per stage), atomically: a crash leaves the previous file intact. Sections must be valid
// ranges of metadata.config with buffers of the layout's size and must not overlap (ModelError).
// Throws std::runtime_error if the file cannot be written.
// With blobs (distinct, non-empty names), the file is version 2.
void save_state(const std::string& path, const StateMetadata& metadata,
                std::span<const StageStateView> stages, std::span<const StateBlobView> blobs = {});

// Reads and verifies a checkpoint: magic, version, CRC-32 ("checksum mismatch: file is corrupt or
// truncated"), metadata, and every section's size against its ParamLayout. InputError naming the
// file on any problem; with `expected`, also when the shapes differ (both named).
TrainingState load_state(const std::string& path);
TrainingState load_state(const std::string& path, const GptConfig& expected);

// The floats of the stage of blocks [first_layer, first_layer + num_layers), computed with
// overflow checks before a ParamLayout (which loops over the layers) is built: wte and wpe on the
// first stage, block_floats per block, ln_f and the head on the last. Throws InputError for a
// range outside the model or a count that overflows (a shape no file or memory could hold).
std::size_t section_floats(const GptConfig& c, std::size_t first_layer, std::size_t num_layers);

// The state of any stage range, assembled from the sections covering it. Stage buffers are slices
// of the whole model's and AdamW is elementwise, so a run may resume under another partition.
// InputError if the sections do not cover the range or disagree on the optimizer step count.
StageState stage_state(const TrainingState& state, StageRange range);

}  // namespace paci::model
