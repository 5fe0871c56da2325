// Tests of plan/hardware/cluster.hpp: every compiled-in preset parses, checks, round-trips exactly
// and equals its file in plan/hardware/clusters/; the datasheet values of docs/cluster.md; one
// InputError line naming the source and the field for each kind of bad file; the unknown-preset
// message.
#include "plan/hardware/cluster.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "schedules/ir.hpp"

namespace paci::plan {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Json = nlohmann::ordered_json;
const std::string kGolden = PACI_GOLDEN_DIR;
const std::string kPresetDir = kGolden + "/../../plan/hardware/clusters";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMiB = 1024.0 * 1024.0;

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

TEST(ClusterPresets, TheSixInAFixedOrder) {
  std::vector<std::string> names;
  for (const ClusterSpec& preset : cluster_presets()) names.push_back(preset.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a100-40gb", "a100-80gb", "h100-80gb", "h200", "b200",
                                             "gb200-nvl72"}));
  EXPECT_EQ(&cluster_presets(), &cluster_presets());  // parsed once
}

TEST(ClusterPresets, EachChecksAndRoundTripsExactly) {
  for (const ClusterSpec& preset : cluster_presets()) {
    SCOPED_TRACE(preset.name);
    EXPECT_NO_THROW(check_cluster(preset, preset.name));
    const std::string text = write_cluster(preset);
    const ClusterSpec back = parse_cluster(text, "written");
    EXPECT_EQ(back, preset);
    EXPECT_EQ(write_cluster(back), text);
    EXPECT_EQ(cluster_preset(preset.name), preset);
    EXPECT_FALSE(preset.description.empty());
  }
}

TEST(ClusterPresets, CompiledInTextsEqualTheFiles) {
  for (const ClusterSpec& preset : cluster_presets()) {
    SCOPED_TRACE(preset.name);
    EXPECT_EQ(read_cluster(kPresetDir + "/" + preset.name + ".json"), preset);
  }
}

TEST(ClusterPresets, DatasheetValues) {
  const ClusterSpec a40 = cluster_preset("a100-40gb"), a80 = cluster_preset("a100-80gb");
  const ClusterSpec h100 = cluster_preset("h100-80gb"), h200 = cluster_preset("h200");
  EXPECT_EQ(a40.peak_flops, 312e12);
  EXPECT_EQ(a80.peak_flops, 312e12);
  EXPECT_EQ(h100.peak_flops, 989.4e12);
  EXPECT_EQ(h200.peak_flops, 989.4e12);
  EXPECT_EQ(a40.memory_bandwidth_bytes_per_s, 1.555e12);
  EXPECT_EQ(a80.memory_bandwidth_bytes_per_s, 2.039e12);
  EXPECT_EQ(h100.memory_bandwidth_bytes_per_s, 3.35e12);
  EXPECT_EQ(h200.memory_bandwidth_bytes_per_s, 4.8e12);
  EXPECT_EQ(a80.memory_bytes, 85056798720.0);  // device-reported, not 80 GiB
  EXPECT_EQ(h100.memory_bytes, 81559 * kMiB);
  EXPECT_EQ(h200.memory_bytes, 143771 * kMiB);
  EXPECT_NEAR(a40.memory_bytes, 40339.3 * kMiB, 0.01e9);
  for (const ClusterSpec& c : {a40, a80}) {
    EXPECT_EQ(c.sms, 108);
    EXPECT_EQ(c.nvlink.bandwidth_bytes_per_s, 300e9);
    EXPECT_EQ(c.network.bandwidth_bytes_per_s, 25e9);  // HDR 200 Gb/s per GPU
  }
  for (const ClusterSpec& c : {h100, h200}) {
    EXPECT_EQ(c.sms, 132);
    EXPECT_EQ(c.nvlink.bandwidth_bytes_per_s, 450e9);
    EXPECT_EQ(c.network.bandwidth_bytes_per_s, 50e9);  // NDR 400 Gb/s per GPU
  }
  for (const ClusterSpec& c : cluster_presets())
    EXPECT_EQ(c.gpus_per_node, c.name == "gb200-nvl72" ? 72 : 8) << c.name;
}

