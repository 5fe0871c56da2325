// Tests of plan/shapes/model.hpp: every preset's shape and parameter count against the published
// ones (configs, model cards, papers; the sources are in docs/costmodel.md), the activation bytes
// against Korthikanti et al. 2022, Table 2, written out independently of the implementation, the
// Llama form and FlashAttention on hand-worked examples, and one clear InputError per bad input.
#include "plan/shapes/model.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "schedules/ir.hpp"

namespace paci::plan {
namespace {

using ::testing::HasSubstr;

// The message of the InputError that fn throws; a test failure when it throws none.
std::string input_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected InputError, got none";
  return "";
}

TEST(PlanModel, ArchAndRecomputeWordsRoundTrip) {
  for (const Arch arch : {Arch::gpt, Arch::llama}) EXPECT_EQ(parse_arch(to_string(arch)), arch);
  for (const Recompute r : {Recompute::none, Recompute::selective, Recompute::full})
    EXPECT_EQ(parse_recompute(to_string(r)), r);
  EXPECT_EQ(to_string(Arch::llama), "llama");
  EXPECT_EQ(to_string(Recompute::selective), "selective");
  EXPECT_EQ(input_error([] { parse_arch("bert"); }),
            "unknown architecture 'bert' (expected gpt or llama)");
  EXPECT_EQ(input_error([] { parse_recompute("some"); }),
            "unknown recomputation 'some' (expected none, selective or full)");
}

// The published shapes. GPT-2: the released checkpoints (HF openai-community/gpt2* config.json).
// GPT-3: Brown et al. 2020, Table 2.1, n_ctx 2048, d_ff = 4·d_model (1.3b with 16 heads of 128
// and 13b with d_model 5120: the table's two rows that do not multiply out). Llama 2 and 3: the
// meta-llama/*-hf config.json files; Llama 3 at its 8192-token pre-training length.
struct Shape {
  const char* name;
  Arch arch;
  std::int64_t L, h, a, g, f, V, s;
  bool tied;
};
const std::vector<Shape> kPublished = {
    {"gpt2-small", Arch::gpt, 12, 768, 12, 12, 3072, 50257, 1024, true},
    {"gpt2-medium", Arch::gpt, 24, 1024, 16, 16, 4096, 50257, 1024, true},
    {"gpt2-large", Arch::gpt, 36, 1280, 20, 20, 5120, 50257, 1024, true},
    {"gpt2-xl", Arch::gpt, 48, 1600, 25, 25, 6400, 50257, 1024, true},
    {"gpt3-125m", Arch::gpt, 12, 768, 12, 12, 3072, 50257, 2048, true},
    {"gpt3-350m", Arch::gpt, 24, 1024, 16, 16, 4096, 50257, 2048, true},
    {"gpt3-760m", Arch::gpt, 24, 1536, 16, 16, 6144, 50257, 2048, true},
    {"gpt3-1.3b", Arch::gpt, 24, 2048, 16, 16, 8192, 50257, 2048, true},
    {"gpt3-2.7b", Arch::gpt, 32, 2560, 32, 32, 10240, 50257, 2048, true},
    {"gpt3-6.7b", Arch::gpt, 32, 4096, 32, 32, 16384, 50257, 2048, true},
    {"gpt3-13b", Arch::gpt, 40, 5120, 40, 40, 20480, 50257, 2048, true},
    {"gpt3-175b", Arch::gpt, 96, 12288, 96, 96, 49152, 50257, 2048, true},
    {"llama2-7b", Arch::llama, 32, 4096, 32, 32, 11008, 32000, 4096, false},
    {"llama2-13b", Arch::llama, 40, 5120, 40, 40, 13824, 32000, 4096, false},
    {"llama2-70b", Arch::llama, 80, 8192, 64, 8, 28672, 32000, 4096, false},
    {"llama3-8b", Arch::llama, 32, 4096, 32, 8, 14336, 128256, 8192, false},
    {"llama3-70b", Arch::llama, 80, 8192, 64, 8, 28672, 128256, 8192, false},
    {"llama3-405b", Arch::llama, 126, 16384, 128, 8, 53248, 128256, 8192, false},
    {"mixtral-8x7b", Arch::llama, 32, 4096, 32, 8, 14336, 32000, 4096, false},
    {"mixtral-8x22b", Arch::llama, 56, 6144, 48, 8, 16384, 32000, 4096, false},
    {"qwen3-30b-a3b", Arch::llama, 48, 2048, 32, 4, 768, 151936, 4096, false},
    {"qwen3-235b-a22b", Arch::llama, 94, 4096, 64, 4, 1536, 151936, 4096, false},
    {"deepseek-v3", Arch::llama, 61, 7168, 128, 128, 2048, 129280, 4096, false},
};

TEST(PlanModel, PresetsHaveThePublishedShapes) {
  ASSERT_EQ(model_presets().size(), kPublished.size());
  for (std::size_t i = 0; i < kPublished.size(); ++i) {
    const Shape& p = kPublished[i];
    SCOPED_TRACE(p.name);
    const ModelSpec& m = model_presets()[i];
    EXPECT_EQ(m.name, p.name);
    EXPECT_EQ(m.arch, p.arch);
    EXPECT_EQ(m.layers, p.L);
    EXPECT_EQ(m.d_model, p.h);
    EXPECT_EQ(m.heads, p.a);
    EXPECT_EQ(m.kv_heads, p.g);
    EXPECT_EQ(m.ffn, p.f);
    EXPECT_EQ(m.vocab, p.V);
    EXPECT_EQ(m.seq_len, p.s);
    EXPECT_EQ(m.tied_embeddings, p.tied);
    EXPECT_EQ(model_preset(p.name), m);
    EXPECT_NO_THROW(check_model(m));
  }
  EXPECT_EQ(model_preset("llama3-70b").head_dim(), 128);
  EXPECT_EQ(model_preset("llama3-70b").kv_dim(), 1024);
  for (const char* name : {"mixtral-8x7b", "mixtral-8x22b"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(model_preset(name).experts, 8);
    EXPECT_EQ(model_preset(name).top_k, 2);
    EXPECT_EQ(model_preset(name).shared_expert_ffn, 0);
  }
  for (const char* name : {"qwen3-30b-a3b", "qwen3-235b-a22b"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(model_preset(name).experts, 128);
    EXPECT_EQ(model_preset(name).top_k, 8);
    EXPECT_EQ(model_preset(name).head_dim(), 128);  // given, not h/a
  }
  EXPECT_EQ(model_preset("qwen3-30b-a3b").q_dim(), 4096);  // wider than h = 2048
  // DeepSeek-V3's config.json: 256 experts, 8 a token, one shared of 2048; the first 3 layers
  // dense of 18432; MLA (q_lora_rank 1536, kv_lora_rank 512, heads of 128 + 64 rotary columns);
  // one multi-token-prediction module.
  const ModelSpec ds = model_preset("deepseek-v3");
  EXPECT_EQ(std::tuple(ds.experts, ds.top_k, ds.shared_expert_ffn), std::tuple(256, 8, 2048));
  EXPECT_EQ(std::tuple(ds.dense_layers, ds.dense_ffn), std::tuple(3, 18432));
  EXPECT_EQ(std::tuple(ds.q_lora_rank, ds.kv_lora_rank, ds.head_dim(), ds.qk_head_dim()),
            std::tuple(1536, 512, 128, 192));
  EXPECT_EQ(ds.mtp_layers, 1);
  EXPECT_FALSE(model_preset("llama3-70b").moe());
}

// Mixture of experts: every expert counts, a token computes with k of them. Mixtral 8x7B:
// 46,702,792,704 parameters (the HF checkpoint's num_parameters), 12.9 B of them active (Jiang et
// al. 2024: "12.9B active parameters"); 8x22B: 141 B, 39 B active (Mistral's announcement).
TEST(PlanModel, ExpertsCountWholeAndActiveByTopK) {
  const ParamCounts small = parameter_counts(model_preset("mixtral-8x7b"));
  EXPECT_EQ(small.total, 46'702'792'704);
  const std::int64_t expert = 3LL * 4096 * 14336;
  EXPECT_EQ(small.expert_per_layer, 8 * expert);
  EXPECT_EQ(small.per_layer - small.active_per_layer, 6 * expert);  // 8 held, 2 computed with
  const double active = static_cast<double>(small.total - 32 * 6 * expert);
  EXPECT_NEAR(active / 1e9, 12.9, 0.05);
  const ParamCounts large = parameter_counts(model_preset("mixtral-8x22b"));
  EXPECT_NEAR(static_cast<double>(large.total) / 1e9, 141, 0.5);
  EXPECT_NEAR(static_cast<double>(large.total - 56 * 6 * 3LL * 6144 * 16384) / 1e9, 39, 0.5);
  // Qwen3 (Qwen Team 2025): 30.5 B with 3.3 B active, 235 B with 22 B; their queries a·d wider
  // than h (the q and o projections h·a·d each).
  for (const auto& [name, total, active] :
       {std::tuple{"qwen3-30b-a3b", 30.5, 3.3}, std::tuple{"qwen3-235b-a22b", 235.1, 22.2}}) {
    SCOPED_TRACE(name);
    const ModelSpec q = model_preset(name);
    const ParamCounts c = parameter_counts(q);
    EXPECT_NEAR(static_cast<double>(c.total) / 1e9, total, 0.1);
    const double on = static_cast<double>(c.total - q.layers * (c.per_layer - c.active_per_layer));
    EXPECT_NEAR(on / 1e9, active, 0.1);
  }
  // A dense model: all of it active.
  const ParamCounts dense = parameter_counts(model_preset("llama3-8b"));
  EXPECT_EQ(dense.active_per_layer, dense.per_layer);
  EXPECT_EQ(dense.expert_per_layer, 0);
  // A shared expert is in every token's path.
  ModelSpec shared = model_preset("mixtral-8x7b");
  shared.shared_expert_ffn = 1024;
  const ParamCounts s = parameter_counts(shared);
  EXPECT_EQ(s.active_per_layer - small.active_per_layer, 3LL * 4096 * 1024);
  // Bad shapes: one line naming the knob.
  ModelSpec bad = model_preset("mixtral-8x7b");
  bad.top_k = 9;
  EXPECT_THAT(input_error([&] { check_model(bad); }),
              HasSubstr("--top-k 9 must be between 1 and the 8 experts"));
  bad = model_preset("llama3-8b");
  bad.top_k = 2;
  EXPECT_THAT(input_error([&] { check_model(bad); }),
              HasSubstr("--top-k and --shared-expert-ffn need routed experts (--experts E)"));
}

// DeepSeek-V3 (arXiv 2412.19437; its config.json): each count written out from the config's
// numbers, and the report's totals: 671B without the multi-token-prediction module, 37B active.
TEST(PlanModel, DeepSeekV3CountsItsLatentAttentionDenseLayersAndPredictionModule) {
  const ModelSpec m = model_preset("deepseek-v3");
  const std::int64_t h = 7168, a = 128;
  // q: down 7168 x 1536, its norm, up 1536 x 128(128 + 64); kv: down 7168 x (512 + 64), its norm,
  // up 512 x 128(128 + 128); out 128·128 x 7168; two RMSNorms.
  const std::int64_t attention =
      h * 1536 + 1536 + 1536 * a * 192 + h * 576 + 512 + 512 * a * 256 + a * 128 * h + 2 * h;
  const std::int64_t swiglu = 3 * h * 2048;
  const std::int64_t routed = attention + h * 256 + swiglu + 256 * swiglu;
  const std::int64_t dense = attention + 3 * h * 18432;
  const ParamCounts c = parameter_counts(m);
  EXPECT_EQ(c.per_layer, routed);
  EXPECT_EQ(c.dense_per_layer, dense);
  EXPECT_EQ(c.active_per_layer, attention + h * 256 + swiglu + 8 * swiglu);
  const std::int64_t embeddings = 2 * 129280 * h;  // untied
  const std::int64_t module = routed + 2 * h * h + 3 * h;
  EXPECT_EQ(c.mtp, module);
  EXPECT_EQ(c.total, embeddings + 3 * dense + 58 * routed + h + module);
  EXPECT_NEAR(static_cast<double>(c.total - c.mtp) / 1e9, 671.0, 0.1);
  const double active = static_cast<double>(embeddings + 3 * dense + 58 * c.active_per_layer + h);
  EXPECT_NEAR(active / 1e9, 37.5, 0.1);
  EXPECT_EQ(c.active_layers, 3 * dense + 58 * c.active_per_layer + c.active_per_layer + 2 * h * h);
  // A dense layer is the same attention with the 18432-wide MLP.
  EXPECT_EQ(parameter_counts(m.dense_part()).per_layer, dense);
  // Without the module and its flag, the count the report gives.
  ModelOverrides none;
  none.mtp_layers = 0;
  // Each of DeepSeek's pieces turned off by its flag: a plain mixture of experts is left.
  ModelOverrides off;
  off.dense_layers = 0;
  off.kv_lora_rank = 0;
  const ModelSpec plain_moe = resolve_model(std::string("deepseek-v3"), off);
  EXPECT_EQ(std::tuple(plain_moe.dense_layers, plain_moe.dense_ffn, plain_moe.q_lora_rank,
                       plain_moe.rope_head_width, plain_moe.mla()),
            std::tuple(0, 0, 0, 0, false));
  // Given to a model with grouped-query attention, latent attention takes a key and a value per
  // head.
  ModelOverrides latent;
  latent.kv_lora_rank = 512;
  EXPECT_EQ(resolve_model(std::string("llama3-8b"), latent).kv_heads, 32);
  EXPECT_EQ(parameter_counts(resolve_model(std::string("deepseek-v3"), none)).total,
            c.total - module);
  // MLA's activations: Q and K 192 wide per head, V and the output projection's input 128, the
  // latents whole; more than the same heads of 128 without the latents.
  ActivationOptions o;
  o.flash_attention = true;
  ModelSpec plain = m;
  plain.q_lora_rank = plain.kv_lora_rank = plain.rope_head_width = 0;
  const std::int64_t s = 4096;
  EXPECT_EQ(layer_activation_bytes(m, o) - layer_activation_bytes(plain, o),
            4 * s * a * 64 + 2 * s * (1536 + 512 + 64) + 2 * s * (1536 + 512));
  // With tensor and sequence parallelism the heads split t ways and the latents, computed on
  // each GPU's s/t tokens, are kept sequence-sharded.
  o.tensor_parallel = 8;
  o.sequence_parallel = true;
  EXPECT_EQ(layer_activation_bytes(m, o) - layer_activation_bytes(plain, o),
            4 * s * (a / 8) * 64 + 2 * (s / 8) * (1536 + 512 + 64) + 2 * (s / 8) * (1536 + 512));
  // Bad shapes: one line naming the knob and what would work.
  ModelOverrides few;
  few.layers = 3;
  EXPECT_THAT(input_error([&] { resolve_model(std::string("deepseek-v3"), few); }),
              HasSubstr("--dense-layers 3 leaves none of the 3 layers routed; --dense-layers 2"));
  ModelSpec bad = model_preset("llama3-8b");
  bad.dense_layers = 2;
  bad.dense_ffn = 100;
  EXPECT_THAT(input_error([&] { check_model(bad); }),
              HasSubstr("--dense-layers 2 needs routed experts"));
  bad = model_preset("mixtral-8x7b");
  bad.dense_layers = 2;
  EXPECT_THAT(input_error([&] { check_model(bad); }),
              HasSubstr("needs the dense layers' MLP width"));
  bad = model_preset("llama3-8b");
  bad.q_lora_rank = 512;
  EXPECT_THAT(input_error([&] { check_model(bad); }), HasSubstr("give --kv-lora-rank too"));
  bad.kv_lora_rank = 512;  // kv_heads 8 of 32
  EXPECT_THAT(input_error([&] { check_model(bad); }),
              HasSubstr("has a key and a value per head: --kv-heads 8 must be the 32 heads"));
  bad = model_preset("gpt2-small");
  bad.kv_lora_rank = 64;
  EXPECT_THAT(input_error([&] { check_model(bad); }), HasSubstr("--arch llama"));
  bad = model_preset("deepseek-v3");
  bad.mtp_layers = -1;
  EXPECT_THAT(input_error([&] { check_model(bad); }), HasSubstr("--mtp-layers cannot be negative"));
  // DeepSeek-V3's router: 8 groups of experts, 4 kept; the other presets route by softmax, and a
  // model made dense again routes nothing.
  EXPECT_EQ(m.router, Router::deepseek_v3);
  EXPECT_EQ(model_preset("qwen3-235b-a22b").router, Router::softmax);
  ModelOverrides twelve;
  twelve.experts = 12;
  EXPECT_THAT(input_error([&] { resolve_model(std::string("deepseek-v3"), twelve); }),
              HasSubstr("--experts must be a multiple of 8"));
  ModelOverrides wide;
  wide.experts = 16;
  wide.top_k = 9;  // 4 groups of 2 experts kept: at most 8
  EXPECT_THAT(input_error([&] { resolve_model(std::string("deepseek-v3"), wide); }),
              HasSubstr("--top-k between 4 and 4/8 of them"));
  ModelOverrides narrow;
  narrow.top_k = 2;  // fewer than the 4 groups kept: Megatron-LM would score groups by 0 experts
  EXPECT_THAT(input_error([&] { resolve_model(std::string("deepseek-v3"), narrow); }),
              HasSubstr("--top-k between 4"));
  // --router softmax lets the preset take 12 experts; a router needs experts; names are checked.
  twelve.router = Router::softmax;
  EXPECT_EQ(resolve_model(std::string("deepseek-v3"), twelve).experts, 12);
  ModelOverrides routed_dense;
  routed_dense.router = Router::deepseek_v3;
  EXPECT_THAT(input_error([&] { resolve_model(std::string("llama3-8b"), routed_dense); }),
              HasSubstr("--router needs routed experts"));
  EXPECT_EQ(parse_router("deepseek-v3"), Router::deepseek_v3);
  EXPECT_THAT(input_error([] { parse_router("sinkhorn"); }),
              HasSubstr("unknown router 'sinkhorn' (expected softmax or deepseek-v3)"));
  ModelOverrides no_experts;
  no_experts.experts = 0;
  EXPECT_EQ(resolve_model(std::string("deepseek-v3"), no_experts).router, Router::softmax);
}

// Exact published counts. GPT-2: keras-hub's gpt2 presets (= the HF checkpoints' parameter
// counts). Llama: the HF models' num_parameters() (the safetensors totals of Llama 2 are higher
// by 64 rotary inv_freq entries per layer, a buffer, not a parameter: 6,738,417,664 for 7b).
TEST(PlanModel, ParameterCountsMatchTheReleasedCheckpoints) {
  const std::vector<std::pair<const char*, std::int64_t>> exact = {
      {"gpt2-small", 124'439'808},    {"gpt2-medium", 354'823'168},
      {"gpt2-large", 774'030'080},    {"gpt2-xl", 1'557'611'200},
      {"llama2-7b", 6'738'415'616},   {"llama2-13b", 13'015'864'320},
      {"llama2-70b", 68'976'648'192}, {"llama3-8b", 8'030'261'248},
      {"llama3-70b", 70'553'706'496}, {"llama3-405b", 405'853'388'800},
  };
  for (const auto& [name, count] : exact) {
    SCOPED_TRACE(name);
    EXPECT_EQ(parameter_counts(model_preset(name)).total, count);
  }
}

// GPT-3 was never released: Table 2.1 prints rounded counts (125M ... 175.0B), 2-3 significant
// figures and not always the nearest (its "350M" is GPT-2 medium's 355M shape with 1024 more
// positions). So: the exact values follow from the shape (each is the GPT-2 count of the same
// shape plus the 1024 extra positions where one exists, and for 175B, 6·N·300e9 = 3.14e23 FLOPs
// is the paper's own compute figure only with N = 174.6B), and the rounded ones are within 2%
// (175B within 0.5%).
TEST(PlanModel, Gpt3CountsAgreeWithTable21) {
  const std::vector<std::tuple<const char*, std::int64_t, double>> rows = {
      {"gpt3-125m", 125'226'240, 125e6},    {"gpt3-350m", 355'871'744, 350e6},
      {"gpt3-760m", 760'300'032, 760e6},    {"gpt3-1.3b", 1'315'723'264, 1.3e9},
      {"gpt3-2.7b", 2'651'553'280, 2.7e9},  {"gpt3-6.7b", 6'658'404'352, 6.7e9},
      {"gpt3-13b", 12'853'386'240, 13.0e9}, {"gpt3-175b", 174'604'259'328, 175.0e9},
  };
  for (const auto& [name, exact, paper] : rows) {
    SCOPED_TRACE(name);
    const std::int64_t total = parameter_counts(model_preset(name)).total;
    EXPECT_EQ(total, exact);
    EXPECT_NEAR(total / paper, 1.0, std::string(name) == "gpt3-175b" ? 0.005 : 0.02);
  }
  const std::int64_t extra_positions = 1024;  // 2048 - 1024
  EXPECT_EQ(parameter_counts(model_preset("gpt3-125m")).total,
            parameter_counts(model_preset("gpt2-small")).total + extra_positions * 768);
  EXPECT_EQ(parameter_counts(model_preset("gpt3-350m")).total,
            parameter_counts(model_preset("gpt2-medium")).total + extra_positions * 1024);
  EXPECT_NEAR(6.0 * parameter_counts(model_preset("gpt3-175b")).total * 300e9, 3.14e23, 0.005e23);
}

// The GPT layer formula against an independent published exact count: Pythia (Biderman et al.
// 2023, Table 1) reports non-embedding parameters (L layers + the final LayerNorm) of GPT-NeoX
// models with GPT-3's shapes and the same per-layer parameters (QKV, projection and 4h MLP with
// biases, two LayerNorms).
TEST(PlanModel, GptLayerCountMatchesPythiaNonEmbeddingCounts) {
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> rows = {
      {12, 768, 12, 85'056'000},       // Pythia-160M
      {24, 1024, 16, 302'311'424},     // Pythia-410M
      {24, 2048, 16, 1'208'602'624},   // Pythia-1.4B
      {32, 2560, 32, 2'517'652'480},   // Pythia-2.8B
      {32, 4096, 32, 6'444'163'072},   // Pythia-6.9B
      {36, 5120, 40, 11'327'027'200},  // Pythia-12B
  };
  for (const auto& [L, h, a, non_embedding] : rows) {
    ModelSpec m = model_preset("gpt3-125m");
    m.layers = L;
    m.d_model = h;
    m.heads = m.kv_heads = a;
    m.ffn = 4 * h;
    const ParamCounts p = parameter_counts(m);
    EXPECT_EQ(p.per_layer, 12 * h * h + 13 * h);
    EXPECT_EQ(L * p.per_layer + p.final_norm, non_embedding) << "L " << L << " h " << h;
  }
}

TEST(PlanModel, ParameterCountParts) {
  const ParamCounts gpt = parameter_counts(model_preset("gpt2-small"));
  EXPECT_EQ(gpt.embedding, 50257 * 768);
  EXPECT_EQ(gpt.positions, 1024 * 768);
  EXPECT_EQ(gpt.per_layer, 7'087'872);
  EXPECT_EQ(gpt.final_norm, 2 * 768);
  EXPECT_EQ(gpt.head, 0);  // tied

  // Llama 3 8B by hand: q, o 4096² each, k, v 4096·1024 each, MLP 3·4096·14336, norms 2·4096.
  const ParamCounts llama = parameter_counts(model_preset("llama3-8b"));
  EXPECT_EQ(llama.per_layer, 2 * 16'777'216 + 2 * 4'194'304 + 176'160'768 + 8192);
  EXPECT_EQ(llama.positions, 0);
  EXPECT_EQ(llama.final_norm, 4096);
  EXPECT_EQ(llama.head, 128256 * 4096);  // untied
  EXPECT_EQ(llama.total, llama.embedding + 32 * llama.per_layer + llama.final_norm + llama.head);

  ModelSpec tied = model_preset("llama3-8b");
  tied.tied_embeddings = true;
  EXPECT_EQ(parameter_counts(tied).total, llama.total - llama.head);
  ModelSpec untied = model_preset("gpt2-small");
  untied.tied_embeddings = false;
  EXPECT_EQ(parameter_counts(untied).total, gpt.total + 50257 * 768);
}

// Korthikanti et al. 2022, Table 2: activation bytes per transformer layer (16-bit activations,
// 1-byte dropout masks), written as the paper writes them. With sequence parallelism and full
// recomputation the paper's 2sbh is the layer input; Megatron keeps its sequence shard, 2sbh/t.
double table2(const ModelSpec& m, std::int64_t b, std::int64_t t, bool sp, Recompute r) {
  const double s = m.seq_len, h = m.d_model, a = m.heads, sbh = s * b * h;
  switch (r) {
    case Recompute::none:
      return sp ? sbh * (34.0 / t + 5 * a * s / (h * t))
                : sbh * (10 + 24.0 / t + 5 * a * s / (h * t));
    case Recompute::selective:
      return sp ? sbh * (34.0 / t) : sbh * (10 + 24.0 / t);
    case Recompute::full:
      return sp ? sbh * 2 / t : sbh * 2;
  }
  return 0;
}

TEST(PlanModel, GptActivationsMatchMegatronTable2) {
  int checked = 0;
  for (const char* name : {"gpt2-medium", "gpt3-1.3b", "gpt3-2.7b", "gpt3-13b", "gpt3-175b"})
    for (const std::int64_t t : {1, 2, 4, 8})
      for (const bool sp : {false, true})
        for (const Recompute r : {Recompute::none, Recompute::selective, Recompute::full})
          for (const std::int64_t b : {1, 4}) {
            const ModelSpec m = model_preset(name);
            ActivationOptions o;
            o.microbatch_size = b;
            o.tensor_parallel = t;
            o.sequence_parallel = sp;
            o.recompute = r;
            EXPECT_DOUBLE_EQ(static_cast<double>(layer_activation_bytes(m, o)),
                             table2(m, b, t, sp, r))
                << name << " t " << t << " sp " << sp << " " << to_string(r) << " b " << b;
            ++checked;
          }
  EXPECT_EQ(checked, 5 * 4 * 2 * 3 * 2);
  // The paper's GPT-3 figure: 5as/h = 80 against 34 for the rest of the layer.
  const ModelSpec g = model_preset("gpt3-175b");
  EXPECT_EQ(layer_activation_bytes(g, {}), 2048LL * 12288 * (34 + 80));
}

// A GPT layer away from f = 4h and kv = h, by hand: s 8, b 2, h 16, a 4, g 2 (kv 8), f 40.
// 14sbh + 4sb·kv + 4sbf + 5as²b = 14·256 + 4·16·8 + 4·16·40 + 5·4·64·2 = 3584 + 512 + 2560 + 2560.
TEST(PlanModel, GptActivationsGeneraliseToAnyFfnAndKvWidth) {
  ModelSpec m;
  m.arch = Arch::gpt;
  m.layers = 1;
  m.d_model = 16;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn = 40;
  m.vocab = 10;
  m.seq_len = 8;
  ActivationOptions o;
  o.microbatch_size = 2;
  EXPECT_EQ(layer_activation_bytes(m, o), 3584 + 512 + 2560 + 2560);
  o.tensor_parallel = 2;  // 10sbh + (4sbh + 4sb·kv + 4sbf + 5as²b) / 2
  EXPECT_EQ(layer_activation_bytes(m, o), 2560 + (1024 + 512 + 2560 + 2560) / 2);
  o.flash_attention = true;  // the s x s terms become 4asb/t of softmax statistics
  EXPECT_EQ(layer_activation_bytes(m, o), 2560 + (1024 + 512 + 2560 + 4 * 4 * 16) / 2);
}

// The Llama layer by hand: s 8, b 2, h 16, a 4, g 2 (d 4, kv 8), f 40; sb = 16, sbh = 256.
// 12sbh + 4sb·kv + 6sbf + 2as²b = 3072 + 512 + 3840 + 1024 = 8448; tensor-parallel without
// sequence parallelism keeps the norms' inputs and outputs, 8sbh = 2048, whole.
TEST(PlanModel, LlamaActivationsByHand) {
  ModelSpec m;
  m.arch = Arch::llama;
  m.layers = 1;
  m.d_model = 16;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn = 40;
  m.vocab = 10;
  m.seq_len = 8;
  m.tied_embeddings = false;
  const auto bytes = [&](std::int64_t t, bool sp, Recompute r, bool flash) {
    ActivationOptions o;
    o.microbatch_size = 2;
    o.tensor_parallel = t;
    o.sequence_parallel = sp;
    o.recompute = r;
    o.flash_attention = flash;
    return layer_activation_bytes(m, o);
  };
  EXPECT_EQ(bytes(1, false, Recompute::none, false), 8448);
  EXPECT_EQ(bytes(2, false, Recompute::none, false), 2048 + (1024 + 512 + 3840 + 1024) / 2);
  EXPECT_EQ(bytes(2, true, Recompute::none, false), 8448 / 2);
  EXPECT_EQ(bytes(1, false, Recompute::selective, false), 8448 - 1024);
  EXPECT_EQ(bytes(1, false, Recompute::none, true), 8448 - 1024 + 4 * 4 * 16);
  EXPECT_EQ(bytes(1, false, Recompute::selective, true), 8448 - 1024);  // nothing of the core
  EXPECT_EQ(bytes(1, false, Recompute::full, false), 512);
  EXPECT_EQ(bytes(2, true, Recompute::full, false), 256);
  EXPECT_EQ(bytes(2, false, Recompute::full, true), 512);
  // t = 4 > g = 2: each GPU holds one query head and one (replicated) K/V head: 2048 + Q and the
  // projection input 4·16·4 + K, V 4·16·4 + MLP 6·16·10 + softmax 2·1·8·16.
  EXPECT_EQ(bytes(4, false, Recompute::none, false), 2048 + 256 + 256 + 960 + 256);
}

TEST(PlanModel, FlashAttentionKeepsSoftmaxStatisticsInsteadOfTheMatrices) {
  const ModelSpec m = model_preset("gpt3-175b");
  for (const std::int64_t t : {1, 8}) {
    ActivationOptions o;
    o.tensor_parallel = t;
    o.sequence_parallel = true;
    o.flash_attention = true;
    const double s = 2048, h = 12288, a = 96;
    EXPECT_DOUBLE_EQ(static_cast<double>(layer_activation_bytes(m, o)),
                     s * h * 34 / t + 4 * a * s / t);
  }
}

TEST(PlanModel, ShapeFlagsOverrideAPresetAndKeepItsRatios) {
  ModelOverrides o;
  o.heads = 16;
  o.d_model = 1024;
  const ModelSpec gpt = resolve_model(std::string("gpt2-small"), o);
  EXPECT_EQ(gpt.name, "gpt2-small (modified)");
  EXPECT_EQ(gpt.kv_heads, 16);   // no grouped-query attention before, none after
  EXPECT_EQ(gpt.ffn, 4 * 1024);  // the MLP stays 4h
  EXPECT_EQ(gpt.layers, 12);     // what no flag changed stays the preset's
  ModelOverrides wider;
  wider.d_model = 10240;
  const ModelSpec llama = resolve_model(std::string("llama3-70b"), wider);
  EXPECT_EQ(llama.kv_heads, 8);  // grouped-query attention kept
  EXPECT_EQ(llama.ffn, 28672);   // SwiGLU's own width kept
  EXPECT_EQ(resolve_model(std::string("llama3-70b"), {}), model_preset("llama3-70b"));
  ModelOverrides shape;
  shape.layers = 4;
  shape.d_model = 256;
  shape.heads = 8;
  EXPECT_THAT(input_error([&] { resolve_model(std::nullopt, shape); }),
              HasSubstr("--seq-len is missing"));
  shape.seq_len = 512;
  const ModelSpec custom = resolve_model(std::nullopt, shape);
  EXPECT_EQ(custom.ffn, 1024);
  EXPECT_EQ(custom.kv_heads, 8);
  EXPECT_TRUE(custom.tied_embeddings);
}

TEST(PlanModel, BadShapesAreRefusedWithTheirReason) {
  const ModelSpec good = model_preset("gpt2-small");
  const auto bad = [&](const std::function<void(ModelSpec&)>& edit) {
    ModelSpec m = good;
    edit(m);
    return input_error([&] { check_model(m); });
  };
  EXPECT_EQ(bad([](ModelSpec& m) { m.d_model = 770; }),
            "model 'gpt2-small': d_model 770 is not divisible by 12 heads");
  EXPECT_EQ(bad([](ModelSpec& m) { m.kv_heads = 5; }),
            "model 'gpt2-small': 12 heads are not divisible by 5 kv_heads");
  EXPECT_EQ(bad([](ModelSpec& m) { m.layers = 0; }),
            "model 'gpt2-small': layers must be at least 1 (got 0)");
  for (const auto& [field, edit] :
       std::vector<std::pair<std::string, std::function<void(ModelSpec&)>>>{
           {"d_model", [](ModelSpec& m) { m.d_model = -768; }},
           {"heads", [](ModelSpec& m) { m.heads = 0; }},
           {"kv_heads", [](ModelSpec& m) { m.kv_heads = 0; }},
           {"ffn", [](ModelSpec& m) { m.ffn = 0; }},
           {"vocab", [](ModelSpec& m) { m.vocab = 0; }},
           {"seq_len", [](ModelSpec& m) { m.seq_len = 0; }}})
    EXPECT_THAT(bad(edit), HasSubstr(field + " must be at least 1"));
  const std::string too_large = "the model shape is too large";
  EXPECT_THAT(bad([](ModelSpec& m) { m.vocab = std::int64_t{1} << 56; }), HasSubstr(too_large));
  EXPECT_THAT(bad([](ModelSpec& m) { m.seq_len = std::int64_t{1} << 30; }), HasSubstr(too_large));
  EXPECT_THAT(bad([](ModelSpec& m) { m.layers = std::int64_t{1} << 50; }), HasSubstr(too_large));
  // parameter_counts and layer_activation_bytes check the model first.
  ModelSpec zero = good;
  zero.layers = 0;
  EXPECT_THAT(input_error([&] { parameter_counts(zero); }), HasSubstr("layers must be at least"));
  EXPECT_THAT(input_error([&] { layer_activation_bytes(zero, {}); }),
              HasSubstr("layers must be at least"));
  // A micro-batch too large for the s x s matrices in 64 bits.
  ActivationOptions huge;
  huge.microbatch_size = std::int64_t{1} << 40;
  EXPECT_THAT(input_error([&] { layer_activation_bytes(model_preset("llama3-405b"), huge); }),
              HasSubstr(too_large));
}

TEST(PlanModel, BadActivationOptionsAreRefused) {
  const ModelSpec m = model_preset("gpt2-small");
  ActivationOptions o;
  o.microbatch_size = 0;
  EXPECT_EQ(input_error([&] { layer_activation_bytes(m, o); }),
            "the micro-batch size must be at least 1 (got 0)");
  o.microbatch_size = 1;
  o.tensor_parallel = 0;
  EXPECT_EQ(input_error([&] { layer_activation_bytes(m, o); }),
            "the tensor-parallel size must be at least 1 (got 0)");
}

TEST(PlanModel, UnknownPresetListsTheKnownNames) {
  EXPECT_EQ(input_error([] { model_preset("gpt4"); }),
            "unknown model preset 'gpt4' (known: gpt2-small, gpt2-medium, gpt2-large, gpt2-xl, "
            "gpt3-125m, gpt3-350m, gpt3-760m, gpt3-1.3b, gpt3-2.7b, gpt3-6.7b, gpt3-13b, "
            "gpt3-175b, llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b, llama3-405b, "
            "mixtral-8x7b, mixtral-8x22b, qwen3-30b-a3b, qwen3-235b-a22b, deepseek-v3)");
}

}  // namespace
}  // namespace paci::plan
