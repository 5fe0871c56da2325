// paci.state/1 files: 16 bytes of header, the JSON metadata, each stage section's weights and AdamW
// moments as raw little-endian floats, and a CRC-32 of everything before it (docs/checkpoints.md).
// Loading checks the CRC in a first streaming pass, so a corrupt file is never half-parsed.
#include "model/checkpoint_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "model/check.hpp"
#include "model/checkpoint_io.hpp"
#include "model/layout.hpp"

namespace paci::model {
namespace {

static_assert(std::endian::native == std::endian::little, "paci.state/1 is little-endian");

using nlohmann::json;

constexpr std::size_t kFixedHeaderBytes = 16;  // magic[8], version u32, metadata bytes u32
constexpr std::size_t kChecksumBytes = 4;
constexpr std::size_t kBuffersPerSection = 3;  // weights, AdamW m, AdamW v

using Interval = std::pair<std::size_t, std::size_t>;  // [begin, end) in the whole model's buffer

Interval model_interval(const ParamLayout& layout) {
  return {layout.model_offset(), layout.model_offset() + layout.size()};
}

// Two overlapping intervals' indices, or nullopt when all are disjoint.
std::optional<std::pair<std::size_t, std::size_t>> overlap(const std::vector<Interval>& spans) {
  for (std::size_t i = 0; i < spans.size(); ++i) {
    for (std::size_t j = i + 1; j < spans.size(); ++j) {
      if (spans[i].first < spans[j].second && spans[j].first < spans[i].second) {
        return std::pair{i, j};
      }
    }
  }
  return std::nullopt;
}

std::string blocks(StageRange range) {
  return fmt::format("blocks [{}, {})", range.first_layer, range.end_layer());
}

json metadata_json(const StateMetadata& m, json sections, json blobs) {
  const GptConfig& c = m.config;
  const LrSchedule& lr = m.lr_schedule;
  json j = {
      {"format", std::string(blobs.empty() ? kStateFormatTag : kStateFormatTag2)},
      {"config",
       {{"layers", c.layers},
        {"heads", c.heads},
        {"d_model", c.d_model},
        {"max_seq_len", c.max_seq_len},
        {"vocab", c.vocab}}},
      {"step", m.step},
      {"data",
       {{"next_microbatch", m.next_microbatch}, {"seed", m.data_seed}, {"order", m.data_order}}},
      {"rng", m.rng_state},
      {"lr_schedule",
       {{"max_lr", lr.max_lr},
        {"min_lr", lr.min_lr},
        {"warmup_steps", lr.warmup_steps},
        {"total_steps", lr.total_steps},
        {"decay", lr.decay == LrDecay::cosine ? "cosine" : "constant"}}},
      {"adamw",
       {{"beta1", m.adamw.beta1},
        {"beta2", m.adamw.beta2},
        {"eps", m.adamw.eps},
        {"weight_decay", m.adamw.weight_decay}}},
      {"stages", std::move(sections)},
      {"extra", m.extra},
  };
  if (!blobs.empty()) j["blobs"] = std::move(blobs);
  if (c.moe.enabled())  // absent: dense, as every state written before MoE
    j["config"]["moe"] = moe_json<json>(c.moe);
  return j;
}

// A whole number stored at key: JSON may hold 1e300, -1 or a string there, and get<size_t>()
// would cast (undefined for 1e300) or wrap; InputError naming the key instead.
std::uint64_t whole(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_number_unsigned())
    throw InputError(fmt::format("{} is {}, expected a whole number", key, v.dump()));
  return v.get<std::uint64_t>();
}

// a * b or a + b, or InputError when it overflows (a shape no file could hold).
std::size_t checked(std::size_t a, char op, std::size_t b) {
  return checked_size(a, op, b, "the shape's parameter count overflows");
}

// Throws nlohmann exceptions (type, missing key) and InputError; the caller adds the file name.
StateMetadata parse_metadata(const json& j, std::uint32_t version) {
  StateMetadata m;
  const std::string format = j.at("format").get<std::string>();
  const std::string_view tag = version == kStateVersion ? kStateFormatTag : kStateFormatTag2;
  if (format != tag) {
    throw InputError(fmt::format("format \"{}\", expected \"{}\"", format, tag));
  }
  const json& c = j.at("config");
  m.config = {.layers = whole(c, "layers"),
              .heads = whole(c, "heads"),
              .d_model = whole(c, "d_model"),
              .max_seq_len = whole(c, "max_seq_len"),
              .vocab = whole(c, "vocab")};
  if (c.contains("moe")) {
    const json& moe = c.at("moe");
    m.config.moe = {.experts = whole(moe, "experts"),
                    .top_k = whole(moe, "top_k"),
                    .hidden = whole(moe, "hidden"),
                    .shared_expert = moe.at("shared_expert").get<bool>(),
                    .capacity_factor = moe.at("capacity_factor").get<double>(),
                    .aux_loss_coef = moe.at("aux_loss_coef").get<double>()};
    if (!m.config.moe.enabled())
      throw InputError("config.moe has 0 experts (a dense model writes no moe entry)");
  }
  m.step = whole(j, "step");
  const json& data = j.at("data");
  m.next_microbatch = whole(data, "next_microbatch");
  m.data_seed = whole(data, "seed");
  m.data_order = data.at("order").get<std::string>();
  for (const json& x : j.at("rng")) {
    if (!x.is_number_unsigned())
      throw InputError(fmt::format("rng holds {}, expected whole numbers", x.dump()));
    m.rng_state.push_back(x.get<std::uint64_t>());
  }
  const json& lr = j.at("lr_schedule");
  m.lr_schedule.max_lr = lr.at("max_lr").get<double>();
  m.lr_schedule.min_lr = lr.at("min_lr").get<double>();
  m.lr_schedule.warmup_steps = whole(lr, "warmup_steps");
  m.lr_schedule.total_steps = whole(lr, "total_steps");
  const std::string decay = lr.at("decay").get<std::string>();
  if (decay != "cosine" && decay != "constant") {
    throw InputError(fmt::format("lr_schedule.decay \"{}\", expected cosine or constant", decay));
  }
  m.lr_schedule.decay = decay == "cosine" ? LrDecay::cosine : LrDecay::constant;
  const json& adamw = j.at("adamw");
  m.adamw = {.beta1 = adamw.at("beta1").get<double>(),
             .beta2 = adamw.at("beta2").get<double>(),
             .eps = adamw.at("eps").get<double>(),
             .weight_decay = adamw.at("weight_decay").get<double>()};
  m.extra = j.at("extra");
  return m;
}

// First pass: the CRC-32 of every byte but the last four must equal those four.
void verify_checksum(BinaryReader& reader) {
  const std::size_t covered = reader.size_bytes() - kChecksumBytes;
  std::vector<unsigned char> chunk(std::size_t{1} << 20);
  std::uint32_t crc = 0;
  reader.seek(0);
  for (std::size_t done = 0; done < covered;) {
    const std::size_t n = std::min(chunk.size(), covered - done);
    reader.read(chunk.data(), n, "the checksummed bytes");
    crc = crc32_update(crc, chunk.data(), n);
    done += n;
  }
  std::uint32_t stored = 0;
  reader.read(&stored, sizeof stored, "the checksum");
  if (crc != stored) {
    throw InputError(
        fmt::format("{}: checksum mismatch: file is corrupt or truncated", reader.path()));
  }
}

}  // namespace

