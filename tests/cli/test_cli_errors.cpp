// The catalogue of bad input (docs/errors.md), checked both ways: every case here makes paci
// print exactly its documented line on standard error (then, for an invalid schedule, the marked
// grid) and exit with its documented status, and every line here appears verbatim in
// docs/errors.md. The files are made here from good ones; paci runs in a folder of its own, so
// the lines name them as the catalogue does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tests/cli/run.hpp"

namespace paci {
namespace {

using testing::slurp;
using testing::write_text;
namespace fs = std::filesystem;

struct Case {
  Case(std::string c, std::string l, int s = 2, std::string e = "")
      : command(std::move(c)), line(std::move(l)), status(s), env(std::move(e)) {}
  std::string command;  // after "paci "
  std::string line;     // the first line on standard error, exactly
  int status;
  std::string env;  // environment assignments before the command, if any
};

const std::string kBase =
    "train -k 1f1b -p 2 -m 2 -n 2 --layers 2 --heads 2 --d-model 32 --seq-len 16 --batch 2 "
    "--quiet --val-data none ";
const std::string kTrain = kBase + "--data tok.bin";
// A configuration of Llama 3 70B on H100s but for --gpus, --global-batch and --tp.
const std::string kPlan =
    "plan --preset llama3-70b --gpu h100-80gb --pp 4 --microbatch-size 1 --kind 1f1b "
    "--recompute full ";
const std::string kPaciCut =
    "train -k paci -p 2 -m 2 -n 4 --layers 2 --heads 2 --d-model 32 --seq-len 16 --batch 2 "
    "--quiet --val-data none --data tok.bin --save-every 2 --save paci_cut.state";

std::vector<Case> catalogue() {
  const std::string t = kTrain + " ";
  return {
      // Schedule files.
      {"validate nope.json",
       "paci validate: error: nope.json: cannot open: No such file or directory"},
      {"validate empty.json", "paci validate: error: empty.json: empty file"},
      {"validate trunc.json",
       "paci validate: error: trunc.json: line 6, column 12: malformed JSON (truncated: unexpected "
       "end of input; syntax error while parsing object key - invalid string: missing closing "
       "quote; last read: '\"microbat'; expected string literal)"},
      {"validate v9.json",
       "paci validate: error: v9.json: unsupported format 'paci.schedule/9' (expected "
       "paci.schedule/1)"},
      {"validate badtok.csv",
       "paci validate: error: badtok.csv: row 1, cell 2: bad action '0X1' (expected "
       "<stage><F|B|I|W><microbatch> such as 0F3, or <stage>U)"},
      {"validate pair.csv",
       "paci validate: error: pair.csv: row 1, cell 2: bad overlapped pair '(0F1;1I0)OVERLAP_F_B': "
       "0F1 and 1I0 are not a forward and a full backward (expected "
       "(<stage>F<microbatch>;<stage>B<microbatch>)OVERLAP_F_B, a forward and a full backward, as "
       "PyTorch's DualPipeV writes it)"},
      {"validate dup.json",
       "paci validate: error: dup.json: invalid schedule: action 1F1 appears twice"},
      {"validate huge.csv",
       "paci validate: error: huge.csv: invalid schedule: incomplete: 777777078 micro-batches (M "
       "777777078 x N 1) on 1 stage need a forward each per stage, more than the 2 actions it "
       "has"},
      // Generator flags.
      {"schedule -k paci -p 0 -m 1 -n 1", "paci schedule: error: --stages must be positive, got 0"},
      {"schedule -k 2bw -p 4 -m 2 -n 1",
       "paci schedule: error: 2bw needs at least as many micro-batches per step as stages (M >= "
       "P), got M=2 P=4"},
      {"schedule -k dualpipev -p 4 -m 6",
       "paci schedule: error: dualpipev needs at least as many micro-batches per step as model "
       "stages (M >= 2P = 8, DualPipe's and PyTorch's bound), got M=6"},
      {"schedule -k dualpipe -p 3 -m 6",
       "paci schedule: error: dualpipe needs an even number of devices and an even number of "
       "micro-batches per step, at least twice the devices (P even, M even, M >= 2P: DualPipe's "
       "own asserts), got P=3 M=6 (dualpipev runs on any P)"},
      {"schedule -k dualpipe -p 2 -m 4 -f pytorch",
       "paci schedule: error: PyTorch's pipelining cannot run a dualpipe schedule: it holds two "
       "copies of the model, each taking half the micro-batches in at its own end, and PyTorch's "
       "runtime has one (its DualPipeV is the one-copy form: --kind dualpipev)"},
      {"schedule -k interleaved -p 2 -m 4 --chunks 0",
       "paci schedule: error: --chunks must be at least 1 (model stages per device), got 0 (see "
       "paci schedule --help)"},
      // Cost models.
      {"simulate good.json --cost trunc_cost.json",
       "paci simulate: error: trunc_cost.json: line 3, column 17: malformed JSON (truncated: "
       "syntax error while parsing value - unexpected end of input; expected '[', '{', or a "
       "literal)"},
      {"simulate good.json --cost neg.json",
       "paci simulate: error: neg.json: stages[0].forward_s is negative (-1)"},
      {"simulate good.json --tf 1 --tb 2 --tfb 4",
       "paci simulate: error: --tfb (4 s) must lie between max(F, B) = 2 s and F + B = 3 s: an "
       "overlapped pair takes at least its longer action and at most both back to back"},
      {"simulate good.json --cost three.json",
       "paci simulate: error: three.json: cost model has 3 stages, the schedule has 2 (good.json)"},
      // Measured reports.
      {"simulate good.json --replay good.json",
       "paci simulate: error: good.json: the report has no 'source'"},
      // Token shards.
      {kBase + "--data nope.bin",
       "paci train: error: cannot open nope.bin: No such file or directory"},
      {kBase + "--data magic.bin",
       "paci train: error: magic.bin: not an llm.c token shard (magic 16843009, expected "
       "20240520)"},
      {kBase + "--data short.bin",
       "paci train: error: short.bin: not an llm.c token shard (1000 bytes, shorter than its "
       "1024-byte header)"},
      {kBase + "--data cut.bin",
       "paci train: error: cut.bin: truncated llm.c token shard: the header says 2000 tokens "
       "(4000 bytes), the body has 3990 bytes"},
      {t + "--vocab 64",
       "paci train: error: tok.bin: token 100 at position 0 is outside the vocabulary (64 "
       "tokens)"},
      // llm.c model files.
      {t + "--init model_v5.bin",
       "paci train: error: model_v5.bin: version 5, expected 3 (fp32); version 5 is llm.c's bf16 "
       "format"},
      {t + "--init model_cut.bin",
       "paci train: error: model_cut.bin: body is 136700 bytes, but the header's shape (layers 2, "
       "heads 2, d_model 32, max_seq_len 16, vocab 256, padded_vocab_size 256) needs 136704"},
      // Training-state checkpoints.
      {t + "--resume corrupt.state",
       "paci train: error: corrupt.state: checksum mismatch: file is corrupt or truncated"},
      {t + "--resume notstate.state",
       "paci train: error: notstate.state: not a paci.state/1 checkpoint: magic "
       "0x4e4f545354415445, expected \"PACISTAT\""},
      {t + "--resume ok.state",
       "paci train: error: ok.state already holds 2 steps; --steps 2 leaves none to run"},
      {"train -k paci -p 2 -m 4 -n 4 --layers 2 --heads 2 --d-model 32 --seq-len 16 --batch 2 "
       "--quiet --val-data none --data tok.bin --resume paci_cut.state",
       "paci train: error: paci_cut.state: its cut (after update 2 of a schedule starting at step "
       "0) was taken in another schedule than this paci (P=2, M=4); resume with the flags of the "
       "run that saved it"},
      // Training flags.
      {t + "--partition 1,2",
       "paci train: error: --partition adds up to 3 blocks, the model has 2"},
      {t + "--threads -1",
       "paci train: error: --threads must be between 0 (auto) and 1024, got -1"},
      {t + "--lr inf", "paci train: error: --lr must be a finite number >= 0, got inf"},
      // A mixture of experts that cannot be built, or a file that cannot hold it.
      {t + "--experts 4 --top-k 5",
       "paci train: error: top-k 5 must be between 1 and the 4 experts"},
      {t + "--top-k 3",
       "paci train: error: --top-k, --expert-hidden, --shared-expert, --capacity-factor and "
       "--aux-loss-coef shape a mixture of experts: give --experts E too (see paci train --help)"},
      {t + "--experts 4 --export-llmc out.bin",
       "paci train: error: --export-llmc writes llm.c's dense GPT-2 file: a mixture of experts has "
       "no such layout (--save writes a training state that holds it) (see paci train --help)"},
      // Expert parallelism that cannot split the experts, or is not launched as processes.
      {t + "--experts 4 --ep 3",
       "paci train: error: --ep 3 does not divide the 4 experts (--ep 1, 2, 4 would)"},
      {t + "--ep 2",
       "paci train: error: --ep 2 splits a mixture of experts' experts over processes: give "
       "--experts E too (see paci train --help)"},
      {t + "--experts 4 --ep 2 --clip 1",
       "paci train: error: --clip with --ep 2: a stage's gradient norm needs every expert part's "
       "gradients, which each process does not hold; train without --clip, or without --ep (see "
       "paci train --help)"},
      {t + "--experts 4 --ep 2",
       "paci train: error: --ep 2 runs each device's expert parts as processes: start 4 of them "
       "with mpirun (-np 4) (see paci train --help)"},
      {"simulate good.json --host-slowdown ''",
       "paci simulate: error: --host-slowdown must list numbers > 0 such as 1,1.3,2 (got '' in "
       "'') (see paci simulate --help)"},
      {t + "--save-every 1",
       "paci train: error: --save-every needs --save FILE (where to write) (see paci train "
       "--help)"},
      // paci plan: presets, the configuration, a cluster file, a search where nothing fits.
      {"plan --preset gpt5 --gpu h100-80gb --gpus 8 --global-batch 8",
       "paci plan: error: unknown model preset 'gpt5' (known: gpt2-small, gpt2-medium, "
       "gpt2-large, gpt2-xl, gpt3-125m, gpt3-350m, gpt3-760m, gpt3-1.3b, gpt3-2.7b, gpt3-6.7b, "
       "gpt3-13b, gpt3-175b, llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b, "
       "llama3-405b, mixtral-8x7b, mixtral-8x22b, qwen3-30b-a3b, qwen3-235b-a22b, deepseek-v3)"},
      {"plan --preset llama3-8b --gpu v100 --gpus 8 --global-batch 8",
       "paci plan: error: unknown GPU 'v100' (known: a100-40gb, a100-80gb, h100-80gb, h200, b200, "
       "gb200-nvl72)"},
      {kPlan + "--gpus 60 --global-batch 512 --tp 8",
       "paci plan: error: --gpus 60 is not divisible by --tp 8 x --pp 4 = 32"},
      {kPlan + "--gpus 96 --global-batch 512 --tp 3",
       "paci plan: error: --tp 3 does not divide the model's attention heads (64)"},
      {kPlan + "--gpus 64 --global-batch 511 --tp 8",
       "paci plan: error: --global-batch 511 is not divisible by d x b = 2 x 1 (d = gpus / (tp x "
       "pp) data-parallel replicas, b = --microbatch-size)"},
      {"plan --preset gpt2-small --gpu h100-80gb --gpus 64 --global-batch 512 --tp 1 --pp 32 "
       "--microbatch-size 1 --kind 1f1b --recompute full",
       "paci plan: error: 12 layers are too few for --pp 32 x --chunks 1 = 32 stages"},
      {"plan --preset gpt2-small --gpu h100-80gb --gpus 6 --global-batch 64 --tp 1 --pp 3 "
       "--microbatch-size 1 --recompute full --kind dualpipe",
       "paci plan: error: --kind dualpipe runs its two copies in opposite directions on an even "
       "number of devices, --pp 3 is odd: an even --pp, or --kind dualpipev (any p)"},
      {"plan --preset gpt2-small --cluster nopeak.json --gpus 8 --global-batch 8",
       "paci plan: error: nopeak.json: missing key 'peak_flops'"},
      {"plan --preset llama3-70b --gpu a100-40gb --gpus 8 --global-batch 8 --recompute none -q",
       "paci plan: error: no configuration fits in 35.4 GiB per GPU: the smallest peak found needs "
       "150.0 GiB (interleaved t=4 p=2 d=1 v=40 b=1 M=8 none sp); with --recompute full: at least "
       "149.5 "
       "GiB; its weights, gradients and optimizer state alone need 147.9 GiB: it takes more GPUs "
       "(or larger ones)"},
      // A launch read back (docs/interop.md): the tool's recorded parser, what paci does not
      // model, a knob the launch already sets.
      {"plan --gpu h100-80gb --gpus 16 --from-megatron '--num-layers 4 --tensor-parallel-size 2'",
       "paci plan: error: Megatron-LM core_v0.16.1 has no option --tensor-parallel-size"},
      {"plan --gpu h100-80gb --gpus 16 --from-torchtitan '--module llama3 --config llama3_8b "
       "--parallelism.expert-parallel-degree 2'",
       "paci plan: error: --from-torchtitan: --parallelism.expert-parallel-degree 2: llama3-8b has "
       "no experts"},
      {"plan --preset llama3-8b --gpu a100-80gb --gpus 16 --global-batch 16 --tp 2 --pp 1 "
       "--microbatch-size 1 --kind 1f1b --recompute none --precision fp8",
       "paci plan: error: --precision fp8: a100-80gb has no FP8 tensor cores (its cluster file "
       "gives no fp8_peak_flops); --precision bf16 would work"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 16 --global-batch 16 --tp 2 --pp 1 "
       "--microbatch-size 1 --kind 1f1b --recompute none --precision mxfp8",
       "paci plan: error: --precision mxfp8: h100-80gb has no block-scaled (MX) FP8 tensor cores "
       "(Blackwell has; its cluster file gives no mxfp8_gemm_efficiency); --precision fp8 would "
       "work"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 16 --global-batch 16 --tp 2 --pp 1 "
       "--microbatch-size 1 --kind 1f1b --recompute none --zero 3 --shard-group 3",
       "paci plan: error: --shard-group 3 must divide the weights' 8 replicas (d = 8 x c = 1) and "
       "be at least 2: it is the GPUs ZeRO shards over, the rest replicating"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 16 --global-batch 16 --zero 0 "
       "--shard-group 4",
       "paci plan: error: --shard-group is the group ZeRO shards over: it needs --zero 1, 2 or 3 "
       "(see paci plan --help)"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 8 --global-batch 16 --tp 2 --pp 2 "
       "--microbatch-size 1 --kind 1f1b --recompute none --offload-layers 16",
       "paci plan: error: --offload-layers 16 with --pp 2: Megatron-LM offloads activations only "
       "without pipeline parallelism; --pp 1 or --offload-layers 0 would work"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 8 --global-batch 16 --tp 2 --pp 1 "
       "--microbatch-size 1 --kind 1f1b --recompute none --offload-layers 32",
       "paci plan: error: --offload-layers 32: Megatron-LM offloads fewer layers than the model's "
       "32; at most 31 would work"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 8 --global-batch 16 --tp 2 --pp 1 "
       "--microbatch-size 1 --kind 1f1b --recompute none --offload-layers 16 --emit torchtitan",
       "paci plan: error: torchtitan 0.3.0 offloads no activations (its "
       "--training.enable-cpu-offload moves FSDP's weights, gradients and optimizer state to the "
       "host, not activations): plan --offload-layers 0, or --emit megatron"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 8 --global-batch 16 --tp 1 --pp 4 "
       "--microbatch-size 1 --kind 1f1b --recompute full --overlap-p2p on --emit megatron",
       "paci plan: error: Megatron-LM's non-interleaved 1F1B waits on every pipeline send (it "
       "refuses to overlap them): plan --overlap-p2p off, or --kind interleaved"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 8 --global-batch 16 --tp 1 --pp 4 "
       "--microbatch-size 1 --kind interleaved --recompute full --overlap-p2p off --emit "
       "torchtitan",
       "paci plan: error: PyTorch's pipelining overlaps its interleaved schedule's pipeline sends: "
       "plan --overlap-p2p on"},
      {"plan --preset deepseek-v3 --layers 3 --gpu b200 --gpus 8 --global-batch 8",
       "paci plan: error: model 'deepseek-v3 (modified)': --dense-layers 3 leaves none of the 3 "
       "layers routed; --dense-layers 2 or fewer would work"},
      {"plan --preset deepseek-v3 --experts 12 --gpu h100-80gb --gpus 8 --global-batch 8",
       "paci plan: error: model 'deepseek-v3 (modified)': DeepSeek-V3's router puts the 12 experts "
       "in 8 groups and keeps 4 of them for each token's top 8: --experts must be a multiple of 8 "
       "and --top-k between 4 and 4/8 of them, or --router softmax"},
      {"plan --preset deepseek-v3 --gpu b200 --gpus 256 --global-batch 2048 --tp 1 --pp 16 --ep 8 "
       "--microbatch-size 1 --kind 1f1b --emit torchtitan",
       "paci plan: error: no configuration to simulate: of 72, 72 cannot run where the plan goes "
       "(e.g. torchtitan 0.3.0 cannot train deepseek-v3 with multi-token prediction: it builds "
       "models from its own configs (of paci's presets: llama3-8b, llama3-70b, llama3-405b, "
       "qwen3-30b-a3b, and deepseek-v3 with --mtp-layers 0))"},
      {"plan --preset mixtral-8x7b --gpu h100-80gb --gpus 16 --global-batch 32 --tp 2 --pp 1 "
       "--ep 3 --sequence-parallel --microbatch-size 1 --kind 1f1b --recompute full",
       "paci plan: error: --ep 3 must divide the model's 8 experts (each GPU of the group holds "
       "E/e of them); --ep 2 would work"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 16 --global-batch 32 --ep 2",
       "paci plan: error: --ep spreads a model's experts: llama3-8b has none (--experts E makes a "
       "mixture of experts) (see paci plan --help)"},
      {"plan --preset mixtral-8x7b --gpu h100-80gb --gpus 16 --global-batch 32 --top-k 9",
       "paci plan: error: model 'mixtral-8x7b (modified)': --top-k 9 must be between 1 and the 8 "
       "experts (each token goes to k of them)"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 16 --global-batch 16 --fp8-param-gather",
       "paci plan: error: --fp8-param-gather keeps the FP8 GEMMs' weights in 8 bits: it needs "
       "--precision fp8 or mxfp8"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 16 --global-batch 16 --tp 2 --pp 2 "
       "--microbatch-size 1 --kind 1f1b --recompute none --zero 0 --moments-dtype bf16",
       "paci plan: error: --moments-dtype bf16 is Megatron-LM's precision-aware optimizer, which "
       "runs with its distributed optimizer only: it needs --zero 1, 2 or 3"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 16 --global-batch 16 --precision fp4",
       "paci plan: error: unknown precision 'fp4' (expected bf16, fp8 or mxfp8)"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 16 --global-batch 16 --grad-dtype fp16",
       "paci plan: error: --grad-dtype takes fp32 or bf16, got 'fp16' (see paci plan --help)"},
      {"plan --preset llama3-8b --gpu h100-80gb --gpus 16 --global-batch 16 --seq-len 8190 --cp 2 "
       "--tp 1 --pp 1 --microbatch-size 1 --kind 1f1b --recompute none",
       "paci plan: error: --cp 2 splits each sequence into 2 x 2 = 4 load-balanced chunks: the "
       "sequence (8190) is not divisible by 4; --cp 1 would work"},
      {"plan --gpu h100-80gb --gpus 16 --tp 2 --from-torchtitan '--module llama3 --config "
       "llama3_8b'",
       "paci plan: error: --tp does not apply with --from-torchtitan: the launch sets it (see paci "
       "plan --help)"},
      {"frobnicate", "paci: error: unknown command 'frobnicate' (see paci --help)"},
      {"validate good.json --bogus",
       "paci validate: error: unrecognised option '--bogus' (see paci validate --help)"},
      // The launch environment.
      {kTrain, "paci train: error: rendezvous: PACI_RANK='x' is not a non-negative integer", 2,
       "PACI_RANK=x PACI_WORLD_SIZE=2"},
      {kTrain, "paci train: error: rendezvous: PACI_RANK=3 is not below PACI_WORLD_SIZE=2", 2,
       "PACI_RANK=3 PACI_WORLD_SIZE=2"},
  };
}

// Flips, cuts and rewrites bytes of `from` into `to`.
void derive(const std::string& dir, const std::string& from, const std::string& to,
            const std::function<void(std::string&)>& edit) {
  std::string bytes = slurp(dir + "/" + from);
  ASSERT_FALSE(bytes.empty()) << from;
  edit(bytes);
  write_text(dir + "/" + to, bytes);
}

class ErrorCatalogue : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_path("errors");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const auto paci = [&](const std::string& args) {
      const auto r = testing::run_shell("cd " + dir_ + " && " + PACI_BINARY + " " + args);
      ASSERT_EQ(r.status, 0) << args << ": " << r.err;
    };
    paci("schedule -k 1f1b -p 2 -m 2 -n 1 -o good.json");
    paci("costmodel --preset tiny --stages 3 -o three.json");
    // 2000 tokens of 'd' (100) and 'e'.
    std::string text;
    for (int i = 0; i < 1000; ++i) text += "de";
    write_text(dir_ + "/tok.txt", text);
    paci("data tokenize tok.txt --train tok.bin");
    paci(kTrain + " --save ok.state --export-llmc model.bin");
    // A cut of a PACI run: killed after its checkpoint of step 2 (a cut) and before the end.
    const auto killed = testing::run_shell("cd " + dir_ + " && " + PACI_BINARY + " " + kPaciCut +
                                           " --kill-at 1F7 2>/dev/null");
    ASSERT_EQ(killed.status, 128 + 9) << killed.err;
    const std::string d = dir_;
    write_text(d + "/empty.json", "");
    write_text(d + "/nopeak.json", "{\"format\": \"paci.cluster/1\", \"name\": \"mine\"}\n");
    write_text(d + "/badtok.csv", "0F0,0X1\n");
    write_text(d + "/pair.csv", "0F0,(0F1;1I0)OVERLAP_F_B\n1F0,1I0,1W0\n");
    write_text(d + "/huge.csv", "0F777777077\n");
    derive(d, "good.json", "trunc.json", [](std::string& b) { b.resize(100); });
    derive(d, "good.json", "v9.json",
           [](std::string& b) { b.replace(b.find("paci.schedule/1"), 15, "paci.schedule/9"); });
    derive(d, "good.json", "dup.json",
           [](std::string& b) { b.replace(b.find("\"1B1\""), 5, "\"1F1\""); });
    derive(d, "three.json", "trunc_cost.json", [](std::string& b) { b.resize(50); });
    derive(d, "three.json", "neg.json", [](std::string& b) {
      const std::size_t at = b.find("\"forward_s\": ") + 13;
      b.replace(at, b.find(',', at) - at, "-1");
    });
    derive(d, "tok.bin", "magic.bin", [](std::string& b) { b.replace(0, 4, "\1\1\1\1"); });
    derive(d, "tok.bin", "short.bin", [](std::string& b) { b.resize(1000); });
    derive(d, "tok.bin", "cut.bin", [](std::string& b) { b.resize(b.size() - 10); });
    derive(d, "model.bin", "model_v5.bin", [](std::string& b) { b[4] = 5; });
    derive(d, "model.bin", "model_cut.bin", [](std::string& b) { b.resize(b.size() - 4); });
    derive(d, "ok.state", "corrupt.state", [](std::string& b) { b[b.size() / 2] ^= 1; });
    derive(d, "ok.state", "notstate.state", [](std::string& b) { b.replace(0, 8, "NOTSTATE"); });
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ErrorCatalogue, EveryCaseIsItsDocumentedLineAndStatus) {
  const std::string doc = slurp(std::string(PACI_GOLDEN_DIR) + "/../../docs/errors.md");
  ASSERT_FALSE(doc.empty()) << "docs/errors.md";
  for (const Case& c : catalogue()) {
    const auto r =
        testing::run_shell("cd " + dir_ + " && " + (c.env.empty() ? "" : "env " + c.env + " ") +
                           PACI_BINARY + " " + c.command);
    EXPECT_EQ(r.status, c.status) << c.command << ": " << r.err;
    const std::string first = r.err.substr(0, r.err.find('\n'));
    EXPECT_EQ(first, c.line) << c.command;
    // One line, but for the marked grid under an invalid schedule's.
    if (c.line.find("invalid schedule: ") == std::string::npos) {
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.command << ": " << r.err;
    }
    EXPECT_NE(doc.find(c.line), std::string::npos) << "not in docs/errors.md: " << c.line;
  }
}

}  // namespace
}  // namespace paci
