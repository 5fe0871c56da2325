// Training-step throughput of a GPT-2-small-shaped stage on the GPU (12 blocks, d_model 768, 12
// heads, seq 1024; the whole model with vocab 50257, or a middle stage without embeddings and head)
// in bf16 and fp32: tokens/s, and MFU against the cuBLAS GEMM rate on the model's shapes, same run.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuda/device.hpp"
#include "cuda/gemm.hpp"
#include "cuda/optimizer.hpp"
#include "cuda/stage.hpp"
#include "model/checkpoint_llmc.hpp"
#include "model/config.hpp"
#include "model/init.hpp"

namespace {

using namespace paci;
using cuda::Precision;

struct Options {
  std::size_t batch = 8, seq_len = 1024, steps = 10, warmup = 3;
  std::vector<std::string> stages{"whole", "middle"};
  std::vector<Precision> precisions{Precision::bf16, Precision::fp32};
  std::string json;
};

struct Run {
  std::string stage;
  Precision precision = Precision::bf16;
  std::size_t params = 0;
  double forward_s = 0, backward_s = 0, optimizer_s = 0, step_s = 0;
  double tokens_per_s = 0, model_flops = 0, model_flops_per_s = 0, gemm_flops_per_s = 0;
  float loss = 0;
};

model::StageShape shape_of(const std::string& stage, const Options& o) {
  model::StageShape shape;
  shape.config = {.layers = 12, .heads = 12, .d_model = 768, .max_seq_len = 1024, .vocab = 50257};
  shape.range = model::whole_model(shape.config);
  if (stage == "middle") {  // blocks 1..12 of 14: neither embeddings nor head
    shape.config.layers = 14;
    shape.range = {1, 12};
  }
  shape.batch = o.batch;
  shape.seq_len = o.seq_len;
  return shape;
}

cuda::DeviceTensor random_device(cudaStream_t stream, std::size_t n, Precision p, double scale,
                                 std::uint64_t seed) {
  cuda::DeviceTensor out(p, n);
  if (n == 0) return out;
  model::InitRng rng(seed);
  std::vector<float> host(n);
  for (float& v : host) v = static_cast<float>(scale * rng.normal());
  cuda::DeviceBuffer<float> staged(n);
  cuda::copy_to_device(stream, staged.data(), std::span<const float>(host));
  if (p == Precision::fp32) {
    PACI_CUDA_CHECK(cudaMemcpyAsync(out.as<float>(), staged.data(), n * sizeof(float),
                                    cudaMemcpyDeviceToDevice, stream));
  } else {
    cuda::cast(stream, out.as<cuda::bf16>(), staged.data(), n);
  }
  PACI_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

// Fills t with N(0, scale²) values: a random 1M-element block, then copies of it (zeros would
// flatter the GEMM rates: tensor cores draw less power on them).
void fill_random(cudaStream_t stream, cuda::DeviceTensor& t, double scale, std::uint64_t seed) {
  const std::size_t n = t.size(), bytes = cuda::element_bytes(t.precision());
  if (n == 0) return;
  const std::size_t block = std::min<std::size_t>(n, std::size_t{1} << 20);
  const cuda::DeviceTensor first = random_device(stream, block, t.precision(), scale, seed);
  auto* base = static_cast<unsigned char*>(t.view().data);
  PACI_CUDA_CHECK(
      cudaMemcpyAsync(base, first.view().data, block * bytes, cudaMemcpyDeviceToDevice, stream));
  for (std::size_t done = block; done < n;) {
    const std::size_t count = std::min(done, n - done);
    PACI_CUDA_CHECK(cudaMemcpyAsync(base + done * bytes, base, count * bytes,
                                    cudaMemcpyDeviceToDevice, stream));
    done += count;
  }
  PACI_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// FLOP/s of cuBLAS on every linear-layer GEMM of one training step of `shape` (forward, input
// gradient, weight gradient into fp32; the head too on a last stage, its output rows padded to
// the stage's logits_ld as the stage runs them), best of three passes.
double gemm_rate(const model::StageShape& shape, Precision p) {
  const std::size_t R = shape.rows(), C = shape.config.d_model, V = shape.config.vocab;
  const bool head = shape.range.is_last(shape.config);
  struct Linear {
    std::size_t in, out, count, ld;  // ld: the output's row stride
  };
  const std::size_t L = shape.range.num_layers;
  std::vector<Linear> linears{
      {C, 3 * C, L, 3 * C}, {C, C, L, C}, {C, 4 * C, L, 4 * C}, {4 * C, C, L, C}};
  const std::size_t Vp = model::llmc_padded_vocab(V);
  if (head) linears.push_back({C, V, 1, Vp});
  const std::size_t widest = head ? Vp : 4 * C;
  cuda::Resources res(0);
  const cuda::OpContext ctx = res.context();
  cuda::DeviceTensor x(p, R * 4 * C), w(p, widest * 4 * C), y(p, R * widest);
  cuda::DeviceBuffer<float> dw(widest * 4 * C);
  const cudaDataType_t t = p == Precision::fp32 ? CUDA_R_32F : CUDA_R_16BF;
  fill_random(res.stream(), x, 1.0, 5);
  fill_random(res.stream(), w, 0.02, 6);  // GPT-2's init scale keeps the chained products finite
  fill_random(res.stream(), y, 1.0, 7);   // the padding columns are read by no GEMM
  PACI_CUDA_CHECK(cudaMemsetAsync(dw.data(), 0, dw.bytes(), res.stream()));
  using cuda::Transpose;
  double best = 0;
  for (int pass = 0; pass < 4; ++pass) {  // pass 0 warms up
    cuda::Event start, end;
    start.record(res.stream());
    double flops = 0;
    for (const Linear& l : linears) {
      for (std::size_t k = 0; k < l.count; ++k) {
        cuda::gemm(ctx, Transpose::no, Transpose::yes, R, l.out, l.in, 1, {x.view().data, t, l.in},
                   {w.view().data, t, l.in}, 0, {y.view().data, t, l.ld});
        cuda::gemm(ctx, Transpose::no, Transpose::no, R, l.in, l.out, 1, {y.view().data, t, l.ld},
                   {w.view().data, t, l.in}, 0, {x.view().data, t, l.in});
        cuda::gemm(ctx, Transpose::yes, Transpose::no, l.out, l.in, R, 1, {y.view().data, t, l.ld},
                   {x.view().data, t, l.in}, 1, {dw.data(), CUDA_R_32F, l.in});
        flops += 3 * 2.0 * static_cast<double>(R * l.in * l.out);
      }
    }
    end.record(res.stream());
    end.synchronize();
    if (pass > 0) best = std::max(best, flops / end.seconds_since(start));
  }
  return best;
}

// FLOP/s of one large square GEMM (8192³, random data) in p: the chip's practical matrix rate.
double square_gemm_rate(Precision p) {
  const std::size_t n = 8192;
  cuda::Resources res(0);
  const cuda::OpContext ctx = res.context();
  cuda::DeviceTensor a(p, n * n), b(p, n * n), c(p, n * n);
  const cudaDataType_t t = p == Precision::fp32 ? CUDA_R_32F : CUDA_R_16BF;
  fill_random(res.stream(), a, 1.0, 7);
  fill_random(res.stream(), b, 1.0, 8);
  double best = 0;
  for (int rep = 0; rep < 6; ++rep) {
    cuda::Event start, end;
    start.record(res.stream());
    cuda::gemm(ctx, cuda::Transpose::no, cuda::Transpose::no, n, n, n, 1, {a.view().data, t, n},
               {b.view().data, t, n}, 0, {c.view().data, t, n});
    end.record(res.stream());
    end.synchronize();
    if (rep > 0) best = std::max(best, 2.0 * n * n * n / end.seconds_since(start));
  }
  return best;
}

Run bench(const std::string& stage_name, Precision p, const Options& o) {
  const model::StageShape shape = shape_of(stage_name, o);
  cuda::Stage stage(shape, p);
  const cudaStream_t s = stage.stream();
  cuda::ActivationSlot slot = stage.make_slot();
  const std::size_t n = stage.layout().size(), R = shape.rows(), C = shape.config.d_model;
  std::vector<float> host(n);
  model::init_gpt2(stage.layout(), host, 1);
  cuda::DeviceBuffer<float> master(n), grads(n);
  cuda::copy_to_device(s, master.data(), std::span<const float>(host));
  cuda::zero(s, grads.data(), n);
  cuda::DeviceTensor copy(p == Precision::bf16 ? Precision::bf16 : Precision::fp32,
                          p == Precision::bf16 ? n : 0);
  if (p == Precision::bf16) cuda::cast(s, copy.as<cuda::bf16>(), master.data(), n);
  const cuda::TensorView weights =
      p == Precision::bf16 ? std::as_const(copy).view() : cuda::TensorView::of(master.data(), n);
  cuda::AdamW adamw(stage.layout());
  model::InitRng rng(2);
  std::vector<std::int32_t> tokens(R), targets(R);
  for (std::size_t i = 0; i < R; ++i) {
    tokens[i] = static_cast<std::int32_t>(rng.next() % shape.config.vocab);
    targets[i] = static_cast<std::int32_t>(rng.next() % shape.config.vocab);
  }
  const cuda::DeviceTensor input = random_device(s, stage.is_first() ? 0 : R * C, p, 1.0, 3);
  const cuda::DeviceTensor d_output = random_device(s, stage.is_last() ? 0 : R * C, p, 1e-3, 4);
  cuda::DeviceTensor d_input(p, stage.is_first() ? 0 : R * C);
  const cuda::StageInput in = stage.is_first() ? cuda::StageInput::tokens(tokens)
                                               : cuda::StageInput::activations(input.view());
  Run run{stage_name, p, n};
  cuda::Event e0, e1, e2, e3;
  for (std::size_t step = 0; step < o.warmup + o.steps; ++step) {
    e0.record(s);
    if (stage.is_last()) {
      run.loss = stage.forward_loss(weights, in, targets, 1.0f, slot);
    } else {
      stage.forward(weights, in, slot);
    }
    e1.record(s);
    stage.backward(weights, cuda::MutableTensorView::of(grads.data(), n), slot, d_output.view(),
                   d_input.view());
    e2.record(s);
    adamw.step(s, master.data(), grads.data(), 1e-4, 1.0f,
               p == Precision::bf16 ? copy.as<cuda::bf16>() : nullptr);
    cuda::zero(s, grads.data(), n);
    e3.record(s);
    e3.synchronize();
    if (step < o.warmup) continue;
    run.forward_s += e1.seconds_since(e0) / static_cast<double>(o.steps);
    run.backward_s += e2.seconds_since(e1) / static_cast<double>(o.steps);
    run.optimizer_s += e3.seconds_since(e2) / static_cast<double>(o.steps);
  }
  run.step_s = run.forward_s + run.backward_s + run.optimizer_s;
  run.tokens_per_s = static_cast<double>(R) / run.step_s;
  run.model_flops = 3 * model::stage_flops(shape.config, shape.range, o.batch, o.seq_len).forward();
  run.model_flops_per_s = run.model_flops / run.step_s;
  run.gemm_flops_per_s = gemm_rate(shape, p);
  return run;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string value = i + 1 < argc ? argv[i + 1] : "";
    auto number = [&] { return static_cast<std::size_t>(std::stoul(value)); };
    if (arg == "--batch") {
      o.batch = number();
    } else if (arg == "--seq") {
      o.seq_len = number();
    } else if (arg == "--steps") {
      o.steps = number();
    } else if (arg == "--warmup") {
      o.warmup = number();
    } else if (arg == "--stage") {
      o.stages = value == "both" ? std::vector<std::string>{"whole", "middle"}
                                 : std::vector<std::string>{value};
    } else if (arg == "--precision") {
      o.precisions = value == "both" ? std::vector<Precision>{Precision::bf16, Precision::fp32}
                                     : std::vector<Precision>{cuda::parse_precision(value)};
    } else if (arg == "--json") {
      o.json = value;
    } else {
      throw std::invalid_argument(
          "usage: bench_cuda [--batch 8] [--seq 1024] [--steps 10] [--warmup 3] "
          "[--stage whole|middle|both] [--precision bf16|fp32|both] [--json PATH]");
    }
    ++i;
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  std::string reason;
  if (cuda::device_count(&reason) == 0) {
    fmt::print(stderr, "bench_cuda: no CUDA device: {}\n", reason);
    return 1;
  }
  const std::string device = cuda::device_description();
  const double bf16_peak = square_gemm_rate(Precision::bf16);
  fmt::print("device {}; B={} T={}; cuBLAS bf16 8192³ GEMM {:.1f} TFLOP/s\n", device, o.batch,
             o.seq_len, bf16_peak / 1e12);
  fmt::print("{:<7} {:<5} {:>8} {:>9} {:>9} {:>9} {:>9} {:>11} {:>9} {:>9} {:>6} {:>8}\n", "stage",
             "prec", "params", "step ms", "fwd ms", "bwd ms", "opt ms", "tokens/s", "model TF",
             "GEMM TF", "MFU", "MFU/pk");
  std::vector<Run> runs;
  for (const std::string& stage : o.stages) {
    for (Precision p : o.precisions) {
      const Run r = runs.emplace_back(bench(stage, p, o));
      fmt::print(
          "{:<7} {:<5} {:>7.1f}M {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>11.0f} {:>9.1f} "
          "{:>9.1f} {:>5.1f}% {:>7.1f}%\n",
          r.stage, cuda::to_string(r.precision), static_cast<double>(r.params) / 1e6,
          r.step_s * 1e3, r.forward_s * 1e3, r.backward_s * 1e3, r.optimizer_s * 1e3,
          r.tokens_per_s, r.model_flops_per_s / 1e12, r.gemm_flops_per_s / 1e12,
          100 * r.model_flops_per_s / r.gemm_flops_per_s, 100 * r.model_flops_per_s / bf16_peak);
    }
  }
  fmt::print(
      "model FLOPs = 3 × forward (PaLM count, full T×T attention); MFU = model FLOP/s over "
      "the same-precision cuBLAS rate on the stage's linear-layer GEMMs; MFU/pk over the "
      "bf16 8192³ GEMM\n");
  if (!o.json.empty()) {
    std::ofstream out(o.json);
    out << fmt::format(
        "{{\"device\": \"{}\", \"batch\": {}, \"seq_len\": {}, \"steps\": {}, "
        "\"bf16_square_gemm_flops_per_s\": {:.6g}, \"runs\": [",
        device, o.batch, o.seq_len, o.steps, bf16_peak);
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const Run& r = runs[i];
      out << fmt::format(
          "{}\n  {{\"stage\": \"{}\", \"precision\": \"{}\", \"params\": {}, \"step_s\": {:.6g}, "
          "\"forward_s\": {:.6g}, \"backward_s\": {:.6g}, \"optimizer_s\": {:.6g}, "
          "\"tokens_per_s\": {:.6g}, \"model_flops_per_step\": {:.6g}, "
          "\"model_flops_per_s\": {:.6g}, \"gemm_flops_per_s\": {:.6g}, \"mfu\": {:.4f}, "
          "\"mfu_vs_bf16_square_gemm\": {:.4f}, \"loss\": {:.6g}}}",
          i == 0 ? "" : ",", r.stage, cuda::to_string(r.precision), r.params, r.step_s, r.forward_s,
          r.backward_s, r.optimizer_s, r.tokens_per_s, r.model_flops, r.model_flops_per_s,
          r.gemm_flops_per_s, r.model_flops_per_s / r.gemm_flops_per_s,
          r.model_flops_per_s / bf16_peak, r.loss);
    }
    out << "\n]}\n";
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_cuda: {}\n", e.what());
  return 1;
}