std::size_t section_floats(const GptConfig& c, std::size_t first_layer, std::size_t num_layers) {
  if (num_layers > c.layers || first_layer > c.layers - num_layers)
    throw InputError(fmt::format("blocks [{}, {} + {}) leave a model of {} layers", first_layer,
                                 first_layer, num_layers, c.layers));
  const std::size_t C = c.d_model;
  std::size_t block = checked(checked(checked(12, '*', C), '*', C), '+', checked(13, '*', C));
  if (c.moe.enabled()) {  // layout.cpp's block_floats, each product checked
    const std::size_t expert = checked(checked(3, '*', c.moe.hidden), '*', C);
    const std::size_t experts = checked(c.moe.experts, '+', c.moe.shared_expert ? 1 : 0);
    block = checked(checked(checked(4, '*', C), '*', C), '+', checked(8, '*', C));
    block = checked(block, '+', checked(c.moe.experts, '*', C));
    block = checked(block, '+', checked(experts, '*', expert));
  }
  std::size_t n = checked(num_layers, '*', block);
  if (first_layer == 0) n = checked(n, '+', checked(checked(c.vocab, '+', c.max_seq_len), '*', C));
  if (first_layer + num_layers == c.layers)
    n = checked(n, '+', checked(checked(c.vocab, '+', 2), '*', C));
  return n;
}

