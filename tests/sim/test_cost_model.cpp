// Tests of sim/cost_model.hpp and `paci costmodel`: exact JSON round trips and golden files, the
// uniform model's defaults, link and stage accessors, one clear InputError per kind of bad model,
// the analytic GPT numbers against the formulas of docs/costmodel.md, and partitioning.
#include "sim/cost_model.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "schedules/formats.hpp"
#include "schedules/generators.hpp"
#include "tests/cli/run.hpp"

namespace paci {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::ordered_json;
constexpr double kInf = std::numeric_limits<double>::infinity();
const std::string kGolden = PACI_GOLDEN_DIR;

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

void expect_input_error(const std::function<void()>& fn,
                        const std::vector<std::string>& fragments) {
  const std::string message = input_error(fn);
  for (const auto& fragment : fragments) EXPECT_THAT(message, HasSubstr(fragment));
}

UniformCosts golden_uniform_costs() {
  UniformCosts c;
  c.tf = 1.5e-3;
  c.tw = 1e-3;
  c.tu = 2.5e-4;
  c.latency_s = 1e-5;
  c.message_bytes = 1 << 20;
  c.activation_bytes = 1 << 24;
  c.weight_bytes = 123456789;
  c.tokens_per_microbatch = 2048;
  return c;
}

// The model of tests/golden/costmodel_uniform.json: 3 uniform stages, one link override.
CostModel golden_uniform() {
  CostModel m = uniform_cost_model(3, golden_uniform_costs());
  m.links.push_back({1, 2, {2e-5, 2.5e10}});
  return m;
}

GptShape tiny_preset() {
  return {4, 128, 4, 128, 256, 16, 4};
}  // paci costmodel --preset tiny
DeviceSpeed cli_default_device() {
  return {100e12, 2e12, {10e-6, 50e9}};
}

TEST(CostModelJson, ExactRoundTripOfAHandBuiltModel) {
  CostModel m;
  m.description = "measured \"today\"\non a café GPU";
  m.tokens_per_microbatch = 4096;
  m.blocking_sends = true;
  m.default_link = {1.0 / 3.0, kInf};
  m.links = {{0, 1, {0.1, 12.5e9}}, {1, 0, {0.0, kInf}}, {2, 3, {5e-324, 1e300}}};
  StageCost a{0.1, 0.2, 0.30000000000000004, 1e-300, 123456.789, INT64_MAX, 1, 2, 3, 4, 5};
  StageCost b{std::nextafter(1.0, 2.0), 2.0, 1.0, 1.0, 0.0, 0, 0, 0, 0, 0, 0};
  m.stages = {a, b};
  const std::string text = write_cost_model(m);
  EXPECT_THAT(text, HasSubstr("\"bandwidth_bytes_per_s\": \"inf\""));
  EXPECT_THAT(text, HasSubstr("\"blocking_sends\": true"));
  const CostModel back = parse_cost_model(text, "m.json");
  EXPECT_EQ(back, m);
  EXPECT_EQ(write_cost_model(back), text);
}

TEST(CostModelJson, GoldenUniformFileByteForByte) {
  const std::string golden = testing::slurp(kGolden + "/costmodel_uniform.json");
  EXPECT_EQ(write_cost_model(golden_uniform()), golden);
  EXPECT_EQ(parse_cost_model(golden, "costmodel_uniform.json"), golden_uniform());
  EXPECT_EQ(read_cost_model(kGolden + "/costmodel_uniform.json"), golden_uniform());
}

TEST(CostModelJson, ReadsAnyLayoutAndOptionalKeys) {
  Json j = Json::parse(write_cost_model(golden_uniform()));
  j.erase("description");
  j.erase("links");
  j.erase("tokens_per_microbatch");
  j["unknown_key"] = 1;             // ignored, for forward compatibility
  j["stages"][0]["forward_s"] = 2;  // an integer is a number too
  const CostModel m = parse_cost_model(j.dump(), "compact.json");
  EXPECT_EQ(m.description, "");
  EXPECT_TRUE(m.links.empty());
  EXPECT_EQ(m.tokens_per_microbatch, 0);
  EXPECT_FALSE(m.blocking_sends);  // absent: messages overlap compute
  EXPECT_EQ(m.stages[0].forward_s, 2.0);
  EXPECT_EQ(m.stages[1], golden_uniform().stages[1]);
}

TEST(CostModelJson, EachBadModelIsOneClearInputError) {
  const std::string good = write_cost_model(golden_uniform());
  const auto edited = [&good](const std::function<void(Json&)>& edit) {
    Json j = Json::parse(good);
    edit(j);
    return j.dump(2);
  };
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {good.substr(0, good.size() / 2), {"line ", "column ", "malformed JSON", "truncated"}},
      {"{\n  \"format\": \"paci.costmodel/1\",,\n}", {"line 2, column 32", "malformed JSON"}},
      {"", {"empty"}},
      {"[1, 2]", {"the top level must be an object"}},
      {edited([](Json& j) { j["format"] = "paci.costmodel/2"; }),
       {"unsupported format 'paci.costmodel/2' (expected paci.costmodel/1)"}},
      {edited([](Json& j) { j.erase("format"); }), {"missing key 'format'"}},
      {edited([](Json& j) { j.erase("stages"); }), {"missing key 'stages'"}},
      {edited([](Json& j) { j["stages"][1].erase("weight_bytes"); }),
       {"missing key 'weight_bytes' in stages[1]"}},
      {edited([](Json& j) { j["stages"][0]["forward_s"] = "fast"; }),
       {"stages[0].forward_s must be a number"}},
      {edited([](Json& j) { j["stages"][2]["optimizer_bytes"] = 1.5; }),
       {"stages[2].optimizer_bytes must be an integer"}},
      {edited([](Json& j) { j["stages"].erase(1); }), {"stages[1] is stage 2, expected stage 1"}},
      {edited([](Json& j) { j["stages"] = Json::array(); }), {"no stages"}},
      {edited([](Json& j) { j["stages"][1]["backward_s"] = -1.0; }),
       {"stages[1].backward_s is negative (-1)"}},
      {edited([](Json& j) { j["stages"][0]["activation_bytes"] = -5; }),
       {"stages[0].activation_bytes is negative (-5)"}},
      {std::string(good).replace(good.find(": 0.0015"), 8, ": 1e999"), {"number overflow"}},
      {edited([](Json& j) { j["default_link"]["bandwidth_bytes_per_s"] = 0; }),
       {"default_link.bandwidth_bytes_per_s must be positive"}},
      {edited([](Json& j) { j["links"][0]["bandwidth_bytes_per_s"] = -3.0; }),
       {"links[0].bandwidth_bytes_per_s must be positive"}},
      {edited([](Json& j) { j["default_link"]["bandwidth_bytes_per_s"] = "fast"; }),
       {"must be a number or \"inf\""}},
      {edited([](Json& j) { j["default_link"]["latency_s"] = -1e-6; }),
       {"default_link.latency_s is negative"}},
      {edited([](Json& j) { j["links"].push_back(j["links"][0]); }),
       {"links[1] overrides the link 1 -> 2 again"}},
      {edited([](Json& j) { j["blocking_sends"] = 1; }), {"blocking_sends must be true or false"}},
  };
  for (const auto& [text, fragments] : cases) {
    SCOPED_TRACE(text);
    const std::string message = input_error([&text] { parse_cost_model(text, "bad.json"); });
    EXPECT_THAT(message, StartsWith("bad.json: "));
    for (const auto& fragment : fragments) EXPECT_THAT(message, HasSubstr(fragment));
  }
}

