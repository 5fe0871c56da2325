// read_megatron: Megatron-LM pretrain_gpt.py flags (core_v0.16.1) as a plan configuration. Its
// defaults, splits and refusals as its own code has them: megatron/training/arguments.py
// (validate_args) and megatron-core's get_num_layers_to_build and PipelineParallelLayerLayout.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <numeric>

#include <limits>
#include <regex>

#include "base/errors.hpp"
#include "interop/megatron.hpp"
#include "interop/read/launch.hpp"
#include "interop/read/options.hpp"
#include "interop/words.hpp"

namespace paci::interop {

namespace {

constexpr std::string_view kWhat = "--from-megatron";

// Options that change what a step costs and that paci does not model: the line says which.
struct Unmodelled {
  const char* option;
  const char* what;
};
constexpr Unmodelled kUnmodelled[] = {
    {"--fp4-format", "FP4 training"},
    {"--use-torch-fsdp2", "Megatron-LM's FSDP (its ZeRO 2 and 3 as torchtitan runs them are)"},
    {"--use-megatron-fsdp", "Megatron-LM's FSDP (its ZeRO 2 and 3 as torchtitan runs them are)"},
    {"--hybrid-override-pattern", "hybrid (Mamba) layers"},
    {"--rampup-batch-size", "a batch-size ramp (paci predicts one global batch)"},
};

struct Reader {
  std::vector<GivenOption> given;
  std::optional<std::string> value(std::string_view name) const { return last_value(given, name); }
  bool on(std::string_view name) const { return value(name) == "true"; }
  std::optional<std::int64_t> number(std::string_view name) const {
    const auto v = value(name);
    if (!v) return std::nullopt;
    return to_integer(*v, name);
  }
  std::int64_t number_or(std::string_view name, std::int64_t fallback) const {
    return number(name).value_or(fallback);
  }
};

[[noreturn]] void refuse(const std::string& why) {
  throw InputError(fmt::format("{}: {}", kWhat, why));
}

// The most characters (layers) an unrolled layout may have: far above any model's layer count.
constexpr std::size_t kLayoutLimit = std::size_t{1} << 20;

// PipelineParallelLayerLayout.parse_str_to_list: commas dropped, (...)*n and x*n unrolled, '|'
// between stages; E, L, t and m per stage; then validate_layer_layout's rules: one E, the first
// layer of all, one L, the last, as many m (MTP modules) as --mtp-num-layers, on the last stage
// after its layers. Layers per model stage.
std::vector<std::int32_t> layout_partition(std::string layout, std::int64_t mtp_layers) {
  layout.erase(std::remove(layout.begin(), layout.end(), ','), layout.end());
  for (const std::regex& pattern :
       {std::regex(R"(\(([^)]+)\)\*(\d+))"), std::regex(R"((.)\*(\d+))")}) {
    std::string out;
    auto begin = layout.cbegin();
    for (std::sregex_iterator it(layout.begin(), layout.end(), pattern), end; it != end; ++it) {
      out.append(begin, layout.cbegin() + it->position());
      const std::int64_t n = to_integer((*it)[2].str(), "--pipeline-model-parallel-layout's *n");
      // Nested repeats multiply: the unrolled layout is bounded, not each repeat.
      const std::string& part = (*it)[1].str();
      if (static_cast<double>(n) * static_cast<double>(part.size()) +
              static_cast<double>(out.size()) >
          static_cast<double>(kLayoutLimit))
        refuse(fmt::format(
            "--pipeline-model-parallel-layout unrolls to more than {} characters (a layer each)",
            kLayoutLimit));
      for (std::int64_t k = 0; k < n; ++k) out += part;
      begin = layout.cbegin() + it->position() + it->length();
    }
    out.append(begin, layout.cend());
    layout = out;
  }
  const std::string flat = [&] {
    std::string f = layout;
    f.erase(std::remove(f.begin(), f.end(), '|'), f.end());
    return f;
  }();
  if (std::count(flat.begin(), flat.end(), 'E') != 1 || flat.front() != 'E')
    refuse(
        "--pipeline-model-parallel-layout: the embedding (E) must be there once, the first "
        "layer of all (megatron-core's validate_layer_layout)");
  if (std::count(flat.begin(), flat.end(), 'L') != 1 || flat.back() != 'L')
    refuse(
        "--pipeline-model-parallel-layout: the loss (L) must be there once, the last layer of "
        "all (megatron-core's validate_layer_layout)");
  std::vector<std::string> stages(1);
  for (char c : layout) {
    if (c == '|')
      stages.emplace_back();
    else
      stages.back().push_back(c);
  }
  if (std::count(flat.begin(), flat.end(), 'm') != mtp_layers)
    refuse(
        fmt::format("--pipeline-model-parallel-layout has {} multi-token-prediction modules (m), "
                    "--mtp-num-layers {} (megatron-core's validate_layer_layout wants them equal)",
                    std::count(flat.begin(), flat.end(), 'm'), mtp_layers));
  std::vector<std::int32_t> partition;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    std::int32_t layers = 0;
    for (char c : stages[s]) {
      if (c == 't')
        ++layers;
      else if (c == 'm') {
        // megatron-core's validate_layer_layout: the modules after every decoder layer, on the
        // last stage; paci's cost model holds them there.
        if (s + 1 != stages.size() || stages[s].find('t', stages[s].find('m')) != std::string::npos)
          refuse(
              "--pipeline-model-parallel-layout: the multi-token-prediction modules (m) go on the "
              "last stage, after its layers, as paci places them");
      } else if (c == 'E' ? s != 0 : c == 'L' ? s + 1 != stages.size() : true)
        refuse(fmt::format("--pipeline-model-parallel-layout: '{}' {}", c,
                           c == 'E' || c == 'L'
                               ? "must be in the first (E) or last (L) stage as paci places them"
                               : "is not a layer Megatron-LM knows (E, L, t, m)"));
    }
    if (stages[s].find(s == 0 ? 'E' : 'L') == std::string::npos &&
        (s == 0 || s + 1 == stages.size()))
      refuse(fmt::format("--pipeline-model-parallel-layout: the {} stage has no {}",
                         s == 0 ? "first" : "last", s == 0 ? "embedding (E)" : "loss (L)"));
    if (layers == 0)
      refuse(fmt::format(
          "--pipeline-model-parallel-layout: stage {} holds no transformer layer; paci's stages "
          "hold at least one",
          s));
    partition.push_back(layers);
  }
  return partition;
}

// --moe-layer-freq's pattern as Megatron-LM's moe_freq_type evaluates it: list literals of
// integers, + (concatenation), * (repetition) and parentheses, nothing else (its _eval_pattern
// refuses any other character, spaces included). Bounded here: 4096 characters, 200 nested
// parentheses (Python's own limit), 2^20 entries unrolled.
std::vector<int> moe_layer_pattern(const std::string& text) {
  constexpr std::size_t kMaxText = 4096, kMaxDepth = 200, kMaxEntries = std::size_t{1} << 20;
  const std::string shown = text.size() > 60 ? text.substr(0, 60) + "..." : text;
  const auto fail = [&](std::string_view what) -> std::vector<int> {
    refuse(fmt::format("--moe-layer-freq {}: {} (a pattern such as ([0]*3+[1]*58))", shown, what));
  };
  if (text.size() > kMaxText) fail(fmt::format("longer than {} characters", kMaxText));
  for (std::size_t k = 0; k < text.size(); ++k)
    if (std::string_view(",0123456789[]()+*").find(text[k]) == std::string_view::npos)
      refuse(fmt::format(
          "--moe-layer-freq: character {} of the pattern is not one of ,0-9[]()+* (Megatron-LM's "
          "parser refuses it)",
          k + 1));
  std::size_t at = 0, depth = 0;
  const auto number = [&]() -> std::int64_t {
    const std::size_t from = at;
    while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) ++at;
    if (from == at) fail("a number expected");
    return to_integer(text.substr(from, at - from), "--moe-layer-freq");
  };
  std::function<std::vector<int>()> sum;
  const auto factor = [&]() -> std::vector<int> {
    std::vector<int> out;
    if (at < text.size() && text[at] == '(') {
      if (++depth > kMaxDepth) fail(fmt::format("more than {} nested parentheses", kMaxDepth));
      ++at;
      out = sum();
      if (at >= text.size() || text[at] != ')') fail("a ')' expected");
      ++at;
      --depth;
    } else if (at < text.size() && text[at] == '[') {
      ++at;
      for (;;) {
        out.push_back(static_cast<int>(std::min<std::int64_t>(number(), 2)));
        if (at < text.size() && text[at] == ',') {
          ++at;
          continue;
        }
        if (at >= text.size() || text[at] != ']') fail("a ']' expected");
        ++at;
        break;
      }
    } else {
      fail("a list expected");
    }
    while (at < text.size() && text[at] == '*') {
      ++at;
      const std::int64_t n = number();
      if (n == 0 || out.empty()) {
        out.clear();
        continue;
      }
      if (static_cast<double>(n) * static_cast<double>(out.size()) >
          static_cast<double>(kMaxEntries))
        fail("it unrolls past 2^20 layers");
      std::vector<int> repeated;
      repeated.reserve(out.size() * static_cast<std::size_t>(n));
      for (std::int64_t k = 0; k < n; ++k) repeated.insert(repeated.end(), out.begin(), out.end());
      out = std::move(repeated);
    }
    return out;
  };
  sum = [&]() -> std::vector<int> {
    std::vector<int> out = factor();
    while (at < text.size() && text[at] == '+') {
      ++at;
      const std::vector<int> more = factor();
      if (out.size() + more.size() > kMaxEntries) fail("it unrolls past 2^20 layers");
      out.insert(out.end(), more.begin(), more.end());
    }
    return out;
  };
  std::vector<int> out = sum();
  if (at != text.size()) fail("unexpected text after the pattern");
  if (std::any_of(out.begin(), out.end(), [](int x) { return x != 0 && x != 1; }))
    fail("its entries are 0 (dense) or 1 (experts)");
  return out;
}

