// paci train and paci calibrate end to end on a small corpus: the report's versions equal
// paci analyze's, the measured trace lines up with the simulated one, resuming is bitwise, and
// bad input or a failing worker gives one clear line and the right exit status.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "model/checkpoint_state.hpp"
#include "schedules/generators.hpp"
#include "tests/cli/run.hpp"
#include "traces/chrome_trace.hpp"

namespace paci {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_paci;
using testing::slurp;
using testing::temp_path;
using testing::write_text;

const char* const kTiny = " --layers 4 --heads 2 --d-model 32 --seq-len 16 --batch 2 ";

const std::string& data_flags() {
  return testing::corpus_flags();
}

std::vector<nlohmann::json> jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(path));
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(CliTrain, ReportVersionsEqualAnalysisAndTracesLineUp) {
  const std::string schedule = temp_path("train_paci.json");
  ASSERT_EQ(run_paci("schedule -k paci -p 4 -m 2 -n 3 -o " + schedule).status, 0);
  const std::string report = temp_path("train_report.json"), trace = temp_path("train_trace.json");
  const auto r = run_paci("train --schedule " + schedule + kTiny + data_flags() +
                          "--quiet --report " + report + " --trace " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto measured = nlohmann::json::parse(slurp(report));
  EXPECT_EQ(measured["source"], "measured");
  EXPECT_EQ(measured["loss"].size(), 3u);
  const auto analysis = nlohmann::json::parse(run_paci("analyze " + schedule + " --json -").out);
  EXPECT_EQ(measured["versions"], analysis["versions"]);
  for (std::size_t s = 0; s < 4; ++s) {
    EXPECT_EQ(measured["stages"][s]["max_staleness"], analysis["stages"][s]["max_staleness"]);
    EXPECT_EQ(measured["stages"][s]["peak_activations"], analysis["stages"][s]["peak_activations"]);
  }
  // The simulated trace of the same file has the same lanes with the same slices in order.
  const std::string sim_trace = temp_path("train_sim_trace.json");
  ASSERT_EQ(run_paci("simulate " + schedule + " --quiet --trace " + sim_trace).status, 0);
  auto lanes = [](const std::string& text) {
    EXPECT_EQ(check_trace_text(text), std::vector<std::string>{});
    std::map<std::pair<int, int>, std::vector<std::string>> by_lane;
    const auto parsed = nlohmann::json::parse(text);  // outlives the loop over its member
    for (const auto& e : parsed["traceEvents"])
      if (e["ph"] == "X" && e["tid"] == 0) by_lane[{e["pid"], e["tid"]}].push_back(e["name"]);
    return by_lane;
  };
  EXPECT_EQ(lanes(slurp(trace)), lanes(slurp(sim_trace)));
}

TEST(CliTrain, ResumeContinuesBitwise) {
  const std::string common = std::string(" -k 1f1b -p 2 -m 2") + kTiny + data_flags() + " --quiet ";
  const std::string full = temp_path("full.jsonl"), first = temp_path("first.jsonl"),
                    second = temp_path("second.jsonl"), state = temp_path("ckpt.state");
  ASSERT_EQ(run_paci("train" + common + "--steps 4 --metrics " + full).status, 0);
  auto r = run_paci("train" + common + "--steps 4 --stop-after 2 --metrics " + first + " --save " +
                    state);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_paci("train" + common + "--steps 4 --resume " + state + " --metrics " + second);
  ASSERT_EQ(r.status, 0) << r.err;
  auto losses = [](const std::vector<nlohmann::json>& lines) {
    std::vector<double> out;
    for (const auto& j : lines)
      if (j.contains("loss")) out.push_back(j["loss"].get<double>());
    return out;
  };
  std::vector<double> resumed = losses(jsonl(first));
  const std::vector<double> rest = losses(jsonl(second));
  resumed.insert(resumed.end(), rest.begin(), rest.end());
  EXPECT_EQ(resumed, losses(jsonl(full)));               // bitwise: the same doubles
  ASSERT_FALSE(jsonl(second).front().contains("step"));  // the head line: {"run", "blas"}
  ASSERT_EQ(jsonl(second).at(1)["step"], 3);
  // Validation points stay on global multiples of --val-every across a resume, and the data
  // position carries on from the checkpoint.
  const std::string a = temp_path("val_a.jsonl"), b = temp_path("val_b.jsonl"),
                    state3 = temp_path("ckpt3.state");
  ASSERT_EQ(run_paci("train" + common + "--steps 6 --stop-after 3 --val-every 2 --metrics " + a +
                     " --save " + state3)
                .status,
            0);
  ASSERT_EQ(
      run_paci("train" + common + "--steps 6 --resume " + state3 + " --val-every 2 --metrics " + b)
          .status,
      0);
  auto val_steps = [](const std::vector<nlohmann::json>& lines) {
    std::vector<int> out;
    for (const auto& j : lines)
      if (j.contains("val_loss")) out.push_back(j["step"]);
    return out;
  };
  EXPECT_EQ(val_steps(jsonl(a)), (std::vector<int>{2, 3}));
  EXPECT_EQ(val_steps(jsonl(b)), (std::vector<int>{4, 6}));
  // Another micro-batch shape would silently move the data position: refused.
  r = run_paci("train -k 1f1b -p 2 -m 2 --layers 4 --heads 2 --d-model 32 --seq-len 16 --batch 3" +
               data_flags() + "--quiet --steps 6 --resume " + state3);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("batch"));
  // A checkpoint whose metadata names the batch in the wrong type: one line, exit 2 (it escaped
  // as nlohmann's type_error, exit 1, before).
  model::TrainingState saved = model::load_state(state3);
  saved.metadata.extra["batch"] = "three";
  std::vector<model::StageStateView> views;
  for (const auto& stage : saved.stages) views.push_back(stage.view());
  const std::string odd = temp_path("odd_extra.state");
  model::save_state(odd, saved.metadata, views);
  r = run_paci("train" + common + "--steps 6 --resume " + odd);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("extra.batch is \"three\", expected a whole number"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// Naming your own --data without --val-data trains without validation and says so once (not
// the default corpus's validation file); --quiet silences the note.
// DualPipe's two copies: a checkpoint holds the first copy's stages (both are the same), taken at
// the end or every step, and a run resumed from it continues bit for bit.
TEST(CliTrain, DualPipeSavesOneCopyAndResumesBitwise) {
  const std::string common =
      std::string(" -k dualpipe -p 2 -m 4") + kTiny + data_flags() + " --quiet ";
  const std::string full = temp_path("dp_full.jsonl"), first = temp_path("dp_first.jsonl"),
                    second = temp_path("dp_second.jsonl"), state = temp_path("dp.state");
  ASSERT_EQ(run_paci("train" + common + "--steps 4 --metrics " + full).status, 0);
  auto r = run_paci("train" + common + "--steps 4 --stop-after 2 --save-every 1 --metrics " +
                    first + " --save " + state);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_paci("train" + common + "--steps 4 --resume " + state + " --metrics " + second);
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<double> resumed, whole;
  for (const auto* lines : {&first, &second})
    for (const auto& j : jsonl(*lines))
      if (j.contains("loss")) resumed.push_back(j["loss"].get<double>());
  for (const auto& j : jsonl(full))
    if (j.contains("loss")) whole.push_back(j["loss"].get<double>());
  ASSERT_EQ(whole.size(), 4u);
  EXPECT_EQ(resumed, whole);
  // The state of one model: the first copy's two stages, the blocks once.
  const model::TrainingState saved = model::load_state(state);
  ASSERT_EQ(saved.stages.size(), 2u);
  EXPECT_EQ(saved.stages[0].range.first_layer, 0u);
  EXPECT_EQ(saved.stages[1].range.end_layer(), saved.metadata.config.layers);
}

TEST(CliTrain, OwnDataWithoutValidationDataSkipsValidationAndSaysSo) {
  data_flags();  // tokenizes the corpus
  const std::string report = temp_path("own_data_report.json");
  const std::string base = "train -k 1f1b -p 2 -m 2 -n 2" + std::string(kTiny) + "--data " +
                           temp_path("corpus_train.bin") + " --report " + report;
  const auto r = run_paci(base);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("without --val-data: no validation loss"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;  // the note, the summary
  EXPECT_EQ(nlohmann::json::parse(slurp(report))["val_loss"].size(), 0u);
  const auto quiet = run_paci(base + " --quiet");
  ASSERT_EQ(quiet.status, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  // With both named, validation runs.
  ASSERT_EQ(run_paci("train -k 1f1b -p 2 -m 2 -n 2" + std::string(kTiny) + data_flags() +
                     "--quiet --report " + report)
                .status,
            0);
  EXPECT_EQ(nlohmann::json::parse(slurp(report))["val_loss"].size(), 1u);
}

TEST(CliTrain, CalibrateWritesACostModelThatSimulates) {
  const std::string cost = temp_path("calibrated.json");
  auto r =
      run_paci("calibrate -p 2 --repeats 2" + std::string(kTiny) + data_flags() + "-o " + cost);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(cost));
  EXPECT_EQ(j["stages"].size(), 2u);
  EXPECT_GT(j["stages"][0]["forward_s"].get<double>(), 0.0);
  EXPECT_GT(j["stages"][1]["backward_s"].get<double>(), 0.0);
  EXPECT_EQ(j["stages"][1]["activation_message_bytes"], 0);
  EXPECT_EQ(j["stages"][0]["gradient_message_bytes"], 0);
  EXPECT_EQ(j["stages"][0]["activation_message_bytes"], 2 * 16 * 32 * 4);
  r = run_paci("compare -p 2 -m 4 -n 4 --cost " + cost);
  EXPECT_EQ(r.status, 0) << r.err;
}

// The per-layer calibration, then paci plan on it: plans ranked, the best one's files replay, the
// constraints and the flags that do not apply.
TEST(CliTrain, PerLayerCalibrationPlansRunsOfThisMachine) {
  const std::string layers = temp_path("layers.json"), plans = temp_path("plans.json");
  const std::string dir = temp_path("cpu_plan");
  auto r = run_paci("calibrate --per-layer --repeats 2 --max-rounds 2" + std::string(kTiny) +
                    data_flags() + "-o " + layers);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto c = nlohmann::json::parse(slurp(layers));
  EXPECT_EQ(c["format"], "paci.layers/1");
  EXPECT_EQ(c["model"]["layers"], 4);
  EXPECT_GT(c["threads"][0]["layer"]["forward_s"].get<double>(), 0.0);
  r = run_paci("plan --cluster " + layers + " --top 3 --json " + plans + " -o " + dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("run the best: paci train --kind "));
  const auto j = nlohmann::json::parse(slurp(plans));
  ASSERT_EQ(j["plans"].size(), 3u);
  EXPECT_EQ(j["search"]["pruned"], 0);
  EXPECT_EQ(j["search"]["simulated"].get<int>() + j["rejected"]["invalid"].get<int>(),
            j["search"]["configurations"].get<int>());
  EXPECT_LE(j["plans"][0]["step_s"].get<double>(), j["plans"][1]["step_s"].get<double>());
  r = run_paci("simulate " + dir + "/schedule.json --cost " + dir + "/costmodel.json --json " +
               temp_path("replayed.json"));
  EXPECT_EQ(r.status, 0) << r.err;
  // Fixed to synchronous schedules on two stage threads: no plan is stale.
  r = run_paci("plan --cluster " + layers + " --pp 2 --max-staleness 0 --json " + plans);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto sync = nlohmann::json::parse(slurp(plans));
  for (const auto& p : sync["plans"]) {
    EXPECT_EQ(p["max_staleness"], 0);
    EXPECT_EQ(p["pp"], 2);
  }
  testing::expect_refused("plan --cluster " + layers + " --gpus 8", "does not apply to a CPU plan");
  testing::expect_refused("plan --cluster " + layers + " --global-batch 3",
                          "multiple of the calibrated micro-batch");
  testing::expect_refused("calibrate --per-layer -p 2" + std::string(kTiny) + data_flags(),
                          "--stages does not apply");
}

TEST(CliTrain, BadInputIsOneLineExitTwo) {
  const std::string shape = " --heads 2 --d-model 32 --batch 2 ";
  const std::string base = "train -k 1f1b -m 2 -n 1 --quiet" + shape;
  const std::string sized = " -p 2 --layers 4 --seq-len 16 ";
  auto expect_bad = [&](const std::string& args, const std::string& fragment) {
    testing::expect_refused(base + args, fragment);
  };
  expect_bad(sized + " --data " + temp_path("nope.bin"), "cannot open");
  const std::string empty = temp_path("empty.bin");
  write_text(empty, "");
  expect_bad(sized + " --val-data none --data " + empty, "empty.bin");
  const std::string magic = temp_path("magic.bin");
  write_text(magic, std::string(1024 + 64, '\x01'));
  expect_bad(sized + " --val-data none --data " + magic, "magic");
  expect_bad(data_flags() + " -p 5 --layers 4 --seq-len 16", "5 stages but only 4");
  expect_bad(data_flags() + sized + " --partition 3,3", "adds up to 6");
  expect_bad(data_flags() + sized + " --lr-decay linear", "--lr-decay");
  expect_bad(data_flags() + sized + " --threads -1", "--threads");
  expect_bad(data_flags() + " -p 2 --layers 4 --seq-len -1", "--seq-len");
  // An llm.c model file: exported from a run, then a sequence length beyond its positions.
  const std::string model = temp_path("model.llmc.bin");
  ASSERT_EQ(run_paci(base + sized + data_flags() + " --export-llmc " + model).status, 0);
  expect_bad(data_flags() + " -p 2 --init " + model + " --seq-len 32", "longer than the model");
  expect_bad(data_flags() + " -p 2 --seq-len 16 --init " + model + " --layers 2", "4");
  std::string bytes = slurp(model);
  bytes[4] = 5;  // version 5
  const std::string wrong = temp_path("model_v5.bin");
  write_text(wrong, bytes);
  expect_bad(data_flags() + " -p 2 --seq-len 16 --init " + wrong, "version");
  const auto ok = run_paci(base + " -p 2 --seq-len 16" + data_flags() + " --init " + model);
  EXPECT_EQ(ok.status, 0) << ok.err;
  // Shape and optimizer mistakes read as the user's, without the model library's file and line.
  for (const auto& [args, fragment] :
       {std::pair<std::string, std::string>{" --heads 3", "not a multiple of heads 3"},
        {" --lr -1", "--lr must be a finite number >= 0, got -1"}}) {
    const auto r = run_paci("train -k 1f1b -n 1 --quiet --seq-len 16" + data_flags() + args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(fragment)) << args;
    EXPECT_THAT(r.err, Not(HasSubstr("check failed"))) << args;
  }
  // A model no machine of ours holds, dense or a mixture of experts: refused before anything is
  // allocated (a petabyte's worth), not after the machine has swapped.
  expect_bad(data_flags() + sized + " --vocab 2000000000", "needs at least");
  expect_bad(data_flags() + sized + " --experts 100000000", "needs at least");
  // Backend flags.
  expect_bad(data_flags() + sized + " --device tpu", "--device must be cpu or cuda");
  expect_bad(data_flags() + sized + " --precision bf16", "needs --device cuda");
  expect_bad(data_flags() + sized + " --device cuda --sequential", "CPU executor");
  // Expert parallelism is paci train's alone; a dense checkpoint has no experts to split.
  for (const char* command : {"calibrate --stages 2", "fidelity --stages 2"})
    testing::expect_refused(std::string(command) + " --layers 4 --seq-len 16" + shape +
                                data_flags() + " --experts 4 --ep 2",
                            "--ep is paci train's");
  const std::string dense = temp_path("dense.state");
  ASSERT_EQ(run_paci(base + sized + data_flags() + " --save " + dense).status, 0);
  testing::expect_refused("train -k 1f1b -p 2 -m 2 -n 2 --quiet --batch 2 --seq-len 16" +
                              data_flags() + " --resume " + dense + " --ep 2",
                          "dense.state holds a dense model");
}

// One process per GPU: a launch whose process count is not the schedule's device count is refused
// in one line before any process waits for another (a build with NCCL); a build without the CUDA
// backend says that instead; on CPUs, a launch MPI does not see (no mpirun) is refused, and a
// malformed launcher variable is named.
TEST(CliTrain, AMultiProcessLaunchNeedsOneProcessPerDevice) {
  const auto version = run_paci("--version");
  ASSERT_EQ(version.status, 0);
  ASSERT_THAT(version.out, HasSubstr("backends: cpu"));
  const bool cuda = version.out.find("cuda") != std::string::npos;
  const bool nccl = version.out.find("nccl") != std::string::npos;
  if (cuda && !nccl) GTEST_SKIP() << "built with CUDA but without NCCL: no multi-process launch";
  ::setenv("PACI_RANK", "0", 1);
  ::setenv("PACI_WORLD_SIZE", "3", 1);
  const std::string args =
      std::string("train -k paci -p 2 -m 2 -n 1 --quiet") + kTiny + data_flags();
  const auto r = run_paci(args + " --device cuda");
  // On CPUs, processes talk over MPI: variables that say 3 processes where MPI sees 1 (no
  // mpirun) are a mistake, named in one line. This paci starts MPI alone in a process whose leaks
  // are checked under ASan: Open MPI's leaks from MPI_Init are suppressed by library name, which
  // needs whole stacks (docs/reliability.md); the variable is ignored in a build without ASan.
  const std::string whole_stacks = "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:fast_unwind_on_malloc=0\" ";
  const auto cpu = testing::run_shell(whole_stacks + PACI_BINARY + " " + args);
  ::setenv("PACI_WORLD_SIZE", "three", 1);
  const auto malformed = run_paci(args);
  ::unsetenv("PACI_RANK");
  ::unsetenv("PACI_WORLD_SIZE");
  EXPECT_EQ(cpu.status, 2) << cpu.err;
  EXPECT_THAT(cpu.err, HasSubstr("process 0 of 3 by a launcher (PACI_RANK"));
  EXPECT_EQ(std::count(cpu.err.begin(), cpu.err.end(), '\n'), 1) << cpu.err;
  EXPECT_THAT(cpu.err, version.out.find("mpi (") != std::string::npos
                           ? HasSubstr("but MPI sees 1 process: start paci train --device cpu "
                                       "with mpirun")
                           : HasSubstr("this paci was built without MPI"));
  EXPECT_EQ(malformed.status, 2) << malformed.err;
  EXPECT_THAT(malformed.err, HasSubstr("PACI_WORLD_SIZE"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(nccl ? "the launch has 3 processes but the schedule has 2 devices"
                                    : "built without the CUDA backend"));
}

// The flushed schedules beyond the first five train exactly like one device accumulating the same
// micro-batches, and their versions are the analysis': Megatron's interleaved 1F1B (two chunks per
// device, 4 stages on 2 devices), Zero Bubble's zb-h1 and zb-h2, whose backward is split into
// I and W (the weight gradients added later, in the order the schedule says), and the V-shaped
// zb-v and dualpipev (whose overlapped pairs run back to back on a CPU).
TEST(CliTrain, InterleavedAndZeroBubbleTrainLikeOneDevice) {
  const std::string one = temp_path("one_device_r.json");
  auto r = run_paci("train -k gpipe -p 1 -m 4 -n 3 --quiet" + std::string(kTiny) + data_flags() +
                    "--report " + one);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto expected = nlohmann::json::parse(slurp(one));
  for (const std::string kind : {"interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipev"}) {
    const std::string schedule = temp_path(kind + ".json"), report = temp_path(kind + "_r.json");
    const bool two_per_device = kind == "interleaved" || v_shaped(kind);
    ASSERT_EQ(run_paci("schedule -k " + kind + " -p " + (two_per_device ? "2" : "4") +
                       " -m 4 -n 3 -o " + schedule)
                  .status,
              0);
    r = run_paci("train --schedule " + schedule + " --quiet" + kTiny + data_flags() + "--report " +
                 report);
    ASSERT_EQ(r.status, 0) << kind << ": " << r.err;
    const auto got = nlohmann::json::parse(slurp(report));
    EXPECT_EQ(got["loss"], expected["loss"]) << kind;
    EXPECT_EQ(got["val_loss"], expected["val_loss"]) << kind;
    const auto analysis = nlohmann::json::parse(run_paci("analyze " + schedule + " --json -").out);
    EXPECT_EQ(got["versions"], analysis["versions"]) << kind;
    for (std::size_t s = 0; s < got["stages"].size(); ++s)
      EXPECT_EQ(got["stages"][s]["peak_activations"], analysis["stages"][s]["peak_activations"])
          << kind;
  }
}

TEST(CliTrain, FailuresExitOneNamingStageAndAction) {
  auto r = run_paci(std::string("train -k paci -p 2 -m 2 -n 2 --quiet") + kTiny + data_flags() +
                    "--fail-at 1B2");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("stage 1, action 1B2"));
  const std::string state = temp_path("nan.state");
  write_text(state, "previous");
  r = run_paci(std::string("train -k 1f1b -p 2 -m 2 -n 6 --quiet --lr 1e30 --warmup-steps 0") +
               kTiny + data_flags() + "--save " + state);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("loss is"));
  EXPECT_THAT(r.err, HasSubstr("optimizer step"));
  EXPECT_EQ(slurp(state), "previous");  // no half-written or new checkpoint
}

}  // namespace
}  // namespace paci