void save_state(const std::string& path, const StateMetadata& metadata,
                std::span<const StageStateView> stages, std::span<const StateBlobView> blobs) {
  metadata.config.validate();
  PACI_MODEL_CHECK(!stages.empty(), "a checkpoint needs at least one stage section");
  json sections = json::array();
  std::vector<Interval> spans;
  for (const StageStateView& s : stages) {
    const ParamLayout layout(metadata.config, s.range);
    PACI_MODEL_CHECK(s.weights.size() == layout.size() && s.first_moment.size() == layout.size() &&
                         s.second_moment.size() == layout.size(),
                     "{}: buffers of {}, {} and {} floats, the layout has {}", blocks(s.range),
                     s.weights.size(), s.first_moment.size(), s.second_moment.size(),
                     layout.size());
    spans.push_back(model_interval(layout));
    sections.push_back({{"first_layer", s.range.first_layer},
                        {"num_layers", s.range.num_layers},
                        {"floats", layout.size()},
                        {"optimizer_steps", s.optimizer_steps}});
  }
  const auto clash = overlap(spans);
  PACI_MODEL_CHECK(!clash, "stage sections {} and {} overlap", blocks(stages[clash->first].range),
                   blocks(stages[clash->second].range));
  json blob_list = json::array();
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    PACI_MODEL_CHECK(!blobs[i].name.empty(), "blob {} has no name", i);
    for (std::size_t k = 0; k < i; ++k)
      PACI_MODEL_CHECK(blobs[k].name != blobs[i].name, "two blobs are called {}", blobs[i].name);
    blob_list.push_back({{"name", blobs[i].name}, {"bytes", blobs[i].bytes.size()}});
  }
  const std::string text =
      metadata_json(metadata, std::move(sections), std::move(blob_list)).dump();
  PACI_MODEL_CHECK(text.size() <= std::numeric_limits<std::uint32_t>::max(),
                   "metadata of {} bytes exceeds 4 GiB", text.size());

  AtomicWriter writer(path);
  const std::uint32_t version = blobs.empty() ? kStateVersion : kStateVersionWithBlobs;
  const auto metadata_bytes = static_cast<std::uint32_t>(text.size());
  writer.write(kStateMagic.data(), kStateMagic.size());
  writer.write(&version, sizeof version);
  writer.write(&metadata_bytes, sizeof metadata_bytes);
  writer.write(text.data(), text.size());
  for (const StageStateView& s : stages) {
    for (std::span<const float> buffer : {s.weights, s.first_moment, s.second_moment}) {
      writer.write(buffer.data(), buffer.size_bytes());
    }
  }
  for (const StateBlobView& b : blobs) writer.write(b.bytes.data(), b.bytes.size());
  const std::uint32_t crc = writer.crc32();
  writer.write(&crc, sizeof crc);
  writer.commit();
}