plan::ModelSpec model_of(const Reader& r, const LaunchContext& context,
                         std::vector<std::string>& notes) {
  plan::ModelSpec m;
  for (const char* required :
       {"--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length"})
    if (!r.value(required)) refuse(fmt::format("{} is missing (Megatron-LM needs it)", required));
  m.layers = *r.number("--num-layers");
  m.d_model = *r.number("--hidden-size");
  m.heads = *r.number("--num-attention-heads");
  m.seq_len = *r.number("--seq-length");
  m.kv_heads = r.on("--group-query-attention") ? r.number_or("--num-query-groups", 1) : m.heads;
  // validate_args: --kv-channels defaults to h/a.
  if (const auto d = r.number("--kv-channels"); d && *d * m.heads != m.d_model) m.head_width = *d;
  const bool swiglu = r.on("--swiglu");
  // validate_args: SwiGLU's two input projections get 2/3 of 4h, rounded down to a multiple of 64.
  m.ffn = r.number("--ffn-hidden-size")
              .value_or(swiglu ? (4 * m.d_model * 2 / 3) / 64 * 64 : 4 * m.d_model);
  const std::string norm = r.value("--normalization").value_or("LayerNorm");
  const std::string position = r.value("--position-embedding-type").value_or("learned_absolute");
  if (swiglu && norm == "RMSNorm" && position == "rope") {
    m.arch = plan::Arch::llama;
  } else if (!swiglu && norm == "LayerNorm" && position == "learned_absolute") {
    m.arch = plan::Arch::gpt;
  } else {
    refuse(fmt::format(
        "a model with {}, {} and {} positions: paci models GPT (LayerNorm, GeLU, learned "
        "positions) and Llama (RMSNorm, SwiGLU, rotary)",
        swiglu ? "SwiGLU" : "GeLU", norm, position));
  }
  m.tied_embeddings = !r.on("--untie-embeddings-and-output-weights");
  // A mixture of experts: routed experts in every layer (or after dense first layers, below),
  // each of --moe-ffn-hidden-size (default: --ffn-hidden-size).
  if (const auto experts = r.number("--num-experts"); experts && *experts > 0) {
    m.experts = *experts;
    m.top_k = r.number_or("--moe-router-topk", 2);
    const std::int64_t mlp_width = m.ffn;  // --ffn-hidden-size: the dense layers' when there are
    m.ffn = r.number("--moe-ffn-hidden-size").value_or(m.ffn);
    m.shared_expert_ffn = r.number_or("--moe-shared-expert-intermediate-size", 0);
    // The router: Megatron-LM's default (softmax), or DeepSeek-V3's as paci emits it (sigmoid
    // scores with the balancing expert bias, 8 groups keeping 4, the outputs scaled by 2.5);
    // other routers are refused.
    const std::string scores = r.value("--moe-router-score-function").value_or("softmax");
    const std::int64_t groups = r.number_or("--moe-router-num-groups", 0);
    const std::int64_t kept = r.number_or("--moe-router-group-topk", 0);
    const std::string scale = r.value("--moe-router-topk-scaling-factor").value_or("none");
    const bool bias = r.on("--moe-router-enable-expert-bias");
    if (scores == "sigmoid" && bias && groups == plan::kDeepSeekRouterGroups &&
        kept == plan::kDeepSeekRouterGroupTopk && (scale == "2.5" || scale == "2.50"))
      m.router = plan::Router::deepseek_v3;
    else if (scores != "softmax" || bias || groups > 0 || scale != "none")
      refuse(fmt::format(
          "a {} router{} with {} expert groups keeping {}, scaled by {}: paci reads Megatron-LM's "
          "softmax router and DeepSeek-V3's (--moe-router-score-function sigmoid "
          "--moe-router-enable-expert-bias --moe-router-num-groups {} --moe-router-group-topk {} "
          "--moe-router-topk-scaling-factor 2.5)",
          scores, bias ? " with an expert bias" : "", groups, kept, scale,
          plan::kDeepSeekRouterGroups, plan::kDeepSeekRouterGroupTopk));
    // Dense first layers (DeepSeek-V3's): megatron-core's pattern of 0s then 1s, the dense
    // layers' MLP --ffn-hidden-size wide, the experts' --moe-ffn-hidden-size (validate_args'
    // default: the same).
    if (const auto freq = r.value("--moe-layer-freq"); freq && *freq != "1") {
      const std::vector<int> pattern = moe_layer_pattern(*freq);
      if (static_cast<std::int64_t>(pattern.size()) != m.layers)
        refuse(fmt::format("--moe-layer-freq: the pattern has {} entries, --num-layers {}",
                           pattern.size(), m.layers));
      const auto dense =
          static_cast<std::int64_t>(std::find(pattern.begin(), pattern.end(), 1) - pattern.begin());
      if (std::count(pattern.begin(), pattern.end(), 0) != dense || dense == m.layers)
        refuse(
            "--moe-layer-freq: paci models dense layers first, then experts in all the rest "
            "(a pattern of 0s, then 1s)");
      m.dense_layers = dense;
      m.dense_ffn = dense > 0 ? mlp_width : 0;
    }
  }
  // Multi-head latent attention (megatron-core's MLATransformerConfig): the parser's defaults
  // where the flags are silent (--kv-lora-rank 32, no query latent, heads of 128 with 64 rotary
  // columns); a key and a value per head.
  if (r.on("--multi-latent-attention")) {
    if (m.arch != plan::Arch::llama)
      refuse(
          "--multi-latent-attention: paci models latent attention in Llama-style models "
          "(RMSNorm, SwiGLU, rotary)");
    const std::int64_t qk = r.number_or("--qk-head-dim", 128), v = r.number_or("--v-head-dim", 128);
    if (qk != v)
      refuse(fmt::format(
          "--qk-head-dim {} and --v-head-dim {}: paci models latent attention with query, key and "
          "value heads of one width (plus the rotary columns)",
          qk, v));
    if (!r.on("--qk-layernorm"))
      refuse(
          "--multi-latent-attention without --qk-layernorm: paci models the latents' RMSNorms "
          "(DeepSeek-V3's)");
    m.kv_lora_rank = r.number_or("--kv-lora-rank", 32);
    m.q_lora_rank = r.number_or("--q-lora-rank", 0);
    m.rope_head_width = r.number_or("--qk-pos-emb-head-dim", 64);
    m.head_width = qk * m.heads != m.d_model ? qk : 0;
    m.kv_heads = m.heads;
  }
  m.mtp_layers = r.number_or("--mtp-num-layers", 0);
  if (m.mtp_layers > 0 && m.arch != plan::Arch::llama)
    refuse(
        "--mtp-num-layers: Megatron-LM's multi-token prediction needs rotary positions "
        "(validate_args), and paci models it in Llama-style models");
  if (const auto v = r.number("--vocab-size"))
    m.vocab = *v;
  else if (context.vocab)
    m.vocab = *context.vocab;
  // The preset of this shape (its vocabulary when the flags do not say), one of this sequence
  // length first (Llama 2 70B and Llama 3 70B differ only in vocabulary and sequence).
  const plan::ModelSpec* match = nullptr;
  for (const plan::ModelSpec& preset : plan::model_presets()) {
    plan::ModelSpec same = m;
    same.name = preset.name;
    same.seq_len = preset.seq_len;
    if (!m.vocab) same.vocab = preset.vocab;
    if (same == preset && (!match || (preset.seq_len == m.seq_len && match->seq_len != m.seq_len)))
      match = &preset;
  }
  if (match) {
    if (!m.vocab) {
      m.vocab = match->vocab;
      notes.push_back(fmt::format(
          "the vocabulary is {}'s, {} (Megatron-LM takes it from its tokenizer; --vocab N sets it)",
          match->name, match->vocab));
    }
    m.name = m.seq_len == match->seq_len ? match->name : match->name + " (modified)";
  }
  if (!m.vocab)
    refuse(
        "the vocabulary is not in the flags (Megatron-LM takes it from its tokenizer) and the "
        "shape is no preset's: give --vocab-size in the flags or paci's --vocab N");
  plan::check_model(m);
  return m;
}

