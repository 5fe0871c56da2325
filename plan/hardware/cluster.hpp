// The GPUs a plan runs on and how they are connected: one GPU's compute and memory, the GPUs of a
// node on NVLink, the nodes on a network. Presets for a100-40gb, a100-80gb, h100-80gb (SXM) and
// h200 are data files (plan/hardware/clusters/*.json, compiled in); a user's own cluster is a file
// in the same schema ("format": "paci.cluster/1", --cluster FILE). Every preset value is a
// datasheet figure, a public microbenchmark's, or (network latency) NCCL's own model constant,
// named with its source in docs/cluster.md; none is fitted to a training run.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace paci::plan {

inline constexpr std::string_view kClusterFormatTag = "paci.cluster/1";

// One kind of link (NVLink inside a node, the network between nodes), as a collective or a
// point-to-point message sees it from one GPU.
struct LinkSpec {
  double bandwidth_bytes_per_s = 0.0;  // per GPU, one direction (datasheet)
  double efficiency = 0.0;      // the share of it large collectives reach (nccl-tests), 0 < e <= 1
  double p2p_efficiency = 0.0;  // the share a point-to-point copy reaches, 0 < e <= 1
  double latency_s = 0.0;       // one message, one hop (a ring step)
  // Optional (network only): the fabric's oversubscription, 1 (or absent) for a non-blocking
  // fat tree, r > 1 when a leaf switch has 1/r of its down-link bandwidth going up; then traffic
  // between leaves of `nodes_per_leaf` nodes each gets 1/r of the bandwidth (docs/cluster.md,
  // "Oversubscription"). 0: not given.
  double oversubscription = 0.0;
  double nodes_per_leaf = 0.0;
  // Optional, measured (nccl-tests all_reduce_perf on one node's GPUs): all-reduce bus bandwidth
  // (bytes/s) by message size (bytes), sizes increasing; when given, collectives inside a node
  // read their bandwidth here (interpolated in log size, clamped at both ends) instead of
  // bandwidth · efficiency.
  std::vector<std::pair<double, double>> allreduce_busbw_by_bytes;
  friend bool operator==(const LinkSpec&, const LinkSpec&) = default;
};

// The attention kernel's measured rates at one sequence length (FLOP/s, FlashAttention's FLOP
// count: 4·s²·d per head forward, half of it causal; its backward 2.5 times that).
struct AttentionRate {
  double seq = 0.0;  // tokens (queries = keys)
  double causal_forward = 0.0, causal_backward = 0.0;
  double full_forward = 0.0, full_backward = 0.0;  // no mask
  friend bool operator==(const AttentionRate&, const AttentionRate&) = default;
};

struct ClusterSpec {
  std::string name;         // "h100-80gb", or the file's "name"
  std::string description;  // the GPU and node, in words
  // One GPU.
  double peak_flops = 0.0;       // dense bf16/fp16 tensor-core FLOP/s (datasheet, no sparsity)
  double gemm_efficiency = 0.0;  // the best share of peak a large bf16 GEMM reaches (measured)
  double memory_bytes = 0.0;     // HBM the device reports as usable
  double memory_bandwidth_bytes_per_s = 0.0;  // HBM (datasheet)
  double memory_efficiency = 0.0;  // the share streaming kernels reach (measured), 0 < e <= 1
  double kernel_launch_s = 0.0;    // fixed time of one kernel, launch to end, when tiny
  std::int32_t sms = 0;            // streaming multiprocessors (how many GEMM tiles run at once)
  // Attention core (FlashAttention): the share of peak its forward and backward reach (measured),
  // at every sequence length and with or without a mask; or, instead of them, its measured rates
  // by sequence length (attention_by_seq: lengths increasing, interpolated in log length,
  // clamped at both ends).
  double flash_forward_efficiency = 0.0, flash_backward_efficiency = 0.0;
  std::vector<AttentionRate> attention_by_seq;
  // Optional, 0 when the GPU has none: dense FP8 tensor-core FLOP/s (datasheet) and the share of
  // it a large FP8 GEMM reaches (measured); MXFP8 (block-scaled FP8, Blackwell) runs at the same
  // peak, at mxfp8_gemm_efficiency of it.
  double fp8_peak_flops = 0.0, fp8_gemm_efficiency = 0.0, mxfp8_gemm_efficiency = 0.0;
  // Optional, 0 when not given (then activations cannot be offloaded): the link between one GPU
  // and its host's memory, per direction (datasheet: PCIe, NVLink-C2C), the share of it a pinned
  // copy reaches (measured), and the host memory per GPU (the node's, divided by its GPUs).
  double host_bandwidth_bytes_per_s = 0.0, host_efficiency = 0.0, host_memory_bytes = 0.0;
  // The node and the network.
  std::int32_t gpus_per_node = 0;
  LinkSpec nvlink;   // between the GPUs of a node
  LinkSpec network;  // between nodes, per GPU (one NIC per GPU, rail-optimised)
  friend bool operator==(const ClusterSpec&, const ClusterSpec&) = default;
};

// The compiled-in presets, in a fixed order.
const std::vector<ClusterSpec>& cluster_presets();
// The preset called `name`; InputError listing the known names otherwise.
ClusterSpec cluster_preset(std::string_view name);

// InputError naming the first missing or bad field ("<source>: nvlink.bandwidth_bytes_per_s must
// be a positive number, got 0"): a non-empty name, every number finite and positive
// (efficiencies at most 1), gpus_per_node >= 1, sms >= 1, a busbw table with increasing sizes and
// positive values; the optional fields absent (0) or valid: fp8_gemm_efficiency with
// fp8_peak_flops and the reverse, mxfp8_gemm_efficiency only with them, oversubscription >= 1
// and nodes_per_leaf >= 1 together, on the network only; host_bandwidth_bytes_per_s and
// host_efficiency together, host_memory_bytes only with them.
void check_cluster(const ClusterSpec& cluster, std::string_view source);
// Parses a paci.cluster/1 document (another format tag, malformed JSON, a missing or unknown
// field: one InputError line starting with `source`), then check_cluster(). Keys in any order;
// "description" and "allreduce_busbw_by_bytes" may be left out; an optional "sources" object
// (field -> where its value comes from, in words) is checked for its shape and otherwise ignored.
ClusterSpec parse_cluster(std::string_view json, std::string_view source);
ClusterSpec read_cluster(const std::string& path);  // a file, or "-" for stdin
// Canonical JSON, fields in the struct's order, no "sources": parse_cluster(write_cluster(c)) == c
// and write_cluster(parse_cluster(write_cluster(c))) == write_cluster(c).
std::string write_cluster(const ClusterSpec& cluster);

}  // namespace paci::plan
