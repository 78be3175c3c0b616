// Collective and point-to-point costs: alpha-beta per link class.
//
// A group of n ranks spaced `stride` apart (Megatron order: TP stride 1, DP
// stride TP, PP stride TP x DP) sits on one node or spans several
// (place_group). On one node a collective runs as a ring on the link class
// the group spans:
//   time = steps x latency + bytes x factor / (bandwidth x efficiency(bytes))
// with factor 2(n-1)/n and 2(n-1) steps for all-reduce, (n-1)/n and n-1
// steps for all-gather and reduce-scatter (bytes = the full, unsharded
// buffer). Across nodes it is hierarchical: with k ranks of the group per
// node, a reduce-scatter inside the node, the collective over the nodes on
// 1/k of the bytes (each of the k ranks runs one, at once), then an
// all-gather inside the node. Every device of a node communicates at once in
// a training step, so the node's NICs are shared: each rank gets
// 1 / devices_per_node of them, and the group's k ranks together k / devices.
// The inter-node latency term: an all-reduce runs as a tree across nodes,
// 2 log2(nodes) network steps; all-gather and reduce-scatter have no tree in
// NCCL (or RCCL) and run as one ring through all n ranks, ordered node by
// node, whose latency is n - 1 steps of the network's ring step where one
// was measured (NetworkSpec::ring_step_s), otherwise the sum of its hops:
// nodes - 1 on the network and n - nodes on the node's link (NCCL's tuning
// model);
// either grows linearly with the group. Each of its steps moves 1/nodes of
// a rank's network bytes,
// and the network runs at the efficiency of that step size (the network
// curve is nccl-tests' over two nodes: a ring over more nodes reads it at
// bytes x 2 / nodes).
#pragma once

#include "meshtrain/perf/system_spec.h"

namespace meshtrain::perf {

enum class Collective { all_reduce, all_gather, reduce_scatter };

// Algorithm bytes one rank sends for the collective (ring factor x bytes).
double collective_bytes_sent(Collective kind, double bytes, int size);

// Seconds for one collective of `bytes` over the group; 0 when size == 1.
double collective_time(const SystemSpec& s, Collective kind, double bytes, int size, int stride);

// Seconds to move `bytes` from rank a to rank b while every device of the
// node sends at the same time.
double p2p_time(const SystemSpec& s, double bytes, int a, int b);

}  // namespace meshtrain::perf