TEST(CostModelJson, ReadsFilesAndNamesMissingOnes) {
  const std::string path = testing::temp_path("costmodel.json");
  write_file_atomic(path, write_cost_model(golden_uniform()));
  EXPECT_EQ(read_cost_model(path), golden_uniform());
  expect_input_error([] { read_cost_model("/nonexistent/cm.json"); },
                     {"/nonexistent/cm.json: cannot open"});
}

TEST(CostModelCheck, AgainstASchedule) {
  const Schedule four = generate_schedule("1f1b", 4, 8, 1);
  EXPECT_NO_THROW(check_cost_model(uniform_cost_model(4, {}), &four));
  expect_input_error([&] { check_cost_model(uniform_cost_model(3, {}), &four); },
                     {"cost model has 3 stages, the schedule has 4"});
  CostModel m = uniform_cost_model(4, {});
  m.links.push_back({3, 4, {}});
  expect_input_error([&] { check_cost_model(m, &four); },
                     {"links[0] names device 4, but the schedule has 4 devices"});
  m.links = {{3, 2, {1e-6, 1e9}}};
  EXPECT_NO_THROW(check_cost_model(m, &four));
}

TEST(CostModelUniform, DefaultsAndSplits) {
  for (std::int32_t stages = 1; stages <= 6; ++stages) {
    UniformCosts c;
    c.tf = 0.25 * stages;
    CostModel m = uniform_cost_model(stages, c);
    ASSERT_EQ(m.stages.size(), static_cast<std::size_t>(stages));
    for (const StageCost& s : m.stages) {
      EXPECT_EQ(s, m.stages[0]);
      EXPECT_EQ(s.backward_s, 2 * c.tf);
      EXPECT_EQ(s.input_grad_s, c.tf);
      EXPECT_EQ(s.weight_grad_s, c.tf);
      EXPECT_EQ(s.update_s, 0.0);
    }
    EXPECT_EQ(m.default_link.bandwidth_bytes_per_s, kInf);
    EXPECT_TRUE(m.links.empty());
  }
  const CostModel g = uniform_cost_model(2, golden_uniform_costs());
  const StageCost& s = g.stages[1];
  EXPECT_EQ(s.backward_s, 3e-3);
  EXPECT_EQ(s.weight_grad_s, 1e-3);
  EXPECT_EQ(s.input_grad_s, 3e-3 - 1e-3);
  EXPECT_EQ(s.update_s, 2.5e-4);
  EXPECT_EQ(s.activation_message_bytes, 1 << 20);
  EXPECT_EQ(s.gradient_message_bytes, 1 << 20);
  EXPECT_EQ(s.activation_bytes, 1 << 24);
  EXPECT_EQ(s.weight_bytes, 123456789);
  EXPECT_EQ(s.gradient_bytes, 123456789);
  EXPECT_EQ(s.optimizer_bytes, 2 * 123456789);
  EXPECT_EQ(s.static_bytes(), 4 * 123456789);
  EXPECT_EQ(g.default_link.latency_s, 1e-5);
  EXPECT_EQ(g.tokens_per_microbatch, 2048);

  UniformCosts explicit_tb;
  explicit_tb.tf = 1.0;
  explicit_tb.tb = 3.0;
  EXPECT_EQ(uniform_cost_model(1, explicit_tb).stages[0].input_grad_s, 1.5);
}