// Layers per model stage (p·v, model order) as megatron-core's get_num_layers_to_build gives them
// to (pipeline rank r, virtual stage j): model stage j·p + r.
std::vector<std::int32_t> megatron_partition(const Reader& r, const plan::PlanConfig& c) {
  const std::int64_t L = c.model.layers, p = c.pp, v = c.chunks;
  const auto first = r.number("--decoder-first-pipeline-num-layers");
  const auto last = r.number("--decoder-last-pipeline-num-layers");
  const bool account_embedding = r.on("--account-for-embedding-in-pipeline-split");
  const bool account_loss = r.on("--account-for-loss-in-pipeline-split");
  std::vector<std::int64_t> per_rank(static_cast<std::size_t>(p));
  if (first || last) {
    if (account_embedding || account_loss)
      refuse(
          "Megatron-LM refuses --account-for-embedding/loss-in-pipeline-split with "
          "--decoder-first/last-pipeline-num-layers");
    std::int64_t rest = L, left = p;
    if (first) rest -= *first, --left;
    if (last) rest -= *last, --left;
    if (left > 0 && (rest < 0 || rest % left != 0))
      refuse(
          fmt::format("Megatron-LM refuses the split: the {} layers left over do not divide "
                      "among the {} middle stages",
                      rest, left));
    std::fill(per_rank.begin(), per_rank.end(), left > 0 ? rest / left : 0);
    if (first) per_rank.front() = *first;
    if (last) per_rank.back() = *last;
  } else {
    const std::int64_t counted = L + (account_embedding ? 1 : 0) + (account_loss ? 1 : 0);
    if (counted % p != 0)
      refuse(
          fmt::format("Megatron-LM refuses {} layers{} on {} pipeline stages: num_layers must "
                      "be divisible by the pipeline size (or give a layout)",
                      L, counted != L ? " (counting the embedding/loss)" : "", p));
    std::fill(per_rank.begin(), per_rank.end(), counted / p);
  }
  std::vector<std::int32_t> partition(static_cast<std::size_t>(p * v));
  for (std::int64_t rank = 0; rank < p; ++rank) {
    if (v > 1 && per_rank[rank] % v != 0)
      refuse(
          fmt::format("Megatron-LM refuses pipeline rank {}'s {} layers for {} virtual stages "
                      "(not divisible)",
                      rank, per_rank[rank], v));
    for (std::int64_t j = 0; j < v; ++j)
      partition[static_cast<std::size_t>(j * p + rank)] =
          static_cast<std::int32_t>(per_rank[rank] / v);
  }
  if (account_embedding) --partition.front();
  if (account_loss) --partition.back();
  for (std::size_t s = 0; s < partition.size(); ++s)
    if (partition[s] < 1)
      refuse(
          fmt::format("model stage {} would hold {} transformer layers; paci's stages hold at "
                      "least one",
                      s, partition[s]));
  return partition;
}

}  // namespace

