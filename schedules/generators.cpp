// The generators: two flushed (GPipe, 1F1B) and three continuous 1F1B variants that differ in how
// often a stage steps its optimizer and which weights its backward reads; Zero Bubble's ZB-H1 and
// ZB-H2 (backward split into I and W) and Megatron-LM's interleaved 1F1B, all flushed.
#include "schedules/generators.hpp"

#include <fmt/format.h>
#include <algorithm>

namespace paci {

const std::vector<std::string>& generator_kinds() {
  static const std::vector<std::string> kinds = {"gpipe", "1f1b",      "pipedream", "2bw",
                                                 "paci",  "zb-h1",     "zb-h2",     "interleaved",
                                                 "zb-v",  "dualpipev", "dualpipe"};
  return kinds;
}

bool v_shaped(std::string_view kind) {
  return kind == "zb-v" || kind == "dualpipev";
}

namespace {

Action forward(std::int32_t stage, std::int64_t mb) {
  return {ActionKind::F, stage, static_cast<std::int32_t>(mb)};
}
Action backward(std::int32_t stage, std::int64_t mb) {
  return {ActionKind::B, stage, static_cast<std::int32_t>(mb)};
}
Action update(std::int32_t stage) {
  return {ActionKind::U, stage, -1};
}
Action input_grad(std::int32_t stage, std::int64_t mb) {
  return {ActionKind::I, stage, static_cast<std::int32_t>(mb)};
}
Action weight_grad(std::int32_t stage, std::int64_t mb) {
  return {ActionKind::W, stage, static_cast<std::int32_t>(mb)};
}

// One flushed step of ZB-H2: the order every stage runs its F, I and W of micro-batches 0..M-1
// in, found by running the step at unit costs (t_F = t_I = t_W, free messages), tick by tick. A
// stage that is free runs the first of: its next I whose gradient has arrived (the critical path);
// its next F whose activation has arrived, while fewer than cap[s] micro-batches hold activations
// on it (from F to W); its oldest W whose I is done. The orders are then per-device lists; times
// play no further part.
std::vector<std::vector<Action>> zero_bubble_step(std::int32_t P, std::int32_t M,
                                                  const std::vector<std::int32_t>& cap) {
  constexpr std::int64_t kNever = INT64_MAX;
  struct Stage {
    std::int32_t f = 0, i = 0, w = 0;  // next F, I, W
    std::int64_t free_at = 0;
  };
  std::vector<Stage> st(static_cast<std::size_t>(P));
  std::vector<std::vector<std::int64_t>> end_f(static_cast<std::size_t>(P),
                                               std::vector<std::int64_t>(M, kNever)),
      end_i = end_f;
  std::vector<std::vector<Action>> out(static_cast<std::size_t>(P));
  std::int64_t left = 3 * static_cast<std::int64_t>(M) * P;
  for (std::int64_t t = 0; left > 0; ++t) {
    for (std::int32_t s = 0; s < P; ++s) {
      Stage& x = st[static_cast<std::size_t>(s)];
      if (x.free_at > t) continue;
      auto& ef = end_f[static_cast<std::size_t>(s)];
      auto& ei = end_i[static_cast<std::size_t>(s)];
      const bool i_ready =
          x.i < x.f && ef[static_cast<std::size_t>(x.i)] <= t &&
          (s + 1 == P ||
           end_i[static_cast<std::size_t>(s + 1)][static_cast<std::size_t>(x.i)] <= t);
      const bool f_ready =
          x.f < M && x.f - x.w < cap[static_cast<std::size_t>(s)] &&
          (s == 0 || end_f[static_cast<std::size_t>(s - 1)][static_cast<std::size_t>(x.f)] <= t);
      const bool w_ready = x.w < x.i && ei[static_cast<std::size_t>(x.w)] <= t;
      auto& list = out[static_cast<std::size_t>(s)];
      if (i_ready) {
        ei[static_cast<std::size_t>(x.i)] = t + 1;
        list.push_back(input_grad(s, x.i++));
      } else if (f_ready) {
        ef[static_cast<std::size_t>(x.f)] = t + 1;
        list.push_back(forward(s, x.f++));
      } else if (w_ready) {
        list.push_back(weight_grad(s, x.w++));
      } else {
        continue;
      }
      x.free_at = t + 1;
      --left;
    }
  }
  return out;
}

// One flushed step of ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 6:
// the V schedule; PyTorch's ScheduleZBVZeroBubble runs the same order): 2P model stages, device d
// holding stage a = d and stage b = 2P − 1 − d, so a micro-batch's forward goes down the devices
// and back up, and its backward the reverse. Each device's order, with N = max(M, 2P − 1)
// micro-batches laid out and those from M on left out:
//   warm-up    2(P − d) − 1 forwards of a; d pairs (F of b, F of a); P − d triples (F, I, W of b);
//   steady     while b's forwards lag a's or a has some left: F of a (if left), I and W of a,
//              F, I and W of b;
//   cool-down  d pairs (I of a, I of b); P − d pairs (I of a, W of a); then b's W left, a's W left.
// At F = I = W its devices never wait once the warm-up is done (the paper's zero bubble).
std::vector<std::vector<Action>> zero_bubble_v_step(std::int32_t P, std::int32_t M) {
  const std::int32_t N = std::max(M, 2 * P - 1);
  std::vector<std::vector<Action>> out(static_cast<std::size_t>(P));
  for (std::int32_t d = 0; d < P; ++d) {
    const std::int32_t a = d, b = 2 * P - 1 - d;
    std::int32_t fa = 0, fb = 0, ia = 0, ib = 0;
    auto& list = out[static_cast<std::size_t>(d)];
    const auto push = [&](const Action& x) {
      if (x.microbatch < M) list.push_back(x);
    };
    for (std::int32_t k = 0; k < 2 * (P - d) - 1; ++k) push(forward(a, fa++));
    for (std::int32_t k = 0; k < d; ++k) {
      push(forward(b, fb++));
      push(forward(a, fa++));
    }
    for (std::int32_t k = 0; k < P - d; ++k) {
      push(forward(b, fb++));
      push(input_grad(b, ib));
      push(weight_grad(b, ib++));
    }
    while (fb < fa || fa < N) {
      if (fa < N) push(forward(a, fa++));
      push(input_grad(a, ia));
      push(weight_grad(a, ia++));
      push(forward(b, fb++));
      push(input_grad(b, ib));
      push(weight_grad(b, ib++));
    }
    std::int32_t wa = ia, wb = ib;
    for (std::int32_t k = 0; k < d; ++k) {
      push(input_grad(a, ia++));
      push(input_grad(b, ib++));
    }
    for (std::int32_t k = 0; k < P - d; ++k) {
      push(input_grad(a, ia++));
      push(weight_grad(a, wa++));
    }
    while (wb < ib) push(weight_grad(b, wb++));
    while (wa < ia) push(weight_grad(a, wa++));
  }
  return out;
}

// One flushed step of DualPipeV (DeepSeek's DualPipe cut in half, Sea AI Lab's "cut-in-half"; the
// order of DualPipeV.step in deepseek-ai/DualPipe and of PyTorch's ScheduleDualPipeV): 2P model
// stages in ZB-V's V, device r holding stage a = r and stage b = 2P − 1 − r, M >= 2P micro-batches.
// Each device's order, in DualPipe's eight steps (B a full backward, I one whose W waits in a
// first-in first-out queue, W the queue's oldest, (F;B) an overlapped pair):
//   1  2(P − r − 1) × F a                    5  P − r − 1 × B b, (F b; B a)
//   2  r + 1 × F a, F b                      6  r + 1 × B or I of b, B or I of a (I from the
//   3  P − r − 1 × I b, W, F b                  middle on: b's first when r is odd, a's when even)
//   4  M − 2P + r + 1 × (F a; B b), (F b; B a)  7  P − r − 1 × W, I a
//      (the last device's first F a, B b run    8  r + 1 × W
//      apart: DualPipe's own choice, less bubble)
std::vector<std::vector<Action>> dualpipe_v_step(std::int32_t P, std::int32_t M) {
  std::vector<std::vector<Action>> out(static_cast<std::size_t>(P));
  for (std::int32_t r = 0; r < P; ++r) {
    const std::int32_t a = r, b = 2 * P - 1 - r;
    std::int32_t fa = 0, fb = 0, ba = 0, bb = 0;  // next forward and next backward of a and b
    std::vector<Action> pending_w;                // I's whose W has not run, oldest first
    std::size_t next_w = 0;
    auto& list = out[static_cast<std::size_t>(r)];
    const auto f = [&](std::int32_t stage) {
      list.push_back(forward(stage, stage == a ? fa++ : fb++));
    };
    const auto full = [&](std::int32_t stage) {
      list.push_back(backward(stage, stage == a ? ba++ : bb++));
    };
    const auto split = [&](std::int32_t stage) {
      list.push_back(input_grad(stage, stage == a ? ba++ : bb++));
      pending_w.push_back(weight_grad(stage, list.back().microbatch));
    };
    const auto w = [&]() {
      if (next_w < pending_w.size()) list.push_back(pending_w[next_w++]);
    };
    const auto pair = [&](std::int32_t forward_stage, std::int32_t backward_stage) {
      f(forward_stage);
      full(backward_stage);
      list[list.size() - 2].overlap = Overlap::first;
      list.back().overlap = Overlap::second;
    };
    for (std::int32_t k = 0; k < 2 * (P - r - 1); ++k) f(a);
    for (std::int32_t k = 0; k < r + 1; ++k) {
      f(a);
      f(b);
    }
    for (std::int32_t k = 0; k < P - r - 1; ++k) {
      split(b);
      w();
      f(b);
    }
    for (std::int32_t k = 0; k < M - 2 * P + r + 1; ++k) {
      if (k == 0 && r == P - 1) {
        f(a);
        full(b);
      } else {
        pair(a, b);
      }
      pair(b, a);
    }
    for (std::int32_t k = 0; k < P - r - 1; ++k) {
      full(b);
      pair(b, a);
    }
    bool zb = false;
    for (std::int32_t k = 0; k < r + 1; ++k) {
      if (k == (r + 1) / 2 && r % 2 == 1) zb = true;
      zb ? split(b) : full(b);
      if (k == (r + 1) / 2 && r % 2 == 0) zb = true;
      zb ? split(a) : full(a);
    }
    for (std::int32_t k = 0; k < P - r - 1; ++k) {
      w();
      split(a);
    }
    for (std::int32_t k = 0; k < r + 1; ++k) w();
  }
  return out;
}

// One flushed step of DualPipe (deepseek-ai/DualPipe's DualPipe.step): P devices (P even), two
// copies of the model in opposite directions, copy 0's stage j on device j taking micro-batches
// 0..M/2 − 1 in at device 0, copy 1's stage P + j on device P − 1 − j taking M/2..M − 1 in at
// device P − 1. DualPipe.step runs on device d the order DualPipeV runs on device h = min(d, P − 1
// − d) of a P/2-device V with M/2 micro-batches (its half_rank and half_num_chunks: the same eight
// steps), the V's stage a being layer h of the copy that enters on d's side and its stage b
// layer P − 1 − h of the other copy (DualPipe's phase 0 and phase 1).
std::vector<std::vector<Action>> dualpipe_step(std::int32_t P, std::int32_t M) {
  const std::vector<std::vector<Action>> half = dualpipe_v_step(P / 2, M / 2);
  std::vector<std::vector<Action>> out(static_cast<std::size_t>(P));
  for (std::int32_t d = 0; d < P; ++d) {
    const std::int32_t h = std::min(d, P - 1 - d);
    const bool upper = d >= P / 2;  // copy 1 enters on this side
    for (Action x : half[static_cast<std::size_t>(h)]) {
      const bool a = x.stage == h;
      const std::int32_t copy = a == upper ? 1 : 0;
      x.stage = copy * P + (a ? h : P - 1 - h);
      x.microbatch += copy * (M / 2);
      out[static_cast<std::size_t>(d)].push_back(x);
    }
  }
  return out;
}

// One flushed step's per-device orders (micro-batches 0..M-1) repeated for the schedule's N steps,
// each device's stages stepping their optimizers, in stage order, after each step.
void repeat_step(Schedule& s, const std::vector<std::vector<Action>>& step) {
  const std::int32_t M = s.microbatches, N = s.steps;
  for (std::size_t d = 0; d < s.devices.size(); ++d) {
    std::vector<std::int32_t> stages;
    for (std::int32_t st = 0; st < s.stages; ++st)
      if (s.placement[static_cast<std::size_t>(st)] == static_cast<std::int32_t>(d))
        stages.push_back(st);
    auto& list = s.devices[d];
    list.reserve((step[d].size() + stages.size()) * static_cast<std::size_t>(N));
    for (std::int32_t k = 0; k < N; ++k) {
      const std::int64_t base = static_cast<std::int64_t>(k) * M;
      for (Action a : step[d]) {
        a.microbatch = static_cast<std::int32_t>(base + a.microbatch);
        list.push_back(a);
      }
      for (const std::int32_t st : stages) list.push_back(update(st));
    }
  }
}

// Zero Bubble's handcrafted ZB-H1 (Qi et al., ICLR 2024, figure 3) at stage s of P, one flushed
// step of M micro-batches: min(P − s, M) forwards; then for k = 0, 1, ...: I_k, W_{k−s} once
// k >= s (the weight gradients lag s micro-batches behind), and the next forward while any is
// left; then the remaining W's. Stage s holds at most P micro-batches' activations (1F1B's peak).
void zb_h1_step(std::vector<Action>& out, std::int32_t P, std::int32_t s, std::int64_t base,
                std::int32_t M) {
  const std::int32_t warmup = std::min(P - s, M);
  for (std::int32_t i = 0; i < warmup; ++i) out.push_back(forward(s, base + i));
  std::int32_t w = 0;
  for (std::int32_t k = 0; k < M; ++k) {
    out.push_back(input_grad(s, base + k));
    if (k >= s) out.push_back(weight_grad(s, base + w++));
    if (warmup + k < M) out.push_back(forward(s, base + warmup + k));
  }
  while (w < M) out.push_back(weight_grad(s, base + w++));
  out.push_back(update(s));
}

// Megatron-LM's interleaved 1F1B on device d of D, v chunks (model stages d, d + D, ...), one
// flushed step of M micro-batches (M a multiple of D): warm-up forwards, then one forward and one
// backward at a time, then the remaining backwards, then each chunk's U. The k-th forward of the
// device runs chunk (k / D) mod v on micro-batch (k / (D·v))·D + k mod D; backwards the same with
// the chunks in reverse.
void interleaved_step(std::vector<Action>& out, std::int32_t D, std::int32_t d, std::int32_t v,
                      std::int64_t base, std::int32_t M) {
  const std::int64_t total = static_cast<std::int64_t>(M) * v;
  const std::int64_t warmup =
      M == D ? total
             : std::min<std::int64_t>(total, static_cast<std::int64_t>(D - d - 1) * 2 +
                                                 static_cast<std::int64_t>(v - 1) * D);
  const auto action = [&](std::int64_t k, bool is_forward) {
    const std::int64_t in_group = k % (static_cast<std::int64_t>(D) * v);
    std::int64_t chunk = in_group / D;
    if (!is_forward) chunk = v - 1 - chunk;
    const std::int64_t mb = base + (k / (static_cast<std::int64_t>(D) * v)) * D + k % D;
    const auto stage = static_cast<std::int32_t>(chunk * D + d);
    return is_forward ? forward(stage, mb) : backward(stage, mb);
  };
  for (std::int64_t k = 0; k < warmup; ++k) out.push_back(action(k, true));
  for (std::int64_t k = 0; k < total - warmup; ++k) {
    out.push_back(action(warmup + k, true));
    out.push_back(action(k, false));
  }
  for (std::int64_t k = total - warmup; k < total; ++k) out.push_back(action(k, false));
  for (std::int32_t c = 0; c < v; ++c) out.push_back(update(c * D + d));
}

// One flushed step of stage s over micro-batches [base, base+M).
void flushed_step(std::vector<Action>& out, std::int32_t P, std::int32_t s, std::int64_t base,
                  std::int32_t M, bool one_f_one_b) {
  const std::int32_t warmup = one_f_one_b ? std::min(P - 1 - s, M) : M;
  for (std::int32_t i = 0; i < warmup; ++i) out.push_back(forward(s, base + i));
  for (std::int32_t i = 0; i < M - warmup; ++i) {
    out.push_back(forward(s, base + warmup + i));
    out.push_back(backward(s, base + i));
  }
  for (std::int32_t i = M - warmup; i < M; ++i) out.push_back(backward(s, base + i));
  out.push_back(update(s));
}

// Continuous 1F1B over T micro-batches at stage s, with U after every `every`-th backward.
void continuous(std::vector<Action>& out, std::int32_t P, std::int32_t s, std::int64_t T,
                std::int32_t every) {
  const std::int64_t warmup = std::min<std::int64_t>(P - 1 - s, T);
  std::int64_t backwards = 0;
  auto do_backward = [&](std::int64_t mb) {
    out.push_back(backward(s, mb));
    if (++backwards % every == 0) out.push_back(update(s));
  };
  for (std::int64_t i = 0; i < warmup; ++i) out.push_back(forward(s, i));
  for (std::int64_t i = 0; i < T - warmup; ++i) {
    out.push_back(forward(s, warmup + i));
    do_backward(i);
  }
  for (std::int64_t i = T - warmup; i < T; ++i) do_backward(i);
}

}  // namespace

Schedule generate_schedule(std::string_view kind, std::int32_t P, std::int32_t M, std::int32_t N,
                           std::int32_t chunks) {
  const auto& kinds = generator_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
    throw InputError(fmt::format("unknown schedule kind '{}' (expected one of: {})", kind,
                                 fmt::join(kinds, ", ")));
  if (P <= 0) throw InputError(fmt::format("--stages must be positive, got {}", P));
  if (M <= 0) throw InputError(fmt::format("--microbatches must be positive, got {}", M));
  if (N <= 0) throw InputError(fmt::format("--steps must be positive, got {}", N));
  const std::int64_t total = static_cast<std::int64_t>(M) * N;
  // About 12 bytes an action: past 2^27 actions (1.5 GiB) a schedule is a mistake, not a plan.
  constexpr std::int64_t kMaxActions = std::int64_t{1} << 27;
  const bool two_copies = kind == "dualpipe";
  const std::int32_t stages_per_device =
      chunks > 0 ? chunks : (kind == "interleaved" || v_shaped(kind) || two_copies ? 2 : 1);
  const std::int64_t actions =
      static_cast<std::int64_t>(P) * stages_per_device * (2 * total + total);
  if (total > INT32_MAX / 4 || actions > kMaxActions)
    throw InputError(
        fmt::format("P={} stages x {} micro-batches is about {} actions, more than the "
                    "{} paci generates",
                    P, total, actions, kMaxActions));
  if (chunks < 0) throw InputError(fmt::format("--chunks must be positive, got {}", chunks));
  const bool v_shape = v_shaped(kind);
  const std::int32_t v =
      chunks == 0 ? (kind == "interleaved" || v_shape || two_copies ? 2 : 1) : chunks;
  if (v_shape && v != 2)
    throw InputError(fmt::format(
        "--chunks {}: {} places two model stages on each device (the V), so its chunks are 2", v,
        kind));
  if (two_copies && v != 2)
    throw InputError(fmt::format(
        "--chunks {}: dualpipe places a stage of each of its two copies on each device, so its "
        "chunks are 2",
        v));
  if (two_copies && (P % 2 != 0 || M % 2 != 0 || M < 2 * P))
    throw InputError(fmt::format(
        "dualpipe needs an even number of devices and an even number of micro-batches per step, "
        "at least twice the devices (P even, M even, M >= 2P: DualPipe's own asserts), got P={} "
        "M={}{}",
        P, M, P % 2 != 0 ? " (dualpipev runs on any P)" : ""));
  if (kind != "interleaved" && !v_shape && !two_copies && v != 1)
    throw InputError(fmt::format(
        "--chunks {} applies to interleaved only: {} runs one stage per device", v, kind));
  if (kind == "interleaved" && M % P != 0)
    throw InputError(fmt::format(
        "interleaved needs the micro-batches per step to be a multiple of the devices (Megatron's "
        "constraint), got M={} for P={}",
        M, P));
  if (kind == "dualpipev" && M < 2 * P)
    throw InputError(fmt::format(
        "dualpipev needs at least as many micro-batches per step as model stages (M >= 2P = {}, "
        "DualPipe's and PyTorch's bound), got M={}",
        2 * P, M));
  if (static_cast<std::int64_t>(P) * v > 4096)
    throw InputError(fmt::format("{} devices x {} chunks is more than 4096 stages", P, v));
  if (kind == "2bw" && M < P)
    throw InputError(fmt::format(
        "2bw needs at least as many micro-batches per step as stages (M >= P), got M={} P={}", M,
        P));

  Schedule s;
  s.kind = std::string(kind);
  s.stages = P * v;
  s.microbatches = M;
  s.steps = N;
  s.placement.resize(static_cast<std::size_t>(s.stages));
  s.devices.resize(static_cast<std::size_t>(P));
  for (std::int32_t stage = 0; stage < s.stages; ++stage)
    s.placement[static_cast<std::size_t>(stage)] = stage % P;  // identity unless interleaved
  if (kind == "pipedream") {
    s.microbatches = 1;
    s.steps = static_cast<std::int32_t>(total);
    s.weight_policy = WeightPolicy::stash;
  } else if (kind == "2bw") {
    s.weight_policy = WeightPolicy::double_buffer;
  }
  if (two_copies) {
    s.copies = 2;
    for (std::int32_t stage = P; stage < s.stages; ++stage)
      s.placement[static_cast<std::size_t>(stage)] = s.stages - 1 - stage;  // copy 1 runs back
    repeat_step(s, dualpipe_step(P, M));
    return s;
  }
  if (v_shape) {
    // The V: device d holds stages d and 2P − 1 − d. At most P micro-batches hold activations on
    // a device's first stage (1F1B's P stages' worth of its two half-stages, as ZB-V keeps).
    for (std::int32_t stage = P; stage < s.stages; ++stage)
      s.placement[static_cast<std::size_t>(stage)] = s.stages - 1 - stage;
    repeat_step(s, kind == "dualpipev" ? dualpipe_v_step(P, M) : zero_bubble_v_step(P, M));
    return s;
  }
  if (kind == "zb-h2") {
    // Up to 2P − 1 micro-batches' activations on a stage: enough forwards to fill the warm-up
    // bubble (ZB-H2's memory).
    repeat_step(s, zero_bubble_step(P, M, std::vector<std::int32_t>(P, 2 * P - 1)));
    return s;
  }
  for (std::int32_t d = 0; d < P; ++d) {
    auto& list = s.devices[static_cast<std::size_t>(d)];
    list.reserve(static_cast<std::size_t>(v * (2 * total + s.steps)));
    if (kind == "interleaved") {
      for (std::int32_t step = 0; step < N; ++step)
        interleaved_step(list, P, d, v, static_cast<std::int64_t>(step) * M, M);
    } else if (kind == "zb-h1") {
      for (std::int32_t step = 0; step < N; ++step)
        zb_h1_step(list, P, d, static_cast<std::int64_t>(step) * M, M);
    } else if (kind == "gpipe" || kind == "1f1b") {
      for (std::int32_t step = 0; step < N; ++step)
        flushed_step(list, P, d, static_cast<std::int64_t>(step) * M, M, kind == "1f1b");
    } else {
      continuous(list, P, d, total, s.microbatches);
    }
  }
  return s;
}

}  // namespace paci