TEST(CostModelUniform, BadValues) {
  const auto with = [](const std::function<void(UniformCosts&)>& edit) {
    UniformCosts c;
    edit(c);
    return [c] { uniform_cost_model(2, c); };
  };
  expect_input_error(with([](UniformCosts& c) { c.tf = -1; }), {"--tf", "-1"});
  expect_input_error(with([](UniformCosts& c) { c.tb = std::nan(""); }), {"--tb", "nan"});
  expect_input_error(with([](UniformCosts& c) { c.tw = 3.0; }), {"--tw (3 s) exceeds", "(2 s)"});
  expect_input_error(with([](UniformCosts& c) { c.tu = kInf; }), {"--tu"});
  expect_input_error(with([](UniformCosts& c) { c.latency_s = -1e-6; }), {"--latency"});
  expect_input_error(with([](UniformCosts& c) { c.bandwidth_bytes_per_s = 0; }), {"--bandwidth"});
  expect_input_error(with([](UniformCosts& c) { c.bandwidth_bytes_per_s = std::nan(""); }),
                     {"--bandwidth"});
  expect_input_error(with([](UniformCosts& c) { c.message_bytes = -1; }), {"--message-bytes"});
  expect_input_error(with([](UniformCosts& c) { c.weight_bytes = -1; }), {"--weight-bytes"});
  expect_input_error([] { uniform_cost_model(0, {}); }, {"at least one stage"});
}

