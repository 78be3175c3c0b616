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

double ring_on_link(const LinkClass& l, Collective kind, double bytes, int n) {
  if (n <= 1 || bytes <= 0) return 0;
  const double bw = l.bandwidth_gbs * 1e9 * l.efficiency_of(link_op(kind))(bytes);
  return steps(kind, n) * l.latency_s + bytes * factor(kind, n) / bw;
}

// One rank's part of the inter-node step: `bytes` per rank over `nodes`
// ranks, while every device of the node uses the NICs at once, so each gets
// 1 / devices_per_node of them. Latency: an all-reduce runs as a tree across
// nodes (2 log2(nodes) steps); all-gather and reduce-scatter run as one ring
// through all `size` ranks, size - 1 steps each as slow as the network hop.
double across_nodes(const SystemSpec& s, Collective kind, double bytes, int nodes, int size) {
  if (nodes <= 1 || bytes <= 0) return 0;
  const auto& net = s.network;
  const double share = net.node_bandwidth_gbs() * 1e9 / s.devices_per_node;
  const double bw = share * net.efficiency(bytes);
  const double steps = kind == Collective::all_reduce ? 2 * std::ceil(std::log2(double(nodes))) : double(size - 1);
  return steps * net.latency_s + bytes * factor(kind, nodes) / bw;
}

}  // namespace

double collective_bytes_sent(Collective kind, double bytes, int size) {
  return size <= 1 ? 0 : bytes * factor(kind, size);
}

double collective_time(const SystemSpec& s, Collective kind, double bytes, int size, int stride) {
  if (size <= 1 || bytes <= 0) return 0;
  const GroupPlacement g = place_group(s, size, stride);
  const int k = g.ranks_per_node;
  if (g.nodes == 1) return ring_on_link(*g.link, kind, bytes, size);
  // Each of the k ranks on a node carries 1/k of the bytes across nodes.
  double t = across_nodes(s, kind, bytes / k, g.nodes, size);
  if (k > 1) {
    // Inside the node: reduce-scatter before (all-reduce, reduce-scatter) and
    // all-gather after (all-reduce, all-gather) the inter-node part.
    if (kind != Collective::all_gather) t += ring_on_link(*g.link, Collective::reduce_scatter, bytes, k);
    if (kind != Collective::reduce_scatter) t += ring_on_link(*g.link, Collective::all_gather, bytes, k);
  }
  return t;
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
