// Cut checkpoints: extra.cut and the blobs "stage.S" (runtime image), "message.I" (floats) and
// "losses" (floats, one per micro-batch of the cut's schedule).
#include "exec/train_cut.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "schedules/formats.hpp"
#include "schedules/index.hpp"
#include "schedules/validate.hpp"

namespace paci::exec {

namespace {

using nlohmann::json;

std::span<const std::byte> bytes_of(std::span<const float> floats) {
  return std::as_bytes(floats);
}

std::vector<float> floats_of(const model::StateBlob& blob, const std::string& source) {
  if (blob.bytes.size() % sizeof(float) != 0)
    throw InputError(fmt::format("{}: blob {} of {} bytes does not hold floats", source, blob.name,
                                 blob.bytes.size()));
  std::vector<float> out(blob.bytes.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), blob.bytes.data(), blob.bytes.size());
  return out;
}

const json& cut_json(const model::TrainingState& state) {
  const json& cut = state.metadata.extra.at("cut");
  const auto bad = [&](const std::string& what) {
    return InputError(fmt::format("{}: bad metadata: extra.cut.{}", state.source, what));
  };
  if (!cut.is_object()) throw bad("is not an object");
  for (const char* key : {"base_step", "steps", "val_every", "updates", "messages"})
    if (!cut.contains(key) || !cut[key].is_number_unsigned())
      throw bad(fmt::format("{} is missing or not a whole number", key));
  if (!cut.contains("positions") || !cut["positions"].is_array())
    throw bad("positions is missing or not a list");
  for (const json& p : cut["positions"])
    if (!p.is_number_unsigned()) throw bad(fmt::format("positions holds {}", p.dump()));
  if (!cut.contains("digest") || !cut["digest"].is_string())
    throw bad("digest is missing or not a string");
  if (cut["base_step"].get<std::uint64_t>() > state.metadata.step)
    throw bad("base_step lies after the checkpoint's step");
  return cut;
}

std::string hex(std::uint64_t digest) {
  return fmt::format("{:016x}", digest);
}

}  // namespace

void save_cut(const std::string& path, model::StateMetadata metadata, const CutContext& context,
              const exec::CutImage& image) {
  const exec::CutPlan& plan = image.plan;
  metadata.extra["cut"] = {
      {"base_step", context.base_step},      {"steps", context.steps},
      {"val_every", context.snapshot_every}, {"updates", plan.updates},
      {"positions", plan.positions},         {"messages", plan.messages.size()},
      {"digest", hex(plan.digest)}};
  std::string schedule_json;
  if (context.schedule) {
    schedule_json = write_schedule(*context.schedule, ScheduleFormat::json);
    metadata.extra["cut"]["schedule_file"] = context.schedule_file;
  }
  std::vector<model::StageStateView> sections;
  for (const model::StageState& s : image.stages) sections.push_back(s.view());
  std::vector<model::StateBlobView> blobs;
  if (context.schedule) blobs.push_back({"schedule", std::as_bytes(std::span(schedule_json))});
  for (std::size_t s = 0; s < image.runtime.size(); ++s)
    blobs.push_back({fmt::format("stage.{}", s), image.runtime[s]});
  for (std::size_t i = 0; i < plan.messages.size(); ++i)
    blobs.push_back({fmt::format("message.{}", i), bytes_of(image.messages[i])});
  blobs.push_back({"losses", bytes_of(image.losses)});
  model::save_state(path, metadata, sections, blobs);
}

bool holds_cut(const model::TrainingState& state) {
  return state.metadata.extra.is_object() && state.metadata.extra.contains("cut");
}

std::size_t cut_base_step(const model::TrainingState& state) {
  return cut_json(state)["base_step"].get<std::size_t>();
}

