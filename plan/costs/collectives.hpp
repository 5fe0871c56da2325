// The collectives and messages between GPUs, as paci plan prices them: ring all-reduce,
// reduce-scatter and all-gather by message size on NVLink inside a node (the measured bus-bandwidth
// curve where the cluster file has one) and on the network across nodes (oversubscribed when the
// file says so), a latency-bound tree for a few bytes (FP8's amaxes), and point-to-point messages.
// docs/costmodel.md writes every formula out.
#pragma once

#include <cstdint>

#include "plan/hardware/cluster.hpp"

namespace paci::plan {

enum class Collective { all_reduce, reduce_scatter, all_gather };

// A ring collective over `ranks` GPUs on `bytes` (the whole buffer, as nccl-tests counts it),
// `ranks_per_node` of them in each node (= ranks: NVLink only). Inside a node the bus bandwidth
// is the measured all-reduce curve at that size (or bandwidth x efficiency plus a latency per
// ring step without one); across nodes it is the smaller of that and the node's share of the
// network, ranks_per_node x network bandwidth x efficiency, plus the network latency per ring
// step that crosses a node; on an oversubscribed network (network.oversubscription r) a ring
// over more nodes than a leaf holds gets 1/r of the network. Time = 2(n-1)/n x bytes / bus
// bandwidth for an all-reduce, (n-1)/n x bytes / bus bandwidth for a reduce-scatter or an
// all-gather (nccl-tests' definitions). 0 for one rank.
double collective_s(const ClusterSpec& c, Collective kind, double bytes, std::int64_t ranks,
                    std::int64_t ranks_per_node);
// An all-to-all over `ranks` GPUs, each holding `bytes` of which 1/ranks stays and the rest goes,
// an equal share to every other GPU (mixture of experts' dispatch and combine), `ranks_per_node`
// of them in each node. The shares to GPUs of the same node cross NVLink at its bandwidth x
// efficiency (not the all-reduce curve: NVLink SHARP); those to other nodes leave through the
// GPU's NIC at network bandwidth
// x efficiency (1/r of it when the group spans more nodes than a leaf holds). The two go at once:
// the slower shows, plus one message's latency on each link used. 0 for one rank.
double all_to_all_s(const ClusterSpec& c, double bytes, std::int64_t ranks,
                    std::int64_t ranks_per_node);
// An all-reduce of a few bytes over `ranks` GPUs, `ranks_per_node` to a node, as NCCL runs small
// messages: a tree, latency-bound, 2·ceil(log2 n) hops of the network's latency across the nodes
// and of NVLink's inside one (FP8's amax reduction).
double small_all_reduce_s(const ClusterSpec& c, std::int64_t ranks, std::int64_t ranks_per_node);
// A point-to-point message on NVLink (same node) or on the network: its latency, and its
// bandwidth at the link's point-to-point efficiency.
struct P2pLink {
  double latency_s = 0.0;
  double bandwidth_bytes_per_s = 0.0;
};
// `across_leaves`: the message crosses between leaf switches of an oversubscribed network, at 1/r
// of its bandwidth (every pipeline boundary of the job sends at once).
P2pLink p2p_link(const ClusterSpec& c, bool same_node, bool across_leaves = false);

}  // namespace paci::plan