TEST(CostModelLink, TransferTimeAndOverrides) {
  const LinkCost finite{1e-5, 1e9};
  EXPECT_DOUBLE_EQ(finite.transfer_s(2'000'000), 1e-5 + 2e-3);
  EXPECT_EQ(finite.transfer_s(0), 1e-5);
  const LinkCost free{2e-6, kInf};
  EXPECT_EQ(free.transfer_s(1'000'000'000), 2e-6);
  CostModel m = uniform_cost_model(3, {});
  m.default_link = finite;
  m.links.push_back({1, 2, free});
  EXPECT_EQ(m.link(1, 2), free);
  EXPECT_EQ(m.link(2, 1), finite);
  EXPECT_EQ(m.link(0, 1), finite);
}

TEST(CostModelStage, DurationOfEachKind) {
  const StageCost s{1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(s.duration_s(ActionKind::F), 1);
  EXPECT_EQ(s.duration_s(ActionKind::B), 2);
  EXPECT_EQ(s.duration_s(ActionKind::I), 3);
  EXPECT_EQ(s.duration_s(ActionKind::W), 4);
  EXPECT_EQ(s.duration_s(ActionKind::U), 5);
}

// The formulas of docs/costmodel.md, written out again here for a shape small enough to check.
TEST(CostModelGpt, TinyShapeAgainstHandComputedFormulas) {
  for (const std::int32_t dtype : {2, 4}) {
    SCOPED_TRACE(dtype);
    const GptShape g{2, 8, 2, 4, 16, 2, dtype};
    const DeviceSpeed dev{1000.0, 100.0, {1e-3, 1e6}};
    const CostModel m = gpt_cost_model(g, dev, 2);
    ASSERT_EQ(m.stages.size(), 2u);
    const double b = 2, t = 4, d = 8, h = 2, v = 16, s = dtype;
    const double layer_flops = 24 * b * t * d * d + 4 * b * t * t * d;
    EXPECT_EQ(layer_flops, 13312);
    const double head_flops = 2 * b * t * d * v;
    EXPECT_EQ(head_flops, 2048);
    const double flops[2] = {layer_flops, layer_flops + head_flops};
    const double layer_params = 12 * d * d + 13 * d;  // 872
    const double params[2] = {layer_params + v * d + t * d, layer_params + v * d + 2 * d};
    EXPECT_EQ(params[0], 1032);
    EXPECT_EQ(params[1], 1016);
    const double layer_act = b * t * d * (16 * s + 2) + b * h * t * t * (2 * s + 1);
    if (dtype == 2) {
      EXPECT_EQ(layer_act, b * t * d * (34 + 5 * h * t / d));  // Korthikanti et al., 16-bit
    }
    const double act[2] = {layer_act + b * t * d,
                           layer_act + 2 * b * t * d * s + b * t * v * (s + 4)};
    for (int i = 0; i < 2; ++i) {
      const StageCost& c = m.stages[static_cast<std::size_t>(i)];
      EXPECT_DOUBLE_EQ(c.forward_s, flops[i] / 1000.0);
      EXPECT_DOUBLE_EQ(c.backward_s, 2 * flops[i] / 1000.0);
      EXPECT_DOUBLE_EQ(c.input_grad_s, flops[i] / 1000.0);
      EXPECT_DOUBLE_EQ(c.weight_grad_s, flops[i] / 1000.0);
      EXPECT_EQ(c.input_grad_s + c.weight_grad_s, c.backward_s);
      EXPECT_DOUBLE_EQ(c.update_s, params[i] * (3 * s + 16) / 100.0);
      EXPECT_EQ(c.weight_bytes, params[i] * s);
      EXPECT_EQ(c.gradient_bytes, params[i] * s);
      EXPECT_EQ(c.optimizer_bytes, params[i] * 8);
      EXPECT_EQ(c.activation_bytes, act[i]);
    }
    EXPECT_EQ(m.stages[0].activation_message_bytes, b * t * d * s);
    EXPECT_EQ(m.stages[0].gradient_message_bytes, 0);
    EXPECT_EQ(m.stages[1].activation_message_bytes, 0);
    EXPECT_EQ(m.stages[1].gradient_message_bytes, b * t * d * s);
    EXPECT_EQ(m.tokens_per_microbatch, 8);
    EXPECT_EQ(m.default_link, dev.link);
    EXPECT_THAT(m.description, HasSubstr("gpt L=2 d=8 heads=2 T=4 V=16 b=2"));

    // One stage holds everything: embeddings, both blocks, the head; it sends nothing.
    const StageCost one = gpt_cost_model(g, dev, 1).stages[0];
    EXPECT_EQ(one.weight_bytes, (2 * layer_params + v * d + t * d + v * d + 2 * d) * s);
    EXPECT_DOUBLE_EQ(one.forward_s, (2 * layer_flops + head_flops) / 1000.0);
    EXPECT_EQ(one.activation_message_bytes + one.gradient_message_bytes, 0);
  }
}

TEST(CostModelGpt, PartitionErrors) {
  const GptShape g{4, 8, 2, 4, 16, 1, 2};
  const DeviceSpeed dev{1e12, 1e12, {}};
  expect_input_error([&] { gpt_cost_model(g, dev, 8); }, {"8 stages but only 4 layers"});
  expect_input_error(
      [&] {
        gpt_cost_model(g, dev, 2, {2, 3});
      },
      {"the partition sums to 5 layers, the model has 4"});
  expect_input_error([&] { gpt_cost_model(g, dev, 4, {2, 2, 0}); }, {"has 3 entries for 4"});
  expect_input_error([&] { gpt_cost_model(g, dev, 3, {2, 2, 0}); }, {"stage 2 is 0"});
  expect_input_error([&] { gpt_cost_model({4, 9, 2, 4, 16, 1, 2}, dev, 2); }, {"not divisible"});
  expect_input_error([&] { gpt_cost_model({4, 8, 2, 4, 16, 1, 3}, dev, 2); }, {"dtype_bytes"});
  expect_input_error([&] { gpt_cost_model({0, 8, 2, 4, 16, 1, 2}, dev, 2); }, {"layers"});
  expect_input_error([&] { gpt_cost_model(g, {0, 1e12, {}}, 2); }, {"FLOP/s"});
  expect_input_error([&] { gpt_cost_model(g, {1e12, 1e12, {0, 0}}, 2); }, {"link bandwidth"});
  EXPECT_THAT(gpt_cost_model(g, dev, 2, {3, 1}).description, HasSubstr("partition=3,1"));
}

// Largest stage forward time of a model.
double max_forward_s(const CostModel& m) {
  double out = 0;
  for (const auto& s : m.stages) out = std::max(out, s.forward_s);
  return out;
}

// Calls fn with every composition of `layers` into `stages` parts >= 1.
void for_each_partition(std::int32_t layers, std::int32_t stages,
                        const std::function<void(const std::vector<std::int32_t>&)>& fn,
                        std::vector<std::int32_t> prefix = {}) {
  if (stages == 1) {
    prefix.push_back(layers);
    fn(prefix);
    return;
  }
  for (std::int32_t n = 1; n <= layers - (stages - 1); ++n) {
    prefix.push_back(n);
    for_each_partition(layers - n, stages - 1, fn, prefix);
    prefix.pop_back();
  }
}

TEST(CostModelGpt, BalancedPartitionIsOptimalAndLightensTheHeadStage) {
  const DeviceSpeed dev{1e12, 1e12, {}};
  for (const std::int32_t vocab : {16, 4096, 50000})
    for (std::int32_t layers = 1; layers <= 9; ++layers)
      for (std::int32_t stages = 1; stages <= std::min(layers, 5); ++stages) {
        SCOPED_TRACE(::testing::Message() << "V=" << vocab << " L=" << layers << " P=" << stages);
        const GptShape g{layers, 64, 4, 64, vocab, 1, 2};
        const std::vector<std::int32_t> p = balanced_partition(g, stages);
        const double best = max_forward_s(gpt_cost_model(g, dev, stages));
        EXPECT_EQ(gpt_cost_model(g, dev, stages, p), gpt_cost_model(g, dev, stages));
        for_each_partition(layers, stages, [&](const std::vector<std::int32_t>& other) {
          EXPECT_LE(best, max_forward_s(gpt_cost_model(g, dev, stages, other)));
        });
      }
  const GptShape small_vocab{8, 64, 4, 64, 16, 1, 2};
  EXPECT_EQ(balanced_partition(small_vocab, 4), (std::vector<std::int32_t>{2, 2, 2, 2}));
  const GptShape large_vocab{8, 64, 4, 64, 50000, 1, 2};
  EXPECT_EQ(balanced_partition(large_vocab, 4), (std::vector<std::int32_t>{2, 2, 3, 1}));
  const GptShape medium{24, 1024, 16, 1024, 50257, 1, 2};
  const auto p = balanced_partition(medium, 8);
  EXPECT_LT(p.back(), *std::min_element(p.begin(), p.end() - 1));
}

TEST(CostModelCli, WritesTheGoldenTinyModel) {
  const std::string golden = testing::slurp(kGolden + "/costmodel_gpt_tiny.json");
  EXPECT_EQ(write_cost_model(gpt_cost_model(tiny_preset(), cli_default_device(), 2)), golden);
  const auto r = testing::run_paci("costmodel --preset tiny --stages 2");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, golden);
  EXPECT_EQ(r.err, "");
  const std::string path = testing::temp_path("tiny_costmodel.json");
  const auto to_file = testing::run_paci("costmodel --preset tiny -p 2 -o " + path);
  EXPECT_EQ(to_file.status, 0) << to_file.err;
  EXPECT_EQ(to_file.out, "");
  EXPECT_EQ(testing::slurp(path), golden);
}

TEST(CostModelCli, FlagsOverrideThePreset) {
  const auto r = testing::run_paci(
      "costmodel --preset tiny --layers 6 --dtype bf16 --batch 2 -p 3 --partition 1,2,3 "
      "--flops 4e14 --mem-bandwidth 3.3e12 --latency 2e-6 --bandwidth inf");
  ASSERT_EQ(r.status, 0) << r.err;
  GptShape g = tiny_preset();
  g.layers = 6;
  g.dtype_bytes = 2;
  g.microbatch_size = 2;
  EXPECT_EQ(parse_cost_model(r.out, "stdout"),
            gpt_cost_model(g, {4e14, 3.3e12, {2e-6, kInf}}, 3, {1, 2, 3}));
  const auto shape = testing::run_paci(
      "costmodel --layers 2 --d-model 8 --heads 2 --seq-len 4 "
      "--vocab 16 -p 2");
  ASSERT_EQ(shape.status, 0) << shape.err;
  EXPECT_EQ(parse_cost_model(shape.out, "stdout"),
            gpt_cost_model({2, 8, 2, 4, 16, 1, 2}, cli_default_device(), 2));
}

TEST(CostModelCli, BadInputIsOneLineWithExitTwo) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--preset tiny -p 8", "8 stages but only 4 layers"},
      {"--preset tiny -p 2 --partition 3,2", "sums to 5 layers, the model has 4"},
      {"--preset tiny -p 2 --partition 3,x", "--partition '3,x': 'x' is not a whole number from 1"},
      {"--preset tiny -p 2 --dtype fp8", "unknown --dtype 'fp8'"},
      {"--preset huge -p 2", "unknown --preset 'huge'"},
      {"--preset tiny -p 2 --flops nan", "--flops"},
      {"--preset tiny -p 2 --bandwidth=0", "--bandwidth"},
      {"--layers 4 -p 2", "missing --d-model, --heads, --seq-len, --vocab"},
      {"--preset tiny", "--stages"},
  };
  for (const auto& [args, fragment] : cases) {
    SCOPED_TRACE(args);
    const auto r = testing::run_paci("costmodel " + args);
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_THAT(r.err, StartsWith("paci costmodel: error: "));
    EXPECT_THAT(r.err, HasSubstr(fragment));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
  }
}

}  // namespace
}  // namespace paci