// Blackwell (docs/cluster.md, "Blackwell"): datasheet values, device-reported memory and SMs, and
// the shares that reproduce the measurements they were taken from.
TEST(ClusterPresets, BlackwellValuesAndTheirMeasurements) {
  const ClusterSpec b200 = cluster_preset("b200"), gb200 = cluster_preset("gb200-nvl72");
  EXPECT_EQ(b200.peak_flops, 2250e12);   // dense BF16, DGX B200
  EXPECT_EQ(gb200.peak_flops, 2500e12);  // dense BF16 per GPU, GB200 NVL72
  for (const ClusterSpec& c : {b200, gb200}) {
    EXPECT_EQ(c.memory_bandwidth_bytes_per_s, 8e12);
    EXPECT_EQ(c.nvlink.bandwidth_bytes_per_s, 900e9);  // NVLink 5, per direction
    EXPECT_EQ(c.network.bandwidth_bytes_per_s, 50e9);  // ConnectX-7 400 Gb/s per GPU
  }
  EXPECT_EQ(b200.memory_bytes, 183359 * kMiB);  // nvidia-smi
  EXPECT_EQ(gb200.memory_bytes, 189471 * kMiB);
  EXPECT_EQ(b200.sms, 148);
  EXPECT_EQ(gb200.sms, 152);
  const auto near = [](double value, double expected) {
    EXPECT_NEAR(value / expected, 1.0, 5e-4) << value << " vs " << expected;
  };
  // XLA's sm_100_B200 table, batch 1, m = 4096, n and k in {2048, 4096}.
  near(b200.peak_flops * b200.gemm_efficiency,
       (1170.01e12 + 1277.79e12 + 1343.54e12 + 1416.87e12) / 4);
  // GB200: B200's GEMMs scaled by the best-shape ratio 1822 / 1745.
  near(gb200.peak_flops * gb200.gemm_efficiency,
       b200.peak_flops * b200.gemm_efficiency * 1822.0 / 1745.0);
  // cuDNN 9.13.1 on B200, causal, 8k (cudnn-frontend's B200 CSV); GB200 scaled by 1822 / 1745.
  ASSERT_EQ(b200.attention_by_seq.size(), 9u);
  const AttentionRate& b8k = b200.attention_by_seq[4];
  EXPECT_EQ(b8k.seq, 8192);
  near(b8k.causal_forward, 1171.278e12);
  near(b8k.causal_backward, 942.509e12);
  near(b8k.full_forward, 1171.278e12 * 1771.0 / 1574.0);  // GB200's unmasked / causal ratio
  near(gb200.attention_by_seq[4].causal_forward, 1171.278e12 * 1822.0 / 1745.0);
  near(b200.nvlink.bandwidth_bytes_per_s * b200.nvlink.efficiency, 682.2e9);  // NVLS off, 8 GiB
  near(gb200.nvlink.bandwidth_bytes_per_s * gb200.nvlink.efficiency, 680e9);  // 32 GPUs
  near(gb200.nvlink.bandwidth_bytes_per_s * gb200.nvlink.p2p_efficiency, 746e9);
  near(b200.memory_bandwidth_bytes_per_s * b200.memory_efficiency, 6.3e12);  // B300 clone
  EXPECT_EQ(b200.nvlink.allreduce_busbw_by_bytes.size(), 20u);
  EXPECT_TRUE(gb200.nvlink.allreduce_busbw_by_bytes.empty());  // no NVL72 sweep found
}

