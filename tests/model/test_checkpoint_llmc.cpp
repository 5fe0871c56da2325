// Tests of model/checkpoint_llmc.hpp: a hand-built llm.c file imported tensor by tensor (proving
// the scatter order, not just a round trip), export/import round trips over shapes and stage
// slices, the head tie rule, and one clear InputError per kind of bad file.
#include "model/checkpoint_llmc.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>

#include "model/check.hpp"
#include "tests/model/checkpoint_test_util.hpp"

namespace paci::model {
namespace {

namespace fs = std::filesystem;
using namespace testing_util;

class LlmcCheckpoint : public CheckpointTest {};

// An llm.c file laid out as train_gpt2.c reads it: 256 int32 of header, then the 16 tensor kinds
// in llm.c's order. Float i of kind k holds 1000·k + i; wte's padding rows hold −1.
struct TinyFile {
  std::size_t L = 2, C = 4, NH = 2, maxT = 3, V = 5, Vp = 8;
  std::int32_t magic = 20240326, version = 3;

  std::array<std::size_t, 16> kind_floats() const {
    return {Vp * C, maxT * C, L * C,         L * C,     L * 3 * C * C, L * 3 * C, L * C * C, L * C,
            L * C,  L * C,    L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C,     C,         C};
  }
  std::string bytes() const {
    std::vector<std::int32_t> header(256, 0);
    const std::array<std::size_t, 6> shape{maxT, V, L, NH, C, Vp};
    header[0] = magic;
    header[1] = version;
    for (std::size_t i = 0; i < shape.size(); ++i)
      header[2 + i] = static_cast<std::int32_t>(shape[i]);
    std::vector<float> body;
    const auto sizes = kind_floats();
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      for (std::size_t i = 0; i < sizes[k]; ++i) {
        body.push_back(k == 0 && i >= V * C ? -1.0f : static_cast<float>(1000 * k + i));
      }
    }
    std::string out(reinterpret_cast<const char*>(header.data()), header.size() * 4);
    out.append(reinterpret_cast<const char*>(body.data()), body.size() * 4);
    return out;
  }
  GptConfig config() const {
    return {.layers = L, .heads = NH, .d_model = C, .max_seq_len = maxT, .vocab = V};
  }
};

TEST_F(LlmcCheckpoint, HandWrittenFileScattersEveryTensorToItsName) {
  const TinyFile tiny;
  write_bytes(path("tiny.bin"), tiny.bytes());
  EXPECT_EQ(read_llmc_config(path("tiny.bin")), tiny.config());
  const ParamLayout layout(tiny.config(), whole_model(tiny.config()));
  std::vector<float> params(layout.size(), std::nanf(""));
  import_llmc(path("tiny.bin"), layout, params);

  std::size_t checked = 0;
  // Expects tensor `name` to hold llm.c kind k's floats starting at float `first` of that kind.
  const auto expect = [&](const std::string& name, std::size_t k, std::size_t first) {
    const ParamTensor& t = layout.tensor(name);
    for (std::size_t j = 0; j < t.numel; ++j) {
      ASSERT_EQ(params[t.offset + j], static_cast<float>(1000 * k + first + j))
          << name << "[" << j << "]";
    }
    ++checked;
  };
  expect("wte", 0, 0);
  expect("wpe", 1, 0);
  const std::array<const char*, 12> block{
      "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
      "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
      "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  for (std::size_t l = 0; l < tiny.L; ++l) {
    for (std::size_t i = 0; i < block.size(); ++i) {
      const std::string name = fmt::format("h.{}.{}", l, block[i]);
      expect(name, 2 + i, l * layout.tensor(name).numel);
    }
  }
  expect("ln_f.weight", 14, 0);
  expect("ln_f.bias", 15, 0);
  expect("lm_head.weight", 0, 0);  // llm.c ties the head: it starts as wte's first V rows
  EXPECT_EQ(checked, layout.tensors().size());
  for (float p : params) ASSERT_FALSE(std::isnan(p));  // every float was written
}

// Each stage's import is exactly its slice of the whole model's, for every partition.
TEST_F(LlmcCheckpoint, StageImportIsTheSliceOfTheWholeModel) {
  TinyFile tiny;
  tiny.L = 3;
  write_bytes(path("tiny.bin"), tiny.bytes());
  const GptConfig config = tiny.config();
  const std::vector<float> whole =
      import_llmc(path("tiny.bin"), ParamLayout(config, whole_model(config)));
  for (const auto& partition : std::vector<std::vector<std::size_t>>{{1, 2}, {2, 1}, {1, 1, 1}}) {
    std::size_t first = 0;
    for (std::size_t n : partition) {
      const ParamLayout stage(config, {first, n});
      const std::vector<float> got = import_llmc(path("tiny.bin"), stage);
      const auto begin = whole.begin() + static_cast<std::ptrdiff_t>(stage.model_offset());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), begin)) << "blocks from " << first;
      first += n;
    }
  }
}

std::vector<float> random_params(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> out(n);
  for (float& x : out) x = normal(gen);
  return out;
}