TrainingState load_state(const std::string& path) {
  BinaryReader reader(path);
  if (reader.size_bytes() < kFixedHeaderBytes + kChecksumBytes) {
    throw InputError(fmt::format("{}: {} bytes, too short for a {} checkpoint (truncated?)", path,
                                 reader.size_bytes(), kStateFormatTag));
  }
  char magic[8];
  reader.read(magic, sizeof magic, "the magic");
  if (std::string_view(magic, sizeof magic) != kStateMagic) {
    std::string hex;
    for (char ch : magic) hex += fmt::format("{:02x}", static_cast<unsigned char>(ch));
    throw InputError(fmt::format("{}: not a {} checkpoint: magic 0x{}, expected \"{}\"", path,
                                 kStateFormatTag, hex, kStateMagic));
  }
  std::uint32_t version = 0, metadata_bytes = 0;
  reader.read(&version, sizeof version, "the version");
  if (version != kStateVersion && version != kStateVersionWithBlobs) {
    throw InputError(fmt::format("{}: version {}, expected {} ({}) or {} ({})", path, version,
                                 kStateVersion, kStateFormatTag, kStateVersionWithBlobs,
                                 kStateFormatTag2));
  }
  verify_checksum(reader);

  reader.seek(kFixedHeaderBytes - sizeof metadata_bytes);
  reader.read(&metadata_bytes, sizeof metadata_bytes, "the metadata length");
  if (metadata_bytes > reader.size_bytes() - kFixedHeaderBytes - kChecksumBytes) {
    throw InputError(
        fmt::format("{}: the header's metadata length {} runs past the end of the "
                    "file ({} bytes)",
                    path, metadata_bytes, reader.size_bytes()));
  }
  std::string text(metadata_bytes, '\0');
  reader.read(text.data(), text.size(), "the metadata");
  TrainingState state;
  state.source = path;
  std::vector<std::size_t> floats, blob_bytes;
  std::size_t body_bytes = 0;
  std::vector<Interval> spans;
  try {
    const json j = json::parse(text);
    state.metadata = parse_metadata(j, version);
    state.metadata.config.validate();
    const std::size_t body_have = reader.size_bytes() - reader.position() - kChecksumBytes;
    for (const json& s : j.at("stages")) {
      StageState stage;
      stage.range = {whole(s, "first_layer"), whole(s, "num_layers")};
      stage.optimizer_steps = whole(s, "optimizer_steps");
      // Sized from the shape first: a section the body cannot hold is refused before anything
      // is built for it.
      const std::size_t n =
          section_floats(state.metadata.config, stage.range.first_layer, stage.range.num_layers);
      if (whole(s, "floats") != n) {
        throw InputError(fmt::format("section {} holds {} floats, its layout has {}",
                                     blocks(stage.range), whole(s, "floats"), n));
      }
      body_bytes = checked(body_bytes, '+', checked(kBuffersPerSection * sizeof(float), '*', n));
      if (body_bytes > body_have) {
        throw InputError(
            fmt::format("body is {} bytes, the metadata's stage sections need at least {}",
                        body_have, body_bytes));
      }
      const ParamLayout layout(state.metadata.config, stage.range);
      floats.push_back(layout.size());
      spans.push_back(model_interval(layout));
      state.stages.push_back(std::move(stage));
    }
    if (version == kStateVersion && j.contains("blobs"))
      throw InputError(fmt::format("blobs in a {} file", kStateFormatTag));
    if (version == kStateVersionWithBlobs)
      for (const json& b : j.at("blobs")) {
        StateBlob blob;
        blob.name = b.at("name").get<std::string>();
        if (blob.name.empty()) throw InputError("a blob without a name");
        for (const StateBlob& other : state.blobs)
          if (other.name == blob.name)
            throw InputError(fmt::format("two blobs are called {}", blob.name));
        const std::uint64_t bytes = whole(b, "bytes");
        if (bytes > body_have - body_bytes)
          throw InputError(
              fmt::format("body is {} bytes, the metadata's sections and blobs need at least {}",
                          body_have, checked(body_bytes, '+', bytes)));
        body_bytes += bytes;
        blob_bytes.push_back(bytes);
        state.blobs.push_back(std::move(blob));
      }
  } catch (const std::exception& e) {  // nlohmann's, InputError, ModelError from a bad range
    throw InputError(fmt::format("{}: bad metadata: {}", path, e.what()));
  }
  if (state.stages.empty()) throw InputError(fmt::format("{}: no stage sections", path));
  if (const auto clash = overlap(spans)) {
    throw InputError(fmt::format("{}: stage sections {} and {} overlap", path,
                                 blocks(state.stages[clash->first].range),
                                 blocks(state.stages[clash->second].range)));
  }
  const std::size_t have = reader.size_bytes() - reader.position() - kChecksumBytes;
  if (have != body_bytes) {
    throw InputError(fmt::format("{}: body is {} bytes, the metadata's {} need {}", path, have,
                                 state.blobs.empty() ? "stage sections" : "sections and blobs",
                                 body_bytes));
  }
  for (std::size_t i = 0; i < state.stages.size(); ++i) {
    StageState& stage = state.stages[i];
    for (std::vector<float>* buffer : {&stage.weights, &stage.first_moment, &stage.second_moment}) {
      buffer->resize(floats[i]);
      reader.read(buffer->data(), floats[i] * sizeof(float), "a stage buffer");
    }
  }
  for (std::size_t i = 0; i < state.blobs.size(); ++i) {
    state.blobs[i].bytes.resize(blob_bytes[i]);
    reader.read(state.blobs[i].bytes.data(), blob_bytes[i], "a blob");
  }
  return state;
}

