// plan_json, plan_text, plan_timeline, write_plan_files.
#include "plan/report/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "plan/report/plot.hpp"
#include "schedules/formats.hpp"
#include "traces/chrome_trace.hpp"

namespace paci::plan {

namespace {

double gib(double bytes) {
  return bytes / (1024.0 * 1024.0 * 1024.0);
}

// What an F or B's tensor-parallel collectives are, for the trace.
std::string tp_phase_name(const PlanResult& p) {
  return p.config.sequence_parallel ? "tensor-parallel reduce-scatter + all-gather"
                                    : "tensor-parallel all-reduce";
}

std::string on_off(bool on) {
  return on ? "on" : "off";
}

// "ZeRO 0 (replicated)", "ZeRO 1 (optimizer state sharded)", ...
std::string zero_text(std::int32_t zero) {
  static const char* const what[] = {"replicated", "optimizer state sharded",
                                     "optimizer state and gradients sharded",
                                     "optimizer state, gradients and weights sharded"};
  return fmt::format("ZeRO {} ({})", zero, what[std::clamp(zero, 0, 3)]);
}

// Static bytes (weights, gradients, optimizer state, workspace) of the stages on each device.
std::vector<std::int64_t> static_bytes_per_device(const PlanResult& p) {
  std::vector<std::int64_t> out(p.memory_per_device.size(), 0);  // (a search keeps no action lists)
  for (std::size_t s = 0; s < p.costs.stages.size(); ++s)
    out[static_cast<std::size_t>(p.schedule.placement[s])] += p.costs.stages[s].static_bytes();
  return out;
}

}  // namespace

ordered_json plan_json(const PlanResult& p) {
  const PlanConfig& c = p.config;
  ordered_json j;
  j["kind"] = c.kind;
  j["tp"] = c.tp;
  j["cp"] = c.cp;
  j["cp_comm"] = c.cp_all_gather ? "all_gather" : "p2p";
  j["pp"] = c.pp;
  j["dp"] = p.dp;
  j["chunks"] = c.chunks;
  j["microbatch_size"] = c.microbatch_size;
  j["microbatches"] = p.microbatches;
  j["recompute"] = std::string(to_string(c.recompute));
  j["sequence_parallel"] = c.sequence_parallel;
  j["tp_comm_overlap"] = c.tp_comm_overlap;
  j["distributed_optimizer"] = c.zero >= 1;  // the optimizer state sharded (ZeRO 1 or more)
  j["zero"] = c.zero;
  j["shard_group"] = c.zero > 0 ? c.shards() : 0;  // ZeRO's sharding group (HSDP: below d·c)
  j["overlap_grad_reduce"] = c.overlap_grad_reduce;
  j["overlap_p2p"] = c.p2p_overlapped();
  j["offload_layers"] = c.offload_layers;
  j["ep"] = c.ep;
  j["expert_load"] = c.expert_load;
  j["attention"] = c.flash_attention ? "flash" : "unfused";
  j["precision"] = std::string(to_string(c.precision));
  j["grad_dtype"] = c.bf16_gradients ? "bf16" : "fp32";
  j["fp8_param_gather"] = c.fp8_params;
  j["moments_dtype"] = c.bf16_moments ? "bf16" : "fp32";
  j["partition"] = ordered_json::array();
  // Layers per model stage (DualPipe: one copy's; the other's are the same).
  for (const StagePlan& s : p.stages)
    if (s.stage < c.model_stages()) j["partition"].push_back(s.layers);
  j["step_s"] = p.step_s;
  j["tokens_per_s"] = p.tokens_per_s;
  j["model_tflops_per_gpu"] = p.model_tflops_per_gpu;
  j["mfu"] = p.mfu;
  j["bubble_ratio"] = p.bubble_ratio;
  j["peak_memory_bytes"] = p.peak_memory_bytes;
  j["memory_limit_bytes"] = static_cast<std::int64_t>(p.memory_limit_bytes);
  j["host_memory_bytes"] = p.host_memory_bytes;  // offloaded activations per GPU
  j["fits"] = p.fits;
  j["max_staleness"] = p.max_staleness;
  j["simulated_steps"] = p.simulated_steps;
  const std::vector<std::int64_t> fixed = static_bytes_per_device(p);
  j["memory_per_stage"] = ordered_json::array();
  for (std::size_t d = 0; d < p.memory_per_device.size(); ++d) {
    ordered_json stages = ordered_json::array();
    for (const StagePlan& s : p.stages)
      if (static_cast<std::size_t>(s.device) == d) stages.push_back(s.stage);
    j["memory_per_stage"].push_back({{"device", d},
                                     {"stages", stages},
                                     {"peak_bytes", p.memory_per_device[d]},
                                     {"static_bytes", fixed[d]},
                                     {"activation_bytes", p.memory_per_device[d] - fixed[d]}});
  }
  j["stages"] = ordered_json::array();
  for (const StagePlan& s : p.stages) {
    const StageCost& cost = p.costs.stages[static_cast<std::size_t>(s.stage)];
    j["stages"].push_back(
        {{"stage", s.stage},
         {"device", s.device},
         {"first_layer", s.first_layer},
         {"layers", s.layers},
         {"embedding", s.embedding},
         {"head", s.head},
         {"parameters_per_gpu", s.pieces.parameters},
         {"forward_s", cost.forward_s},
         {"forward_tp_comm_s", s.pieces.forward_comm_s},
         {"backward_s", cost.backward_s},
         {"backward_tp_comm_s", s.pieces.backward_comm_s},
         {"recompute_s", s.pieces.recompute_s},
         {"input_grad_s", cost.input_grad_s},
         {"weight_grad_s", cost.weight_grad_s},
         {"update_s", cost.update_s},
         {"optimizer_s", s.optimizer_s},
         {"dp_reduce_s", s.reduce_s},
         {"dp_reduce_exposed_s", s.exposed_reduce_s},
         {"activation_bytes_per_microbatch", cost.activation_bytes},
         {"message_bytes", std::max(cost.activation_message_bytes, cost.gradient_message_bytes)}});
  }
  return j;
}

ordered_json plans_document(const std::vector<PlanResult>& plans) {
  ordered_json j;
  j["format"] = std::string(kPlanFormatTag);
  if (!plans.empty()) {
    const PlanConfig& c = plans.front().config;
    const ModelSpec& m = c.model;
    j["model"] = {{"name", m.name},
                  {"arch", std::string(to_string(m.arch))},
                  {"layers", m.layers},
                  {"d_model", m.d_model},
                  {"heads", m.heads},
                  {"kv_heads", m.kv_heads},
                  {"head_dim", m.head_dim()},
                  {"ffn", m.ffn},
                  {"vocab", m.vocab},
                  {"seq_len", m.seq_len},
                  {"tied_embeddings", m.tied_embeddings},
                  {"experts", m.experts},
                  {"top_k", m.top_k},
                  {"shared_expert_ffn", m.shared_expert_ffn},
                  {"router", m.moe() ? to_string(m.router) : "none"},
                  {"dense_layers", m.dense_layers},
                  {"dense_ffn", m.dense_ffn},
                  {"q_lora_rank", m.q_lora_rank},
                  {"kv_lora_rank", m.kv_lora_rank},
                  {"rope_head_dim", m.rope_head_width},
                  {"mtp_layers", m.mtp_layers},
                  {"parameters", plans.front().parameters}};
    j["cluster"] = {{"name", c.cluster.name},
                    {"description", c.cluster.description},
                    {"memory_bytes", c.cluster.memory_bytes},
                    {"peak_flops", c.cluster.peak_flops},
                    {"gpus_per_node", c.cluster.gpus_per_node}};
    j["gpus"] = c.gpus;
    j["global_batch"] = c.global_batch;
  }
  j["plans"] = ordered_json::array();
  for (const PlanResult& p : plans) j["plans"].push_back(plan_json(p));
  return j;
}

std::string plan_text(const PlanResult& p) {
  const PlanConfig& c = p.config;
  const ModelSpec& m = c.model;
  std::string out = fmt::format(
      "{} ({:.2f} B parameters) on {} x {}, global batch {} x {} tokens\n"
      "t={}{} p={} d={}{} v={} b={} M={}, {}, recompute {}, sequence parallel {}{}, {}, "
      "overlapped gradient reduction {}{}, {} attention{}{}{}\n",
      m.name, static_cast<double>(p.parameters) / 1e9, c.gpus, c.cluster.name, c.global_batch,
      m.seq_len, c.tp, cp_label(c, " c={}"), c.pp, p.dp,
      m.moe() ? fmt::format(" e={} ({} experts, top {}{})", c.ep, m.experts, m.top_k,
                            c.expert_load > 1 ? fmt::format(", load {:g}", c.expert_load) : "")
              : "",
      c.chunks, c.microbatch_size, p.microbatches, c.kind, to_string(c.recompute),
      on_off(c.sequence_parallel), c.tp_comm_overlap ? " (collectives overlapped)" : "",
      zero_text(c.zero) + (c.zero > 0 && c.shard_group > 0
                               ? fmt::format(" over groups of {}, {} replicas (HSDP)",
                                             c.shard_group, p.dp * c.cp / c.shard_group)
                               : ""),
      on_off(c.overlap_grad_reduce),
      c.pp > 1 ? fmt::format(", pipeline sends {}",
                             c.p2p_overlapped() ? "overlapped" : "waited on (no P2P overlap)")
               : "",
      c.flash_attention ? "flash" : "unfused",
      c.precision != Precision::bf16 ? fmt::format(", {} GEMMs", to_string(c.precision)) : "",
      std::string(c.bf16_gradients ? ", bf16 gradients" : "") +
          (c.fp8_params ? ", FP8 weights" : "") + (c.bf16_moments ? ", bf16 AdamW moments" : ""),
      c.offload_layers > 0
          ? fmt::format(", activations of {} layers offloaded to host memory", c.offload_layers)
          : "");
  out += fmt::format(
      "step {:.3f} s{}, {:.0f} tokens/s, {:.1f} model TFLOP/s per GPU (MFU {:.1f}%{}), bubble "
      "{:.1f}%, max staleness {}\n",
      p.step_s, p.max_staleness > 0 || c.kind == "pipedream" ? " (steady state)" : "",
      p.tokens_per_s, p.model_tflops_per_gpu, 100 * p.mfu,
      c.precision != Precision::bf16 ? " of the bf16 peak" : "", 100 * p.bubble_ratio,
      p.max_staleness);
  const double limit = p.memory_limit_bytes;
  std::string devices;
  for (const std::int64_t b : p.memory_per_device)
    devices += fmt::format("{}{:.1f}", devices.empty() ? "" : ", ", gib(static_cast<double>(b)));
  out += p.fits ? fmt::format(
                      "memory per GPU: peak {:.1f} GiB of the {:.1f} GiB limit (fits); per "
                      "device: {} GiB\n",
                      gib(static_cast<double>(p.peak_memory_bytes)), gib(limit), devices)
                : fmt::format(
                      "memory per GPU: DOES NOT FIT: peak {:.1f} GiB, the limit is {:.1f} "
                      "GiB ({:.1f} GiB over); per device: {} GiB\n",
                      gib(static_cast<double>(p.peak_memory_bytes)), gib(limit),
                      gib(static_cast<double>(p.peak_memory_bytes) - limit), devices);
  if (p.host_memory_bytes > 0)
    out += fmt::format("host memory per GPU: {:.1f} GiB of offloaded activations{}\n",
                       gib(static_cast<double>(p.host_memory_bytes)),
                       c.cluster.host_memory_bytes > 0
                           ? fmt::format(" of {:.1f} GiB{}", gib(c.cluster.host_memory_bytes),
                                         p.host_fits ? "" : ": DOES NOT FIT")
                           : "");
  out += "per stage, one micro-batch (ms):\n";
  out += fmt::format("{:>6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>10} {:>9}\n", "stage",
                     "layers", "F", "F tp", "B", "B tp", "recompute", "U", "dp reduce", "F+B zero");
  for (const StagePlan& s : p.stages) {
    const StageCost& cost = p.costs.stages[static_cast<std::size_t>(s.stage)];
    out += fmt::format(
        "{:>6} {:>7} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>10.2f} {:>9.2f} {:>10.2f} {:>9.2f}\n",
        s.stage, fmt::format("{}{}{}", s.layers, s.embedding ? "+e" : "", s.head ? "+h" : ""),
        1e3 * cost.forward_s, 1e3 * s.pieces.forward_comm_s, 1e3 * cost.backward_s,
        1e3 * s.pieces.backward_comm_s, 1e3 * s.pieces.recompute_s, 1e3 * cost.update_s,
        1e3 * s.exposed_reduce_s,
        1e3 * (s.exposed_zero_forward_s + s.exposed_zero_input_grad_s +
               s.exposed_zero_weight_grad_s));
  }
  return out;
}

Timeline plan_timeline(const PlanResult& p, const SimResult& simulated) {
  Timeline t = simulated.timeline;
  for (const ComputeSlice& slice : simulated.timeline.compute) {
    const StagePlan& s = p.stages.at(static_cast<std::size_t>(slice.action.stage));
    const double start = slice.start_s, end = slice.end_s;
    // Phases drawn back to back from the action's end, each clamped inside it.
    double at = end;
    const auto phase = [&](const std::string& name, double seconds) {
      if (seconds <= 0) return;
      const double from = std::max(start, at - seconds);
      t.phases.push_back({slice.device, name, from, at});
      at = from;
    };
    const std::string tp = tp_phase_name(p);
    switch (slice.action.kind) {
      case ActionKind::F:
        phase(tp, s.pieces.forward_comm_s);
        break;
      case ActionKind::B:
        phase(tp, s.pieces.backward_comm_s);
        phase("recompute", s.pieces.recompute_s);
        break;
      case ActionKind::I:
        phase(tp, s.pieces.backward_comm_s);
        phase("recompute", s.pieces.recompute_s);
        break;
      case ActionKind::W:
        break;
      case ActionKind::U:
        phase(p.config.zero == 0   ? "data-parallel all-reduce"
              : p.config.zero == 1 ? "data-parallel reduce-scatter + all-gather"
                                   : "data-parallel all-gather",
              s.exposed_reduce_s);
        break;
    }
  }
  return t;
}

void write_plan_files(const PlanResult& p, const std::string& dir) {
  std::filesystem::create_directories(dir);
  write_schedule_file(p.schedule, dir + "/schedule.json", ScheduleFormat::json);
  write_file_atomic(dir + "/costmodel.json", write_cost_model(p.costs));
  write_file_atomic(dir + "/plan.json", plans_document({p}).dump(2) + "\n");
}

std::string write_plan_outputs(const PlanResult& best, const Timeline& timeline,
                               const ordered_json& document,
                               const std::vector<PlanResult>& frontier, const std::string& dir) {
  write_plan_files(best, dir);
  write_file_atomic(dir + "/plan.json", document.dump(2) + "\n");
  write_chrome_trace(timeline, dir + "/trace.json");
  ordered_json f = ordered_json::array();
  for (const PlanResult& p : frontier) f.push_back(plan_json(p));
  write_file_atomic(dir + "/frontier.json", f.dump(2) + "\n");
  write_file_atomic(dir + "/frontier.csv", frontier_csv(frontier));
  return plot_frontier(dir + "/frontier.csv", dir + "/frontier.svg");
}

}  // namespace paci::plan