TEST_F(LlmcCheckpoint, ExportThenImportIsBitwiseAndHeadFollowsTheTieRule) {
  for (const GptConfig& config :
       {GptConfig{.layers = 1, .heads = 1, .d_model = 4, .max_seq_len = 2, .vocab = 3},
        GptConfig{.layers = 3, .heads = 2, .d_model = 8, .max_seq_len = 5, .vocab = 128},
        GptConfig{.layers = 2, .heads = 4, .d_model = 8, .max_seq_len = 4, .vocab = 130}}) {
    SCOPED_TRACE(fmt::format("L={} V={}", config.layers, config.vocab));
    const ParamLayout layout(config, whole_model(config));
    std::vector<float> params = random_params(layout.size(), static_cast<unsigned>(config.vocab));
    const std::size_t table = config.vocab * config.d_model;
    std::copy_n(params.begin() + static_cast<std::ptrdiff_t>(layout.wte()), table,
                params.begin() + static_cast<std::ptrdiff_t>(layout.lm_head()));
    EXPECT_EQ(export_llmc(path("m.bin"), layout, params), "");  // tied: nothing lost

    const std::size_t C = config.d_model, Vp = llmc_padded_vocab(config.vocab);
    const std::string bytes = read_bytes(path("m.bin"));
    ASSERT_EQ(bytes.size(),
              1024 + 4 * C * (Vp + config.max_seq_len + config.layers * (12 * C + 13) + 2));
    std::array<std::int32_t, 8> header{};
    std::memcpy(header.data(), bytes.data(), sizeof header);
    EXPECT_EQ(header, (std::array<std::int32_t, 8>{20240326, 3, int(config.max_seq_len),
                                                   int(config.vocab), int(config.layers),
                                                   int(config.heads), int(C), int(Vp)}));
    EXPECT_EQ(bytes.substr(1024 + 4 * table, 4 * (Vp - config.vocab) * C),
              std::string(4 * (Vp - config.vocab) * C, '\0'));  // zero padding rows
    EXPECT_EQ(import_llmc(path("m.bin"), layout), params);

    // An untied head is dropped with a warning; importing gives back wte in its place.
    std::vector<float> untied = params;
    untied[layout.lm_head()] += 1.0f;
    const std::string warning = export_llmc(path("m.bin"), layout, untied);
    EXPECT_PRED_FORMAT2(testing::IsSubstring, "lm_head was dropped", warning);
    EXPECT_EQ(import_llmc(path("m.bin"), layout), params);
  }
}

TEST_F(LlmcCheckpoint, BadFilesAreOneClearInputError) {
  const TinyFile tiny;
  const std::string good = tiny.bytes();
  const std::string p = path("bad.bin");
  const auto config = [&] { read_llmc_config(p); };
  expect_input_error([&] { read_llmc_config(path("missing.bin")); },
                     {"cannot open", "missing.bin"});
  write_bytes(p, "");
  expect_input_error(config, {p, "short header: 0 bytes"});
  write_bytes(p, good.substr(0, 100));
  expect_input_error(config, {p, "short header: 100 bytes"});
  const auto with = [&](std::size_t field, std::int32_t value) {
    std::string bytes = good;
    std::memcpy(bytes.data() + 4 * field, &value, 4);
    write_bytes(p, bytes);
  };
  with(0, 20240520);  // a token shard's magic
  expect_input_error(config, {p, "bad magic 20240520, expected 20240326"});
  with(1, 5);
  expect_input_error(config, {p, "version 5, expected 3 (fp32)"});
  with(4, 0);
  expect_input_error(config, {p, "num_layers is 0"});
  with(5, 3);
  expect_input_error(config, {p, "num_heads 3 does not divide channels 4"});
  with(7, 4);
  expect_input_error(config, {p, "padded_vocab_size 4 is smaller than vocab_size 5"});
  write_bytes(p, good.substr(0, good.size() - 4));
  expect_input_error(config, {p, fmt::format("body is {} bytes", good.size() - 1028), "needs"});
  write_bytes(p, good + "xxxx");
  expect_input_error(config, {p, fmt::format("body is {} bytes", good.size() - 1020)});

  // A shape the caller asked for: only the requested fields are compared; both shapes are named.
  write_bytes(p, good);
  EXPECT_EQ(read_llmc_config(p, {.layers = 2, .d_model = 4}), tiny.config());
  expect_input_error([&] { read_llmc_config(p, {.layers = 3, .d_model = 4}); },
                     {p, "layers 2, heads 2, d_model 4", "requested shape (layers 3, d_model 4)"});
  GptConfig other = tiny.config();
  other.vocab = 256;
  expect_input_error([&] { import_llmc(p, ParamLayout(other, whole_model(other))); },
                     {p, "vocab 5", "vocab 256"});
}

TEST_F(LlmcCheckpoint, ExportFailsCleanlyAndNeedsTheWholeModel) {
  const GptConfig config{.layers = 2, .heads = 1, .d_model = 4, .max_seq_len = 2, .vocab = 3};
  const ParamLayout whole(config, whole_model(config));
  const std::vector<float> params(whole.size(), 0.5f);
  EXPECT_THROW(export_llmc(path("no/such/dir/m.bin"), whole, params), std::runtime_error);
  EXPECT_TRUE(fs::is_empty(dir_));
  const ParamLayout stage(config, {0, 1});
  EXPECT_THROW(export_llmc(path("m.bin"), stage, std::vector<float>(stage.size())), ModelError);
}

}  // namespace
}  // namespace paci::model