const StateBlob& TrainingState::blob(std::string_view name) const {
  for (const StateBlob& b : blobs)
    if (b.name == name) return b;
  throw InputError(fmt::format("{}: no blob called {}", source, name));
}

TrainingState load_state(const std::string& path, const GptConfig& expected) {
  TrainingState state = load_state(path);
  if (state.metadata.config != expected) {
    throw InputError(fmt::format("{}: the checkpoint's model ({}) does not match this run's ({})",
                                 path, describe_shape(state.metadata.config),
                                 describe_shape(expected)));
  }
  return state;
}

StageState stage_state(const TrainingState& state, StageRange range) {
  const GptConfig& config = state.metadata.config;
  const ParamLayout target(config, range);
  const Interval want = model_interval(target);
  // First the coverage and the step count, then the buffers: a range the sections do not cover
  // (a whole model far larger than the file) is refused before anything is allocated for it.
  std::size_t covered = 0;
  std::optional<std::size_t> steps;
  std::string have;
  std::vector<std::pair<const StageState*, Interval>> parts;
  for (const StageState& section : state.stages) {
    const Interval span = model_interval(ParamLayout(config, section.range));
    have += fmt::format("{}{}", have.empty() ? "" : ", ", blocks(section.range));
    const std::size_t begin = std::max(want.first, span.first);
    const std::size_t end = std::min(want.second, span.second);
    if (begin >= end) continue;
    if (steps && *steps != section.optimizer_steps) {
      throw InputError(
          fmt::format("{}: stage sections disagree on the optimizer step count ({} and {})",
                      state.source, *steps, section.optimizer_steps));
    }
    steps = section.optimizer_steps;
    parts.push_back({&section, span});
    covered += end - begin;
  }
  if (covered != target.size()) {
    throw InputError(fmt::format("{}: the checkpoint's stage sections ({}) do not cover {}",
                                 state.source, have, blocks(range)));
  }
  StageState out{range, steps.value_or(0), std::vector<float>(target.size()),
                 std::vector<float>(target.size()), std::vector<float>(target.size())};
  for (const auto& part : parts) {
    const StageState* section = part.first;
    const Interval span =
        part.second;  // (a lambda cannot capture a structured binding in clang 14)
    const std::size_t begin = std::max(want.first, span.first);
    const std::size_t end = std::min(want.second, span.second);
    const auto copy = [&](const std::vector<float>& from, std::vector<float>& to) {
      std::copy(from.begin() + static_cast<std::ptrdiff_t>(begin - span.first),
                from.begin() + static_cast<std::ptrdiff_t>(end - span.first),
                to.begin() + static_cast<std::ptrdiff_t>(begin - want.first));
    };
    copy(section->weights, out.weights);
    copy(section->first_moment, out.first_moment);
    copy(section->second_moment, out.second_moment);
  }
  return out;
}

}  // namespace paci::model
