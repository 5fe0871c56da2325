// llm.c model files: header checks, and one list of runs (llm.c's file order -> offsets in a stage
// buffer) that both import and export walk, so the two directions cannot disagree on the order.
#include "model/checkpoint_llmc.hpp"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <vector>

#include "model/check.hpp"
#include "model/checkpoint_io.hpp"

namespace paci::model {
namespace {

static_assert(std::endian::native == std::endian::little, "llm.c files are little-endian");

struct Header {
  GptConfig config;
  std::size_t padded_vocab = 0;  // Vp
};

// A run of `floats` consecutive floats of the file and, when the stage owns them, their offset in
// the stage buffer (nullopt: padding rows, or another stage's tensors).
struct Run {
  std::size_t floats = 0;
  std::optional<std::size_t> offset;
};

// llm.c's order: wte (Vp, C), wpe (maxT, C), then each per-layer tensor kind for all L layers in
// turn — ln1w (L, C), ln1b (L, C), qkvw (L, 3C, C), qkvb (L, 3C), attprojw (L, C, C),
// attprojb (L, C), ln2w (L, C), ln2b (L, C), fcw (L, 4C, C), fcb (L, 4C), fcprojw (L, C, 4C),
// fcprojb (L, C) — then lnfw (C), lnfb (C). Linear weights are (OC, C) in both layouts.
std::vector<Run> llmc_runs(const ParamLayout& layout, std::size_t padded_vocab) {
  const GptConfig& config = layout.config();
  PACI_MODEL_CHECK(!config.moe.enabled(),
                   "an llm.c GPT-2 file holds a dense model: a mixture of experts ({}) has no "
                   "llm.c layout (save a training state with --save instead)",
                   describe_shape(config));
  const StageRange range = layout.range();
  const std::size_t C = config.d_model;
  const bool first = range.is_first(), last = range.is_last(config);
  std::vector<Run> runs;
  runs.push_back({config.vocab * C, first ? std::optional(layout.wte()) : std::nullopt});
  runs.push_back({(padded_vocab - config.vocab) * C, std::nullopt});
  runs.push_back({config.max_seq_len * C, first ? std::optional(layout.wpe()) : std::nullopt});
  struct Kind {
    std::size_t BlockOffsets::*offset;
    std::size_t floats_per_layer;
  };
  const std::array<Kind, 12> kinds{{{&BlockOffsets::ln1_w, C},
                                    {&BlockOffsets::ln1_b, C},
                                    {&BlockOffsets::qkv_w, 3 * C * C},
                                    {&BlockOffsets::qkv_b, 3 * C},
                                    {&BlockOffsets::attproj_w, C * C},
                                    {&BlockOffsets::attproj_b, C},
                                    {&BlockOffsets::ln2_w, C},
                                    {&BlockOffsets::ln2_b, C},
                                    {&BlockOffsets::fc_w, 4 * C * C},
                                    {&BlockOffsets::fc_b, 4 * C},
                                    {&BlockOffsets::fcproj_w, 4 * C * C},
                                    {&BlockOffsets::fcproj_b, C}}};
  for (const Kind& kind : kinds) {
    for (std::size_t l = 0; l < config.layers; ++l) {
      const bool owned = l >= range.first_layer && l < range.end_layer();
      runs.push_back(
          {kind.floats_per_layer,
           owned ? std::optional(layout.block(l - range.first_layer).*kind.offset) : std::nullopt});
    }
  }
  runs.push_back({C, last ? std::optional(layout.ln_f_w()) : std::nullopt});
  runs.push_back({C, last ? std::optional(layout.ln_f_b()) : std::nullopt});
  return runs;
}

// Reads and checks the header; leaves the reader at the first parameter.
Header read_header(BinaryReader& reader) {
  const std::string& path = reader.path();
  if (reader.size_bytes() < kLlmcHeaderBytes) {
    throw InputError(
        fmt::format("{}: short header: {} bytes, an llm.c model file starts with {} "
                    "(256 int32)",
                    path, reader.size_bytes(), kLlmcHeaderBytes));
  }
  std::array<std::int32_t, kLlmcHeaderInts> h{};
  reader.read(h.data(), kLlmcHeaderBytes, "the header");
  if (h[0] != kLlmcModelMagic) {
    throw InputError(fmt::format("{}: bad magic {}, expected {} (an llm.c GPT-2 model file)", path,
                                 h[0], kLlmcModelMagic));
  }
  if (h[1] != kLlmcModelVersion) {
    throw InputError(fmt::format("{}: version {}, expected {} (fp32){}", path, h[1],
                                 kLlmcModelVersion,
                                 h[1] == 5 ? "; version 5 is llm.c's bf16 format" : ""));
  }
  const std::array<const char*, 6> names{"max_seq_len", "vocab_size", "num_layers",
                                         "num_heads",   "channels",   "padded_vocab_size"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (h[i + 2] <= 0) {
      throw InputError(fmt::format("{}: header field {} is {}, expected a positive number", path,
                                   names[i], h[i + 2]));
    }
  }
  Header header;
  const auto field = [&](std::size_t i) { return static_cast<std::size_t>(h[i]); };
  header.config = {.layers = field(4),
                   .heads = field(5),
                   .d_model = field(6),
                   .max_seq_len = field(2),
                   .vocab = field(3)};
  header.padded_vocab = field(7);
  const GptConfig& c = header.config;
  if (c.d_model % c.heads != 0) {
    throw InputError(
        fmt::format("{}: num_heads {} does not divide channels {}", path, c.heads, c.d_model));
  }
  if (header.padded_vocab < c.vocab) {
    throw InputError(fmt::format("{}: padded_vocab_size {} is smaller than vocab_size {}", path,
                                 header.padded_vocab, c.vocab));
  }
  // C·(Vp + maxT + L·(12C + 13) + 2) floats: embeddings, blocks, ln_f.
  const std::size_t C = c.d_model;
  const std::string too_large = fmt::format("{}: the header's shape is too large", path);
  const auto checked = [&](std::size_t a, char op, std::size_t b) {
    return checked_size(a, op, b, too_large);
  };
  const std::size_t block = checked(checked(12, '*', C), '+', 13);
  std::size_t rows = checked(header.padded_vocab, '+', c.max_seq_len);
  rows = checked(checked(rows, '+', checked(c.layers, '*', block)), '+', 2);
  const std::size_t body_bytes = checked(checked(rows, '*', C), '*', sizeof(float));
  if (reader.size_bytes() - kLlmcHeaderBytes != body_bytes) {
    throw InputError(
        fmt::format("{}: body is {} bytes, but the header's shape ({}, "
                    "padded_vocab_size {}) needs {}",
                    path, reader.size_bytes() - kLlmcHeaderBytes, describe_shape(c),
                    header.padded_vocab, body_bytes));
  }
  return header;
}

void check_request(const std::string& path, const GptConfig& file, const ShapeRequest& request) {
  std::string asked;
  bool mismatch = false;
  const auto compare = [&](const char* name, std::optional<std::size_t> want, std::size_t have) {
    if (!want) return;
    asked += fmt::format("{}{} {}", asked.empty() ? "" : ", ", name, *want);
    mismatch = mismatch || *want != have;
  };
  compare("layers", request.layers, file.layers);
  compare("heads", request.heads, file.heads);
  compare("d_model", request.d_model, file.d_model);
  compare("max_seq_len", request.max_seq_len, file.max_seq_len);
  compare("vocab", request.vocab, file.vocab);
  if (mismatch) {
    throw InputError(
        fmt::format("{}: the file's model ({}) does not match the requested shape ({})", path,
                    describe_shape(file), asked));
  }
}

}  // namespace

std::size_t llmc_padded_vocab(std::size_t vocab) {
  return (vocab + kLlmcVocabMultiple - 1) / kLlmcVocabMultiple * kLlmcVocabMultiple;
}

ShapeRequest ShapeRequest::exactly(const GptConfig& config) {
  return {config.layers, config.heads, config.d_model, config.max_seq_len, config.vocab};
}

GptConfig read_llmc_config(const std::string& path, const ShapeRequest& request) {
  BinaryReader reader(path);
  const GptConfig config = read_header(reader).config;
  check_request(path, config, request);
  return config;
}

void import_llmc(const std::string& path, const ParamLayout& layout, std::span<float> params) {
  PACI_MODEL_CHECK(params.size() == layout.size(), "buffer has {} floats, the layout {}",
                   params.size(), layout.size());
  BinaryReader reader(path);
  const Header header = read_header(reader);
  check_request(path, header.config, ShapeRequest::exactly(layout.config()));
  for (const Run& run : llmc_runs(layout, header.padded_vocab)) {
    const std::size_t bytes = run.floats * sizeof(float);
    if (run.offset) {
      reader.read(params.data() + *run.offset, bytes, "a parameter tensor");
    } else {
      reader.seek(reader.position() + bytes);
    }
  }
  if (layout.range().is_last(layout.config())) {  // lm_head := wte's first V rows
    const std::size_t floats = layout.config().vocab * layout.config().d_model;
    float* head = params.data() + layout.lm_head();
    if (layout.range().is_first()) {
      std::memcpy(head, params.data() + layout.wte(), floats * sizeof(float));
    } else {
      reader.seek(kLlmcHeaderBytes);
      reader.read(head, floats * sizeof(float), "wte (for lm_head)");
    }
  }
}

std::vector<float> import_llmc(const std::string& path, const ParamLayout& layout) {
  std::vector<float> params(layout.size());
  import_llmc(path, layout, params);
  return params;
}

std::string export_llmc(const std::string& path, const ParamLayout& layout,
                        std::span<const float> params) {
  const GptConfig& config = layout.config();
  PACI_MODEL_CHECK(layout.range() == whole_model(config),
                   "export_llmc needs the whole model's layout, got blocks [{}, {})",
                   layout.range().first_layer, layout.range().end_layer());
  PACI_MODEL_CHECK(params.size() == layout.size(), "buffer has {} floats, the layout {}",
                   params.size(), layout.size());
  const std::size_t padded_vocab = llmc_padded_vocab(config.vocab);
  constexpr std::size_t kMax = std::numeric_limits<std::int32_t>::max();
  PACI_MODEL_CHECK(padded_vocab <= kMax && config.max_seq_len <= kMax && config.layers <= kMax &&
                       config.d_model <= kMax,
                   "shape ({}) does not fit llm.c's int32 header", describe_shape(config));

  std::array<std::int32_t, kLlmcHeaderInts> header{};
  const auto put = [&](std::size_t i, std::size_t value) {
    header[i] = static_cast<std::int32_t>(value);
  };
  put(0, static_cast<std::size_t>(kLlmcModelMagic));
  put(1, static_cast<std::size_t>(kLlmcModelVersion));
  put(2, config.max_seq_len);
  put(3, config.vocab);
  put(4, config.layers);
  put(5, config.heads);
  put(6, config.d_model);
  put(7, padded_vocab);

  AtomicWriter writer(path);
  writer.write(header.data(), kLlmcHeaderBytes);
  for (const Run& run : llmc_runs(layout, padded_vocab)) {
    const std::size_t bytes = run.floats * sizeof(float);
    if (run.offset) {
      writer.write(params.data() + *run.offset, bytes);
    } else {
      writer.write_zeros(bytes);
    }
  }
  writer.commit();

  const std::size_t table_bytes = config.vocab * config.d_model * sizeof(float);
  if (std::memcmp(params.data() + layout.lm_head(), params.data() + layout.wte(), table_bytes) ==
      0) {
    return "";
  }
  return fmt::format(
      "{}: the untied lm_head was dropped: llm.c ties the LM head to wte, so the "
      "file holds wte only (importing it gives lm_head = wte)",
      path);
}

}  // namespace paci::model