// The stored efficiencies reproduce the measurements docs/cluster.md quotes (to 0.05%).
TEST(ClusterPresets, EfficienciesReproduceTheMeasurements) {
  const ClusterSpec a40 = cluster_preset("a100-40gb"), a80 = cluster_preset("a100-80gb");
  const ClusterSpec h100 = cluster_preset("h100-80gb"), h200 = cluster_preset("h200");
  const auto near = [](double value, double expected) {
    EXPECT_NEAR(value / expected, 1.0, 5e-4) << value << " vs " << expected;
  };
  // Transformer-shaped GEMMs (EleutherAI cookbook: QKV, output, h to 4h, 4h to h at 8192 tokens).
  near(a40.peak_flops * a40.gemm_efficiency, (241.6e12 + 234.9e12 + 241.1e12 + 252.8e12) / 4);
  EXPECT_EQ(a80.gemm_efficiency, a40.gemm_efficiency);
  near(h100.peak_flops * h100.gemm_efficiency, 750.6e12);  // XLA's sm_90 table, m = 4096
  EXPECT_EQ(h200.gemm_efficiency, h100.gemm_efficiency);
  near(a40.memory_bandwidth_bytes_per_s * a40.memory_efficiency, 1358e9);  // gpu-stream triad
  near(a80.memory_bandwidth_bytes_per_s * a80.memory_efficiency, 1794e9);
  near(h100.memory_bandwidth_bytes_per_s * h100.memory_efficiency, 3.01e12);  // QuACK
  EXPECT_EQ(h200.memory_efficiency, h100.memory_efficiency);  // carried over, no measurement
  // The attention core by length: FA2 fwd+bwd on A100 (causal 173, unmasked 196 at 4k); cuDNN
  // on H100 (FlashAttention-3 paper's cuDNN bars at 4k: causal forward 518, unmasked 609 and
  // 499 backward; the causal backward derived as 499 x 518 / 609).
  const AttentionRate& a4k = a80.attention_by_seq[3];
  EXPECT_EQ(a4k.seq, 4096);
  near(a4k.causal_forward, 173e12);
  near(a4k.causal_backward, 173e12);
  near(a4k.full_forward, 196e12);
  const AttentionRate& h4k = h100.attention_by_seq[3];
  EXPECT_EQ(h4k.seq, 4096);
  near(h4k.causal_forward, 518e12);
  near(h4k.full_forward, 609e12);
  near(h4k.full_backward, 499e12);
  near(h4k.causal_backward, 499e12 * 518 / 609);
  EXPECT_EQ(h200.attention_by_seq, h100.attention_by_seq);                  // carried over
  near(a80.nvlink.bandwidth_bytes_per_s * a80.nvlink.efficiency, 234.9e9);  // ring busbw
  near(h200.nvlink.bandwidth_bytes_per_s * h200.nvlink.efficiency, 367.2e9);
  near(a80.nvlink.bandwidth_bytes_per_s * a80.nvlink.p2p_efficiency, 274e9);
  near(h100.nvlink.bandwidth_bytes_per_s * h100.nvlink.p2p_efficiency, 376e9);
  near(h200.nvlink.bandwidth_bytes_per_s * h200.nvlink.p2p_efficiency, 396.4e9);
  near(a80.network.bandwidth_bytes_per_s * a80.network.efficiency, 24e9);
  near(h200.network.bandwidth_bytes_per_s * h200.network.efficiency, 48e9);
  // The A100 table ends at the ring figure the efficiency is taken from.
  EXPECT_EQ(a80.nvlink.allreduce_busbw_by_bytes.back(),
            (std::pair<double, double>{16.0 * 1024 * kMiB, 234.9e9}));
  EXPECT_EQ(a40.nvlink.allreduce_busbw_by_bytes, a80.nvlink.allreduce_busbw_by_bytes);
  EXPECT_EQ(h100.nvlink.allreduce_busbw_by_bytes, h200.nvlink.allreduce_busbw_by_bytes);
  EXPECT_TRUE(a80.network.allreduce_busbw_by_bytes.empty());
}