std::optional<Schedule> cut_schedule(const model::TrainingState& state) {
  if (!holds_cut(state)) return std::nullopt;
  cut_json(state);  // well-formed
  const auto& blobs = state.blobs;
  const auto it = std::find_if(blobs.begin(), blobs.end(),
                               [](const model::StateBlob& b) { return b.name == "schedule"; });
  if (it == blobs.end()) return std::nullopt;
  const std::string text(reinterpret_cast<const char*>(it->bytes.data()), it->bytes.size());
  const std::string source = state.source + " (the schedule it carries)";
  Schedule s = parse_schedule(text, ScheduleFormat::json, source);
  try {
    validate(s);
  } catch (const ScheduleError& e) {
    throw InputError(fmt::format("{}: invalid schedule: {}", source, e.what()));
  }
  return s;
}

std::string cut_schedule_file(const model::TrainingState& state) {
  const json& cut = cut_json(state);
  return cut.contains("schedule_file") && cut["schedule_file"].is_string()
             ? cut["schedule_file"].get<std::string>()
             : std::string();
}

std::shared_ptr<const exec::CutImage> load_cut(model::TrainingState&& state,
                                               const Schedule& schedule,
                                               const std::vector<model::StageRange>& ranges,
                                               std::int32_t snapshot_every) {
  const json& cut = cut_json(state);
  const std::uint64_t updates = cut["updates"].get<std::uint64_t>();
  const auto refuse = [&](const std::string& why) {
    return InputError(fmt::format(
        "{}: its cut (after update {} of a schedule starting at step {}) {}; resume with the "
        "flags of the run that saved it",
        state.source, updates, cut["base_step"].get<std::uint64_t>(), why));
  };
  // The stages' runtimes (their version records) are sized by the whole schedule.
  if (cut["steps"].get<std::uint64_t>() != static_cast<std::uint64_t>(schedule.steps))
    throw refuse(
        fmt::format("was taken in a schedule of {} optimizer steps, this run's has {} "
                    "(--steps, --stop-after)",
                    cut["steps"].get<std::uint64_t>(), schedule.steps));
  // The images hold the validation snapshots taken so far, numbered from the schedule's start.
  if (cut["val_every"].get<std::uint64_t>() != static_cast<std::uint64_t>(snapshot_every))
    throw refuse(fmt::format("was taken with --val-every {}, this run has {}",
                             cut["val_every"].get<std::uint64_t>(), snapshot_every));
  if (updates < 1 || updates >= static_cast<std::uint64_t>(schedule.steps))
    throw refuse(fmt::format("does not lie inside this run's {} steps", schedule.steps));
  auto image = std::make_shared<exec::CutImage>();
  image->plan = exec::plan_cut(schedule, static_cast<std::int32_t>(updates));
  if (cut["positions"].get<std::vector<std::int64_t>>() != image->plan.positions ||
      cut["digest"].get<std::string>() != hex(image->plan.digest) ||
      cut["messages"].get<std::uint64_t>() != image->plan.messages.size())
    throw refuse(fmt::format("was taken in another schedule than this {} (P={}, M={})",
                             schedule.kind, schedule.stages, schedule.microbatches));
  std::vector<model::StageRange> saved;
  for (const model::StageState& s : state.stages) saved.push_back(s.range);
  if (saved != ranges) {
    const auto layers = [](const std::vector<model::StageRange>& r) {
      std::vector<std::size_t> n;
      for (const auto& range : r) n.push_back(range.num_layers);
      return fmt::format("{}", fmt::join(n, ","));
    };
    throw refuse(fmt::format("has stages of {} layers, this run {} (--partition)", layers(saved),
                             layers(ranges)));
  }
  for (std::int32_t s = 0; s < schedule.stages; ++s)
    image->runtime.push_back(std::move(state.blob(fmt::format("stage.{}", s)).bytes));
  image->stages = std::move(state.stages);
  for (std::size_t i = 0; i < image->plan.messages.size(); ++i)
    image->messages.push_back(floats_of(state.blob(fmt::format("message.{}", i)), state.source));
  image->losses = floats_of(state.blob("losses"), state.source);
  return image;
}

}  // namespace paci::exec
