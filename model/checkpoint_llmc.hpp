// Import and export of llm.c's fp32 GPT-2 model file (train_gpt2.c; magic 20240326, version 3):
// a 256 × int32 header, then every tensor grouped by kind across layers (all ln1w, all ln1b, …).
// Import scatters that into our per-block ParamLayout, for the whole model or one stage's slice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/check.hpp"  // InputError
#include "model/config.hpp"
#include "model/layout.hpp"

namespace paci::model {

inline constexpr std::int32_t kLlmcModelMagic = 20240326;
inline constexpr std::int32_t kLlmcModelVersion = 3;  // fp32; llm.c's version 5 is bf16
inline constexpr std::size_t kLlmcHeaderInts = 256;
inline constexpr std::size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(std::int32_t);
inline constexpr std::size_t kLlmcVocabMultiple = 128;  // llm.c pads wte to Vp rows

// V rounded up to a multiple of 128, as llm.c pads its token embedding (50257 -> 50304).
std::size_t llmc_padded_vocab(std::size_t vocab);

// The fields of a shape the user asked for explicitly (e.g. --layers next to --init); an unset
// field accepts whatever the file holds.
struct ShapeRequest {
  std::optional<std::size_t> layers{}, heads{}, d_model{}, max_seq_len{}, vocab{};
  static ShapeRequest exactly(const GptConfig& config);
};

// Reads and checks the header and the body's length; returns the model's shape (V = vocab_size,
// the padded rows are ignored). Throws InputError naming the file: cannot open, short header,
// wrong magic ("expected 20240326"), wrong version ("version 5, expected 3 (fp32)"), a bad shape,
// a body whose size does not match the header's shape, or a shape other than `request`'s (both
// shapes named).
GptConfig read_llmc_config(const std::string& path, const ShapeRequest& request = {});

// Fills params (layout.size() floats, in layout's order) with the tensors that layout's stage owns.
// The file's shape must equal layout.config() (InputError naming both otherwise). The untied LM
// head (last stage) starts as a copy of wte's first V rows: llm.c ties the two.
void import_llmc(const std::string& path, const ParamLayout& layout, std::span<float> params);
std::vector<float> import_llmc(const std::string& path, const ParamLayout& layout);

// Writes the whole model (layout must be whole_model(config)) atomically in llm.c's layout, with
// Vp = llmc_padded_vocab(V) and zero padding rows. llm.c ties the head to wte, so lm_head is not
// written: returns "" when lm_head equals wte bitwise (nothing lost), else a one-line warning
// saying the untied head was dropped. Throws std::runtime_error if the file cannot be written.
std::string export_llmc(const std::string& path, const ParamLayout& layout,
                        std::span<const float> params);

}  // namespace paci::model