// The optional fields: FP8 on Hopper and Blackwell, MXFP8 on Blackwell only, none on Ampere; an
// oversubscribed network; each checked, written only when given, and refused in one line when
// half given or misplaced.
TEST(ClusterFile, OptionalFp8AndOversubscriptionFields) {
  for (const ClusterSpec& c : cluster_presets()) {
    SCOPED_TRACE(c.name);
    const bool ampere = c.name.starts_with("a100");
    const bool blackwell = c.name == "b200" || c.name == "gb200-nvl72";
    EXPECT_EQ(c.fp8_peak_flops > 0, !ampere);
    EXPECT_EQ(c.mxfp8_gemm_efficiency > 0, blackwell);
    if (!ampere) {
      EXPECT_EQ(c.fp8_peak_flops, 2 * c.peak_flops);  // dense FP8: twice bf16
    }
    EXPECT_EQ(write_cluster(c).find("fp8") != std::string::npos, !ampere);
    EXPECT_EQ(c.network.oversubscription, 0.0);  // the presets' fabrics are non-blocking
  }
  // The FP8 rates docs/cluster.md derives: each FP8 best-shape matmul measurement scaled to
  // transformer shapes by the same GPU's BF16 ratio; MXFP8 by Transformer Engine's MXFP8 / FP8.
  const auto near = [](double value, double expected) {
    EXPECT_NEAR(value / expected, 1.0, 5e-4) << value << " vs " << expected;
  };
  const ClusterSpec h100 = cluster_preset("h100-80gb"), b200 = cluster_preset("b200");
  const ClusterSpec gb200 = cluster_preset("gb200-nvl72");
  near(h100.fp8_peak_flops * h100.fp8_gemm_efficiency, 1402.6e12 * 750.6 / 794.5);
  EXPECT_EQ(cluster_preset("h200").fp8_gemm_efficiency, h100.fp8_gemm_efficiency);
  const double b200_shapes = b200.peak_flops * b200.gemm_efficiency / 1745e12;
  near(b200.fp8_peak_flops * b200.fp8_gemm_efficiency, 3432.5e12 * b200_shapes);
  near(gb200.fp8_peak_flops * gb200.fp8_gemm_efficiency, 3615.6e12 * b200_shapes);
  near(b200.mxfp8_gemm_efficiency / b200.fp8_gemm_efficiency, 2677.0 / 2815.0);
  near(gb200.mxfp8_gemm_efficiency / gb200.fp8_gemm_efficiency, 2677.0 / 2815.0);

  ClusterSpec c = cluster_preset("h100-80gb");
  c.network.oversubscription = 7;
  c.network.nodes_per_leaf = 384;
  EXPECT_EQ(parse_cluster(write_cluster(c), "written"), c);
  EXPECT_THAT(write_cluster(c), HasSubstr("\"oversubscription\": 7"));
  c.network.nodes_per_leaf = 0;
  EXPECT_THAT(input_error([&] { check_cluster(c, "f"); }),
              HasSubstr("network.oversubscription and network.nodes_per_leaf go together"));
  c.network.nodes_per_leaf = 384;
  c.network.oversubscription = 0.5;
  EXPECT_THAT(input_error([&] { check_cluster(c, "f"); }),
              HasSubstr("network.oversubscription must be at least 1"));
  c.network.oversubscription = std::numeric_limits<double>::infinity();
  EXPECT_THAT(input_error([&] { check_cluster(c, "f"); }),
              HasSubstr("network.oversubscription must be finite"));
  c.network.oversubscription = 7;
  c.network.nodes_per_leaf = 2.5;
  EXPECT_THAT(input_error([&] { check_cluster(c, "f"); }),
              HasSubstr("network.nodes_per_leaf must be a whole number of nodes"));
  c = cluster_preset("h100-80gb");
  c.nvlink.oversubscription = 2;
  c.nvlink.nodes_per_leaf = 1;
  EXPECT_THAT(input_error([&] { check_cluster(c, "f"); }), HasSubstr("give them under network"));
  c = cluster_preset("h100-80gb");
  c.fp8_gemm_efficiency = 0;
  EXPECT_THAT(input_error([&] { check_cluster(c, "f"); }),
              HasSubstr("fp8_peak_flops and fp8_gemm_efficiency go together"));
  c = cluster_preset("a100-80gb");
  c.mxfp8_gemm_efficiency = 0.5;
  EXPECT_THAT(input_error([&] { check_cluster(c, "f"); }),
              HasSubstr("mxfp8_gemm_efficiency needs fp8_peak_flops"));
  c = cluster_preset("h100-80gb");
  c.fp8_gemm_efficiency = 1.5;
  EXPECT_THAT(input_error([&] { check_cluster(c, "f"); }),
              HasSubstr("fp8_gemm_efficiency must be in (0, 1]"));
  // The host link: bandwidth and efficiency together, host memory only with them.
  c = cluster_preset("h100-80gb");
  c.host_efficiency = 0;
  EXPECT_THAT(input_error([&] { check_cluster(c, "f"); }),
              HasSubstr("host_bandwidth_bytes_per_s and host_efficiency go together"));
  c = cluster_preset("a100-80gb");  // no host memory given: optional
  EXPECT_NO_THROW(check_cluster(c, "f"));
  c.host_bandwidth_bytes_per_s = c.host_efficiency = 0;
  c.host_memory_bytes = 1e12;
  EXPECT_THAT(input_error([&] { check_cluster(c, "f"); }),
              HasSubstr("host_memory_bytes needs host_bandwidth_bytes_per_s and host_efficiency"));
  c = cluster_preset("gb200-nvl72");
  c.host_efficiency = 1.2;
  EXPECT_THAT(input_error([&] { check_cluster(c, "f"); }),
              HasSubstr("host_efficiency must be in (0, 1]"));
}