ReadLaunch read_megatron(std::string_view text, const LaunchContext& context) {
  const LaunchWords words = split_launch(shell_split(text, kWhat), kWhat);
  Reader r{parse_options(megatron_options(), words.options)};
  ReadLaunch out;
  out.program = words.launcher;
  if (!words.program.empty()) out.program.push_back(words.program);
  for (const Unmodelled& u : kUnmodelled)
    if (r.value(u.option)) refuse(fmt::format("{}: paci does not model {} yet", u.option, u.what));
  if (const auto s = r.value("--data-parallel-sharding-strategy"); s && *s != "no_shard")
    refuse(fmt::format(
        "--data-parallel-sharding-strategy {}: paci does not model FSDP sharding yet", *s));
  if (r.on("--fp16")) refuse("--fp16: paci models bf16 mixed-precision training");
  if (!r.on("--bf16"))
    refuse("no --bf16: Megatron-LM would train in fp32, and paci models bf16 mixed precision");

  plan::PlanConfig& c = out.config;
  c.cluster = context.cluster;
  c.gpus = launch_gpus(context, words, "Megatron-LM");
  c.model = model_of(r, context, out.notes);
  c.tp = static_cast<std::int32_t>(r.number_or("--tensor-model-parallel-size", 1));
  c.cp = static_cast<std::int32_t>(r.number_or("--context-parallel-size", 1));
  c.pp = static_cast<std::int32_t>(r.number_or("--pipeline-model-parallel-size", 1));
  if (c.tp < 1 || c.pp < 1 || c.cp < 1) refuse("the parallel sizes must be 1 or more");
  if (c.model.moe()) {
    c.ep = static_cast<std::int32_t>(r.number_or("--expert-model-parallel-size", 1));
    // validate_args: expert tensor parallelism defaults to the tensor-parallel size.
    const std::int64_t etp = r.number_or("--expert-tensor-parallel-size", c.tp);
    if (etp != 1)
      refuse(fmt::format(
          "--expert-tensor-parallel-size {}: paci models whole experts on each GPU of the "
          "expert-parallel group (--expert-tensor-parallel-size 1)",
          etp));
    const std::string dispatcher = r.value("--moe-token-dispatcher-type").value_or("allgather");
    if (dispatcher != "alltoall")
      out.notes.push_back(fmt::format(
          "--moe-token-dispatcher-type {}: paci models the all-to-all dispatcher", dispatcher));
  } else if (r.number_or("--expert-model-parallel-size", 1) != 1) {
    refuse("--expert-model-parallel-size without --num-experts: the model has no experts");
  }
  if (c.gpus % (std::int64_t{c.tp} * c.cp * c.pp) != 0)
    refuse(
        fmt::format("Megatron-LM refuses a world of {} GPUs for tensor {} × context {} × pipeline "
                    "{} (not divisible)",
                    c.gpus, c.tp, c.cp, c.pp));
  if (c.cp > 1) {
    // One communication type for every layer (a list gives one per layer, which paci reads when
    // all are the same).
    const std::vector<std::string> types =
        last_values(r.given, "--cp-comm-type").value_or(std::vector<std::string>{"p2p"});
    for (const std::string& type : types)
      if (type != types.front() || (type != "p2p" && type != "all_gather"))
        refuse(fmt::format(
            "--cp-comm-type {}: paci models p2p (a ring) and all_gather, one for every layer",
            type));
    c.cp_all_gather = types.front() == "all_gather";
  }
  const auto layout = r.value("--pipeline-model-parallel-layout");
  const auto vstages = r.number("--num-virtual-stages-per-pipeline-rank");
  const auto vlayers = r.number("--num-layers-per-virtual-pipeline-stage");
  if ((layout ? 1 : 0) + (vstages ? 1 : 0) + (vlayers ? 1 : 0) > 1)
    refuse(
        "Megatron-LM takes one of --pipeline-model-parallel-layout, "
        "--num-virtual-stages-per-pipeline-rank and --num-layers-per-virtual-pipeline-stage");
  c.chunks = 1;
  if (layout) {
    c.partition = layout_partition(*layout, c.model.mtp_layers);
    const std::int64_t in_layout =
        std::accumulate(c.partition.begin(), c.partition.end(), std::int64_t{0});
    if (in_layout != c.model.layers)
      refuse(fmt::format(
          "the layout has {} transformer layers (t), --num-layers is {}: they must match",
          in_layout, c.model.layers));
    if (c.partition.size() % static_cast<std::size_t>(c.pp) != 0)
      refuse(fmt::format("the layout's {} stages are no multiple of the pipeline size {}",
                         c.partition.size(), c.pp));
    c.chunks = static_cast<std::int32_t>(c.partition.size() / static_cast<std::size_t>(c.pp));
  } else if (vstages) {
    c.chunks = static_cast<std::int32_t>(*vstages);
  } else if (vlayers) {
    if (r.value("--decoder-first-pipeline-num-layers") ||
        r.value("--decoder-last-pipeline-num-layers"))
      refuse(
          "Megatron-LM refuses --num-layers-per-virtual-pipeline-stage with "
          "--decoder-first/last-pipeline-num-layers");
    // The embedding and the loss count as layers when the split accounts for them.
    const std::int64_t counted = c.model.layers +
                                 (r.on("--account-for-embedding-in-pipeline-split") ? 1 : 0) +
                                 (r.on("--account-for-loss-in-pipeline-split") ? 1 : 0);
    if (*vlayers < 1 || counted % (c.pp * *vlayers) != 0)
      refuse(
          fmt::format("Megatron-LM refuses {} layers per virtual stage: {} layers on {} "
                      "pipeline stages do not divide into them",
                      *vlayers, counted, c.pp));
    c.chunks = static_cast<std::int32_t>(counted / (c.pp * *vlayers));
  }
  if (c.chunks < 1) refuse("the virtual stages per pipeline rank must be 1 or more");
  if (c.chunks > 1 && c.pp == 1)
    refuse("Megatron-LM refuses virtual pipeline stages with a pipeline size of 1");
  c.kind = c.chunks > 1 ? "interleaved" : "1f1b";
  // Pipeline sends: overlapped in the interleaved schedule unless turned off; validate_args turns
  // the overlap off for the non-interleaved one, which waits on every send (paci's 1f1b default).
  if (c.kind == "interleaved" && r.on("--no-overlap-p2p-communication")) c.overlap_p2p = false;
  if (!layout) c.partition = megatron_partition(r, c);
  if (!r.value("--micro-batch-size")) refuse("--micro-batch-size is missing");
  c.microbatch_size = *r.number("--micro-batch-size");
  c.global_batch = r.number("--global-batch-size").value_or(c.microbatch_size * c.dp());
  if (c.microbatch_size < 1 || c.global_batch < 1) refuse("the batch sizes must be 1 or more");
  if (c.global_batch % (c.microbatch_size * c.dp()) != 0)
    refuse(
        fmt::format("Megatron-LM refuses global batch {}: not divisible by micro-batch {} × "
                    "data parallel {}",
                    c.global_batch, c.microbatch_size, c.dp()));

  const auto granularity = r.value("--recompute-granularity");
  if (r.on("--recompute-activations") || granularity == "selective") {
    if (r.value("--recompute-method"))
      refuse("Megatron-LM refuses --recompute-method with selective recomputation");
    c.recompute = plan::Recompute::selective;
  } else if (granularity == "full") {
    const std::string method = r.value("--recompute-method").value_or("");
    if (method.empty())
      refuse("--recompute-granularity full needs --recompute-method (Megatron-LM)");
    // TransformerConfig refuses full recomputation without a layer count.
    const auto n = r.number("--recompute-num-layers");
    if (!n) refuse("--recompute-granularity full needs --recompute-num-layers (megatron-core)");
    const std::int32_t most = *std::max_element(c.partition.begin(), c.partition.end());
    if (method == "block" && *n < most)
      refuse(
          fmt::format("--recompute-method block --recompute-num-layers {} recomputes part of a "
                      "stage's {} layers; paci models recomputing all of them or none",
                      *n, most));
    c.recompute = plan::Recompute::full;
  }
  c.sequence_parallel = r.on("--sequence-parallel");
  if (c.sequence_parallel && c.tp == 1) {
    c.sequence_parallel = false;  // validate_args turns it off, with a warning
    out.notes.push_back(
        "--sequence-parallel with tensor parallel size 1: Megatron-LM turns it off");
  }
  c.tp_comm_overlap = r.on("--tp-comm-overlap");
  if (c.tp_comm_overlap && !c.sequence_parallel)
    refuse("Megatron-LM refuses --tp-comm-overlap without --sequence-parallel");
  c.zero = r.on("--use-distributed-optimizer") ? 1 : 0;
  // Instances of the distributed optimizer (HSDP): each shards over d·c / instances replicas.
  if (const auto instances = r.number("--num-distributed-optimizer-instances");
      instances && *instances != 1) {
    const std::int64_t replicas = c.dp() * c.cp;
    if (c.zero == 0)
      refuse("--num-distributed-optimizer-instances needs --use-distributed-optimizer");
    if (*instances < 1 || replicas % *instances != 0)
      refuse(fmt::format(
          "--num-distributed-optimizer-instances {} must divide the data x context-parallel {}",
          *instances, replicas));
    c.shard_group = replicas / *instances;
  }
  // validate_args: bf16 gradients with --grad-reduce-in-bf16 (or a bf16 --main-grads-dtype),
  // else --bf16 forces their accumulation and reduction to fp32.
  c.bf16_gradients =
      r.on("--grad-reduce-in-bf16") || r.value("--main-grads-dtype").value_or("fp32") == "bf16";
  // FP8 (Transformer Engine): per-tensor delayed or current ("tensorwise") scaling as paci's fp8,
  // mxfp8 as mxfp8; blockwise (DeepSeek's 128 x 128) and custom recipes are not modelled.
  if (r.value("--fp8-format")) {
    const std::string recipe = r.value("--fp8-recipe").value_or("delayed");
    if (recipe == "delayed" || recipe == "tensorwise")
      c.precision = plan::Precision::fp8;
    else if (recipe == "mxfp8")
      c.precision = plan::Precision::mxfp8;
    else
      refuse(fmt::format(
          "--fp8-recipe {}: paci models FP8 with per-tensor scales (delayed, tensorwise) and "
          "MXFP8 (mxfp8)",
          recipe));
    if (recipe == "tensorwise")
      out.notes.push_back(
          "--fp8-recipe tensorwise: modelled as paci's fp8 (delayed scaling's casts and amax "
          "reductions); current scaling computes each amax before its cast instead");
    if (r.on("--first-last-layers-bf16"))
      out.notes.push_back(
          "--first-last-layers-bf16: paci runs every layer's GEMMs in FP8 (the first and last "
          "layers' bf16 GEMMs are not modelled)");
    c.fp8_params = r.on("--fp8-param-gather");
  }
  // AdamW's moments: fp32, or with the precision-aware optimizer the dtypes it is given.
  const std::string exp_avg = r.value("--exp-avg-dtype").value_or("fp32"),
                    exp_avg_sq = r.value("--exp-avg-sq-dtype").value_or("fp32");
  if (r.on("--use-precision-aware-optimizer")) {
    if (const std::string main = r.value("--main-params-dtype").value_or("fp32"); main != "fp32")
      refuse(fmt::format("--main-params-dtype {}: paci models fp32 master weights", main));
    if (exp_avg != exp_avg_sq || (exp_avg != "fp32" && exp_avg != "bf16"))
      refuse(fmt::format(
          "--exp-avg-dtype {} with --exp-avg-sq-dtype {}: paci models both moments in fp32 or "
          "both in bf16",
          exp_avg, exp_avg_sq));
    c.bf16_moments = exp_avg == "bf16";
    if (!c.bf16_moments)
      out.notes.push_back(
          "--use-precision-aware-optimizer with fp32 moments: paci models 12 bytes of optimizer "
          "state per parameter (the master weights kept as 16-bit remainders are not modelled)");
  } else if (exp_avg != "fp32" || exp_avg_sq != "fp32") {
    refuse(
        "--exp-avg-dtype and --exp-avg-sq-dtype other than fp32 need "
        "--use-precision-aware-optimizer (megatron-core's OptimizerConfig refuses them "
        "without)");
  }

  c.overlap_grad_reduce = r.on("--overlap-grad-reduce");
  // Activation offloading (validate_args: on for a layer count above 0).
  const std::int64_t offload = r.number_or("--cpu-offloading-num-layers", 0);
  if (offload < 0 || offload > std::numeric_limits<std::int32_t>::max())
    refuse(fmt::format("--cpu-offloading-num-layers {} is out of range", offload));
  c.offload_layers = static_cast<std::int32_t>(offload);
  if (r.on("--overlap-param-gather"))
    out.notes.push_back(
        "--overlap-param-gather: paci keeps the distributed optimizer's parameter "
        "all-gather in the optimizer step, not overlapped (docs/costmodel.md)");
  // "local" is megatron-core's own unfused attention core, as "unfused" is Transformer Engine's.
  const std::string backend = r.value("--attention-backend").value_or("auto");
  c.flash_attention = backend != "unfused" && backend != "local";
  const bool connections_set = std::find(words.env.begin(), words.env.end(),
                                         "CUDA_DEVICE_MAX_CONNECTIONS=1") != words.env.end();
  if (!connections_set && c.tp > 1)
    out.notes.push_back(
        "Megatron-LM core_v0.16.1's validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with "
        "tensor parallelism before Blackwell; the words read do not set it");
  if (const std::string why = megatron_refusal(c); !why.empty()) refuse(why);
  plan::check_config(c);
  return out;
}

}  // namespace paci::interop
