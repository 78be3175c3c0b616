#include "meshtrain/perf/collective.h"

#include <cmath>

namespace meshtrain::perf {

namespace {

double factor(Collective kind, int n) {
  const double f = double(n - 1) / n;
  return kind == Collective::all_reduce ? 2 * f : f;
}

int steps(Collective kind, int n) { return kind == Collective::all_reduce ? 2 * (n - 1) : n - 1; }

LinkOp link_op(Collective kind) {
  return kind == Collective::all_reduce   ? LinkOp::all_reduce
         : kind == Collective::all_gather ? LinkOp::all_gather
                                          : LinkOp::reduce_scatter;
}

// A ring's bandwidth term on one link class (no latency).
double ring_transfer(const LinkClass& l, Collective kind, double bytes, int n) {
  if (n <= 1 || bytes <= 0) return 0;
  const double bw = l.bandwidth_gbs * 1e9 * l.efficiency_of(link_op(kind))(bytes);
  return bytes * factor(kind, n) / bw;
}

double ring_on_link(const LinkClass& l, Collective kind, double bytes, int n) {
  if (n <= 1 || bytes <= 0) return 0;
  return steps(kind, n) * l.latency_s + ring_transfer(l, kind, bytes, n);
}

// One rank's share of the inter-node bytes: `bytes` per rank over `nodes`
// ranks, while every device of the node uses the NICs at once, so each gets
// 1 / devices_per_node of them; at the network curve's efficiency for
// `curve_bytes`.
double across_nodes_transfer(const SystemSpec& s, Collective kind, double bytes, int nodes, double curve_bytes) {
  if (nodes <= 1 || bytes <= 0) return 0;
  const auto& net = s.network;
  const double share = net.node_bandwidth_gbs() * 1e9 / s.devices_per_node;
  return bytes * factor(kind, nodes) / (share * net.efficiency(curve_bytes));
}

// All-reduce over nodes: the hierarchical form. Inside the node a
// reduce-scatter before and an all-gather after; across nodes a tree,
// 2 log2(nodes) network steps, on 1/k of the bytes per rank.
double all_reduce_across_nodes(const SystemSpec& s, const GroupPlacement& g, double bytes) {
  const int k = g.ranks_per_node;
  const double tree = 2 * std::ceil(std::log2(double(g.nodes))) * s.network.latency_s;
  double t = tree + across_nodes_transfer(s, Collective::all_reduce, bytes / k, g.nodes, bytes / k);
  if (k > 1)
    t += ring_on_link(*g.link, Collective::reduce_scatter, bytes, k) +
         ring_on_link(*g.link, Collective::all_gather, bytes, k);
  return t;
}

// The latency of a ring through n ranks on `nodes` nodes. Where a network's
// step was measured at scale (NetworkSpec::ring_step_s), each of its n - 1
// steps costs that, inside a node or not: over AWS EFA, NCCL's all-gather
// over 64 to 512 H100s falls from 69 to 11 GB/s at 256 MB, about 35-45 us a
// step from 128 ranks on (Hugging Face, The Ultra-Scale Playbook, 2025).
// Otherwise the sum of the ring's hops (NCCL's tuning model,
// src/graph/tuning.cc: nsteps - nInterSteps hops inside a node,
// nInterSteps = nodes - 1 across), which DeepSpeed ZeRO-3 on 384 to 2,240
// A100s over HDR InfiniBand follows (Narayanan et al. 2021, Table 2).
double ring_latency(const SystemSpec& s, const GroupPlacement& g) {
  if (s.network.ring_step_s > 0) return (g.size - 1) * s.network.ring_step_s;
  const double hops = (g.nodes - 1) * s.network.latency_s;
  return g.size > g.nodes ? hops + (g.size - g.nodes) * g.link->latency_s : hops;
}

// All-gather or reduce-scatter over nodes: one ring through all n ranks,
// ordered node by node, at ring_latency. Bandwidth: the network carries
// 1/k of the bytes per rank; inside the node the k ranks exchange the rest.
// Each of the ring's network steps moves 1/nodes of a rank's bytes; the
// network curve is nccl-tests' over two nodes, whose step is 1/2 of them,
// so a ring over more nodes runs at the curve's point for bytes x 2 / nodes.
double ring_across_nodes(const SystemSpec& s, const GroupPlacement& g, Collective kind, double bytes) {
  const int k = g.ranks_per_node;
  const double net_bytes = bytes / k;
  double t = ring_latency(s, g) + across_nodes_transfer(s, kind, net_bytes, g.nodes, net_bytes * 2 / g.nodes);
  if (k > 1) t += ring_transfer(*g.link, kind, bytes, k);
  return t;
}

}  // namespace

double collective_bytes_sent(Collective kind, double bytes, int size) {
  return size <= 1 ? 0 : bytes * factor(kind, size);
}

double collective_time(const SystemSpec& s, Collective kind, double bytes, int size, int stride) {
  if (size <= 1 || bytes <= 0) return 0;
  const GroupPlacement g = place_group(s, size, stride);
  if (g.nodes == 1) return ring_on_link(*g.link, kind, bytes, size);
  return kind == Collective::all_reduce ? all_reduce_across_nodes(s, g, bytes) : ring_across_nodes(s, g, kind, bytes);
}

double p2p_time(const SystemSpec& s, double bytes, int a, int b) {
  if (bytes <= 0 || a == b) return 0;
  if (const LinkClass* l = link_between(s, a, b))
    return l->latency_s + bytes / (l->bandwidth_gbs * 1e9 * l->efficiency_of(LinkOp::p2p)(bytes));
  const auto& net = s.network;
  const double share = net.node_bandwidth_gbs() * 1e9 / s.devices_per_node;
  return net.latency_s + bytes / (share * net.efficiency(bytes));
}

}  // namespace meshtrain::perf
