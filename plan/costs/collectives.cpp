// collective_s, small_all_reduce_s, p2p_link (plan/costs/collectives.hpp).
#include "plan/costs/collectives.hpp"

#include <algorithm>
#include <cmath>

namespace paci::plan {

namespace {

double ceil_div(std::int64_t a, std::int64_t b) {
  return static_cast<double>((a + b - 1) / b);
}

// Bus bandwidth of an all-reduce of `bytes` inside one node: from the measured curve, with the
// time it implies interpolated in log size and log time between its points (so the time grows
// with the size wherever the measured times do), the end points' bus bandwidths beyond them;
// else bandwidth x efficiency.
double node_busbw(const ClusterSpec& c, double bytes) {
  const auto& table = c.nvlink.allreduce_busbw_by_bytes;
  if (table.empty()) return c.nvlink.bandwidth_bytes_per_s * c.nvlink.efficiency;
  if (bytes <= table.front().first) return table.front().second;
  if (bytes >= table.back().first) return table.back().second;
  const auto hi = std::lower_bound(table.begin(), table.end(), bytes,
                                   [](const auto& entry, double b) { return entry.first < b; });
  const auto lo = hi - 1;
  // Time is proportional to size / bus bandwidth (the rank factor cancels).
  // t = t_lo · (t_hi / t_lo)^x with x = log(bytes / lo) / log(hi / lo): a power of bytes / lo.
  const double t_lo = lo->first / lo->second, t_hi = hi->first / hi->second;
  const double power = std::log(t_hi / t_lo) / std::log(hi->first / lo->first);
  return bytes / (t_lo * std::pow(bytes / lo->first, power));
}

}  // namespace

double collective_s(const ClusterSpec& c, Collective kind, double bytes, std::int64_t ranks,
                    std::int64_t ranks_per_node) {
  if (ranks <= 1 || bytes <= 0) return 0.0;
  ranks_per_node = std::clamp<std::int64_t>(ranks_per_node, 1, ranks);
  const double n = static_cast<double>(ranks);
  const bool all_reduce = kind == Collective::all_reduce;
  const double factor = (all_reduce ? 2.0 : 1.0) * (n - 1) / n;
  const double steps = (all_reduce ? 2.0 : 1.0) * (n - 1);
  const bool measured = !c.nvlink.allreduce_busbw_by_bytes.empty();
  const double nodes = ceil_div(ranks, ranks_per_node);
  if (nodes <= 1)  // NVLink only; a measured curve already holds the small sizes' latency
    return factor * bytes / node_busbw(c, bytes) + (measured ? 0.0 : steps * c.nvlink.latency_s);
  double network =
      static_cast<double>(ranks_per_node) * c.network.bandwidth_bytes_per_s * c.network.efficiency;
  // An oversubscribed fabric: a ring over more nodes than a leaf switch holds sends through the
  // leaves' up-links, 1/r of the bandwidth when every group of the job does at once.
  if (c.network.oversubscription > 1 && nodes > c.network.nodes_per_leaf)
    network /= c.network.oversubscription;
  const double busbw = std::min(node_busbw(c, bytes), network);
  const double crossing = (all_reduce ? 2.0 : 1.0) * (nodes - 1);
  const double inside = measured ? 0.0 : (steps - crossing) * c.nvlink.latency_s;
  return factor * bytes / busbw + crossing * c.network.latency_s + inside;
}

double all_to_all_s(const ClusterSpec& c, double bytes, std::int64_t ranks,
                    std::int64_t ranks_per_node) {
  if (ranks <= 1 || bytes <= 0) return 0.0;
  ranks_per_node = std::clamp<std::int64_t>(ranks_per_node, 1, ranks);
  const double n = static_cast<double>(ranks), r = static_cast<double>(ranks_per_node);
  const double inside = bytes * (r - 1) / n, outside = bytes * (n - r) / n;
  double t = 0.0;
  // Inside the node at NVLink's collective efficiency: its measured all-reduce curve is NVLink
  // SHARP's on the H100 and B200 presets, which an all-to-all does not use.
  if (inside > 0)
    t = inside / (c.nvlink.bandwidth_bytes_per_s * c.nvlink.efficiency) + c.nvlink.latency_s;
  if (outside > 0) {
    double network = c.network.bandwidth_bytes_per_s * c.network.efficiency;
    if (c.network.oversubscription > 1 &&
        ceil_div(ranks, ranks_per_node) > c.network.nodes_per_leaf)
      network /= c.network.oversubscription;
    t = std::max(t, outside / network + c.network.latency_s);
  }
  return t;
}

double small_all_reduce_s(const ClusterSpec& c, std::int64_t ranks, std::int64_t ranks_per_node) {
  if (ranks <= 1) return 0.0;
  ranks_per_node = std::clamp<std::int64_t>(ranks_per_node, 1, ranks);
  const auto depth = [](std::int64_t n) {
    return n <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(n)));
  };
  const std::int64_t nodes = (ranks + ranks_per_node - 1) / ranks_per_node;
  return 2.0 * (depth(nodes) * c.network.latency_s + depth(ranks_per_node) * c.nvlink.latency_s);
}

P2pLink p2p_link(const ClusterSpec& c, bool same_node, bool across_leaves) {
  const LinkSpec& l = same_node ? c.nvlink : c.network;
  const double share =
      !same_node && across_leaves && l.oversubscription > 1 ? 1.0 / l.oversubscription : 1.0;
  return {l.latency_s, l.bandwidth_bytes_per_s * l.p2p_efficiency * share};
}

}  // namespace paci::plan