TEST(ClusterPresets, UnknownNameListsTheKnownOnes) {
  EXPECT_EQ(input_error([] { cluster_preset("v100"); }),
            "unknown GPU 'v100' (known: a100-40gb, a100-80gb, h100-80gb, h200, b200, gb200-nvl72)");
  EXPECT_THAT(input_error([] { cluster_preset("H100-80GB"); }), HasSubstr("unknown GPU"));
}

TEST(ClusterFile, GoldenCustomClusterParses) {
  const ClusterSpec c = read_cluster(kGolden + "/cluster_custom.json");
  EXPECT_EQ(c.name, "lab-l40s");
  EXPECT_EQ(c.gpus_per_node, 4);
  EXPECT_EQ(c.sms, 142);
  EXPECT_EQ(c.network.bandwidth_bytes_per_s, 12.5e9);  // keys in any order
  EXPECT_EQ(c.nvlink.allreduce_busbw_by_bytes.size(), 3u);
  EXPECT_EQ(parse_cluster(write_cluster(c), "written"), c);
}

TEST(ClusterFile, ExactRoundTripOfAwkwardValues) {
  ClusterSpec c = cluster_preset("h200");
  c.name = "caf\u00e9 \"cluster\"";
  c.description = "two\nlines";
  c.peak_flops = 1.0 / 3.0;
  c.memory_bytes = 1e300;
  c.kernel_launch_s = 5e-324;  // the smallest positive double
  c.gemm_efficiency = 1.0;
  c.network.latency_s = 0.1;
  c.network.allreduce_busbw_by_bytes = {{1.0, 1e-300}, {std::nextafter(1.0, 2.0), 7.0 / 3.0}};
  c.attention_by_seq = {{1.0, 1e-300, 0.1, 0.2, 1.0 / 3.0}, {1e300, 5e-324, 1.0 / 7.0, 0.3, 0.25}};
  const std::string text = write_cluster(c);
  EXPECT_EQ(parse_cluster(text, "written"), c);
  EXPECT_EQ(write_cluster(parse_cluster(text, "written")), text);
}

TEST(ClusterFile, MissingFileNamesThePath) {
  EXPECT_THAT(input_error([] { read_cluster("/nonexistent/cluster.json"); }),
              StartsWith("/nonexistent/cluster.json: cannot open"));
}

// A bad file: how to break the h100-80gb preset's canonical JSON, and a fragment of the message.
struct BadFile {
  const char* label;
  std::function<void(Json&)> edit;
  const char* message;
};

TEST(ClusterFile, EachBadFileIsOneLineNamingTheField) {
  const std::vector<BadFile> cases = {
      {"missing field", [](Json& j) { j.erase("peak_flops"); }, "missing key 'peak_flops'"},
      {"missing link field", [](Json& j) { j["nvlink"].erase("latency_s"); },
       "missing key 'latency_s' in nvlink"},
      {"missing link", [](Json& j) { j.erase("network"); }, "missing key 'network'"},
      {"missing name", [](Json& j) { j.erase("name"); }, "missing key 'name'"},
      {"missing format", [](Json& j) { j.erase("format"); }, "missing key 'format'"},
      {"zero", [](Json& j) { j["peak_flops"] = 0; }, "peak_flops must be a positive number, got 0"},
      {"zero link bandwidth", [](Json& j) { j["network"]["bandwidth_bytes_per_s"] = 0.0; },
       "network.bandwidth_bytes_per_s must be a positive number, got 0"},
      {"negative", [](Json& j) { j["kernel_launch_s"] = -2e-6; },
       "kernel_launch_s must be a positive number, got -2e-06"},
      {"negative latency", [](Json& j) { j["nvlink"]["latency_s"] = -1; },
       "nvlink.latency_s must be a positive number, got -1"},
      {"NaN as a string", [](Json& j) { j["memory_bytes"] = "NaN"; },
       "memory_bytes must be a number"},
      {"inf as a string", [](Json& j) { j["nvlink"]["bandwidth_bytes_per_s"] = "inf"; },
       "nvlink.bandwidth_bytes_per_s must be a number"},
      {"efficiency above 1", [](Json& j) { j["gemm_efficiency"] = 1.2; },
       "gemm_efficiency must be in (0, 1], got 1.2"},
      {"link efficiency above 1", [](Json& j) { j["nvlink"]["p2p_efficiency"] = 1.01; },
       "nvlink.p2p_efficiency must be in (0, 1], got 1.01"},
      {"zero efficiency",
       [](Json& j) {
         j.erase("attention_by_seq");
         j["flash_forward_efficiency"] = 0.5;
         j["flash_backward_efficiency"] = 0;
       },
       "flash_backward_efficiency must be in (0, 1], got 0"},
      {"both attention rates", [](Json& j) { j["flash_forward_efficiency"] = 0.5; },
       "attention_by_seq replaces flash_forward_efficiency and flash_backward_efficiency"},
      {"no attention rates", [](Json& j) { j.erase("attention_by_seq"); },
       "missing the attention core's rates: give flash_forward_efficiency and "
       "flash_backward_efficiency, or attention_by_seq"},
      {"short attention row",
       [](Json& j) {
         j["attention_by_seq"][0] = Json::array({512, 1e12});
       },
       "attention_by_seq[0] must be [seq, causal_forward, causal_backward, full_forward, "
       "full_backward] of numbers"},
      {"attention not an array", [](Json& j) { j["attention_by_seq"] = 3; },
       "attention_by_seq must be an array"},
      {"attention lengths decrease",
       [](Json& j) { std::swap(j["attention_by_seq"][0], j["attention_by_seq"][1]); },
       "attention_by_seq[1]: lengths must increase, got 512 after 1024"},
      {"attention above peak", [](Json& j) { j["attention_by_seq"][2][3] = 2e15; },
       "attention_by_seq[2]: a rate of 2000 TFLOP/s is above peak_flops (989.4 TFLOP/s)"},
      {"attention zero", [](Json& j) { j["attention_by_seq"][0][2] = 0; },
       "attention_by_seq[0] must be [seq, causal_forward, causal_backward, full_forward, "
       "full_backward] of positive numbers"},
      {"no SMs", [](Json& j) { j["sms"] = 0; }, "sms must be at least 1, got 0"},
      {"negative GPUs per node", [](Json& j) { j["gpus_per_node"] = -8; },
       "gpus_per_node must be at least 1, got -8"},
      {"fractional count", [](Json& j) { j["sms"] = 1.5; }, "sms must be an integer"},
      {"huge count", [](Json& j) { j["gpus_per_node"] = 1LL << 40; },
       "gpus_per_node is out of range"},
      {"unsorted busbw table",
       [](Json& j) {
         std::swap(j["nvlink"]["allreduce_busbw_by_bytes"][1],
                   j["nvlink"]["allreduce_busbw_by_bytes"][2]);
       },
       "nvlink.allreduce_busbw_by_bytes[2]: sizes must increase, got 262144 bytes after 1048576"},
      {"repeated busbw size",
       [](Json& j) { j["nvlink"]["allreduce_busbw_by_bytes"][1][0] = 32768; },
       "nvlink.allreduce_busbw_by_bytes[1]: sizes must increase"},
      {"zero busbw", [](Json& j) { j["nvlink"]["allreduce_busbw_by_bytes"][0][1] = 0; },
       "nvlink.allreduce_busbw_by_bytes[0] must be a pair of positive numbers"},
      {"busbw triple",
       [](Json& j) {
         j["nvlink"]["allreduce_busbw_by_bytes"][3] = {1, 2, 3};
       },
       "nvlink.allreduce_busbw_by_bytes[3] must be a [bytes, bytes_per_s] pair of numbers"},
      {"busbw not a list", [](Json& j) { j["network"]["allreduce_busbw_by_bytes"] = 5; },
       "network.allreduce_busbw_by_bytes must be an array"},
      {"wrong format tag", [](Json& j) { j["format"] = "paci.cluster/2"; },
       "unsupported format 'paci.cluster/2' (expected paci.cluster/1)"},
      {"another format", [](Json& j) { j["format"] = "paci.costmodel/1"; },
       "unsupported format 'paci.costmodel/1'"},
      {"format not a string", [](Json& j) { j["format"] = 1; }, "format must be a string"},
      {"unknown key", [](Json& j) { j["peak_flop"] = 1e15; }, "unknown key 'peak_flop' (known: "},
      {"unknown link key", [](Json& j) { j["network"]["bandwidth"] = 1e9; },
       "unknown key 'bandwidth' in network (known: bandwidth_bytes_per_s, "},
      {"link not an object", [](Json& j) { j["nvlink"] = 450e9; }, "nvlink must be an object"},
      {"empty name", [](Json& j) { j["name"] = ""; }, "name must not be empty"},
      {"name not a string", [](Json& j) { j["name"] = 7; }, "name must be a string"},
      {"sources not an object", [](Json& j) { j["sources"] = "datasheet"; },
       "sources must be an object"},
      {"source not a string",
       [](Json& j) {
         j["sources"] = {{"peak_flops", 1}};
       },
       "sources.peak_flops must be a string"},
      {"source of no field",
       [](Json& j) {
         j["sources"] = {{"nvlink.speed", "x"}};
       },
       "sources.nvlink.speed names no field"},
      {"top level not an object",
       [](Json& j) {
         j = Json::array({1, 2});
       },
       "the top level must be an object"},
  };
  const Json preset = Json::parse(write_cluster(cluster_preset("h100-80gb")));
  for (const BadFile& bad : cases) {
    SCOPED_TRACE(bad.label);
    Json j = preset;
    bad.edit(j);
    const std::string message = input_error([&] { parse_cluster(j.dump(2), "bad.json"); });
    EXPECT_THAT(message, StartsWith("bad.json: "));
    EXPECT_THAT(message, HasSubstr(bad.message));
    EXPECT_THAT(message, Not(HasSubstr("\n")));
  }
}

TEST(ClusterFile, MalformedTextSaysWhere) {
  const std::string text = write_cluster(cluster_preset("a100-80gb"));
  EXPECT_THAT(input_error([&] { parse_cluster(text.substr(0, text.size() / 2), "cut.json"); }),
              AllOf(StartsWith("cut.json: line "), HasSubstr("malformed JSON (truncated")));
  EXPECT_EQ(input_error([] { parse_cluster(" \n", "empty.json"); }),
            "empty.json: empty file, not a cluster");
  EXPECT_THAT(input_error([] { parse_cluster("{\"format\": NaN}", "nan.json"); }),
              AllOf(StartsWith("nan.json: line 1, column "), HasSubstr("malformed JSON")));
}

// check_cluster on a struct: every number, in every bad way, is refused naming its field.
TEST(ClusterCheck, SweepOfBadNumbers) {
  using Setter = std::function<void(ClusterSpec&, double)>;
  struct Field {
    std::string name;
    Setter set;
    bool fraction;
  };
  std::vector<Field> fields = {
      {"peak_flops", [](ClusterSpec& c, double v) { c.peak_flops = v; }, false},
      {"gemm_efficiency", [](ClusterSpec& c, double v) { c.gemm_efficiency = v; }, true},
      {"memory_bytes", [](ClusterSpec& c, double v) { c.memory_bytes = v; }, false},
      {"memory_bandwidth_bytes_per_s",
       [](ClusterSpec& c, double v) { c.memory_bandwidth_bytes_per_s = v; }, false},
      {"memory_efficiency", [](ClusterSpec& c, double v) { c.memory_efficiency = v; }, true},
      {"kernel_launch_s", [](ClusterSpec& c, double v) { c.kernel_launch_s = v; }, false},
      {"flash_forward_efficiency", [](ClusterSpec& c, double v) { c.flash_forward_efficiency = v; },
       true},
      {"flash_backward_efficiency",
       [](ClusterSpec& c, double v) { c.flash_backward_efficiency = v; }, true},
  };
  for (const auto& [name, member] :
       {std::pair{"nvlink", &ClusterSpec::nvlink}, std::pair{"network", &ClusterSpec::network}}) {
    const std::string prefix = std::string(name) + ".";
    LinkSpec ClusterSpec::*const link = member;
    fields.push_back({prefix + "bandwidth_bytes_per_s",
                      [link](ClusterSpec& c, double v) { (c.*link).bandwidth_bytes_per_s = v; },
                      false});
    fields.push_back({prefix + "efficiency",
                      [link](ClusterSpec& c, double v) { (c.*link).efficiency = v; }, true});
    fields.push_back({prefix + "p2p_efficiency",
                      [link](ClusterSpec& c, double v) { (c.*link).p2p_efficiency = v; }, true});
    fields.push_back({prefix + "latency_s",
                      [link](ClusterSpec& c, double v) { (c.*link).latency_s = v; }, false});
  }
  for (const Field& field : fields) {
    std::vector<double> bad = {0.0, -1.0, kNaN, kInf, -kInf};
    if (field.fraction) bad.push_back(1.0 + 1e-12);
    // The preset with the attention core as two shares instead of its table by length.
    const auto shares = [] {
      ClusterSpec c = cluster_preset("a100-80gb");
      c.attention_by_seq.clear();
      c.flash_forward_efficiency = c.flash_backward_efficiency = 0.55;
      return c;
    };
    for (const double value : bad) {
      SCOPED_TRACE(field.name + " = " + std::to_string(value));
      ClusterSpec c = shares();
      field.set(c, value);
      EXPECT_THAT(input_error([&] { check_cluster(c, "sweep"); }),
                  StartsWith("sweep: " + field.name + " must be "));
    }
    ClusterSpec c = shares();
    field.set(c, field.fraction ? 1.0 : 1e-300);  // the edge that is allowed
    EXPECT_NO_THROW(check_cluster(c, "sweep")) << field.name;
  }
}

TEST(ClusterCheck, BusbwTableValuesAreChecked) {
  for (const auto& [bytes, busbw] : std::vector<std::pair<double, double>>{
           {kNaN, 1e9}, {1e6, kNaN}, {kInf, 1e9}, {1e6, -1e9}, {-1.0, 1e9}, {1e6, kInf}}) {
    ClusterSpec c = cluster_preset("a100-80gb");
    c.network.allreduce_busbw_by_bytes = {{bytes, busbw}};
    EXPECT_THAT(input_error([&] { check_cluster(c, "t"); }),
                StartsWith("t: network.allreduce_busbw_by_bytes[0] must be a pair of positive"));
  }
}

}  // namespace
}  // namespace paci::plan
