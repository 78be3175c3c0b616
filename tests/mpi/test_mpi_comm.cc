// Multi-rank tests of ProcessMesh, Communicator and the trace gather. Run
// under mpirun with 2, 4 and 8 ranks; every (tp, pp) mesh the world admits is
// built and exercised. A test fails on every rank if it fails on any one.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/comm/comm_error.h"
#include "meshtrain/comm/process_mesh.h"
#include "meshtrain/comm/staging_transport.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/clock.h"
#include "meshtrain/measure/trace.h"

namespace meshtrain {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Every (tp, pp) with tp x pp dividing the world.
std::vector<std::pair<int, int>> mesh_shapes() {
  std::vector<std::pair<int, int>> out;
  const int w = world_size();
  for (int tp = 1; tp <= w; ++tp)
    for (int pp = 1; pp <= w; ++pp)
      if (w % (tp * pp) == 0) out.emplace_back(tp, pp);
  return out;
}

// Megatron-LM's construction of the groups (initialize_model_parallel),
// written independently of mesh_groups(): the group of `kind` holding `rank`.
std::vector<int> megatron_group(int tp, int pp, int world, GroupKind kind, int rank) {
  const int dp = world / (tp * pp);
  std::vector<std::vector<int>> all;
  std::vector<std::vector<int>> dp_groups;
  for (int i = 0; i < pp; ++i) {
    const int start = i * world / pp, end = (i + 1) * world / pp;
    for (int j = 0; j < tp; ++j) {
      std::vector<int> g;
      for (int r = start + j; r < end; r += tp) g.push_back(r);
      dp_groups.push_back(g);
    }
  }
  switch (kind) {
    case GroupKind::dp: all = dp_groups; break;
    case GroupKind::tp:
      for (int i = 0; i < world / tp; ++i) {
        std::vector<int> g;
        for (int r = i * tp; r < (i + 1) * tp; ++r) g.push_back(r);
        all.push_back(g);
      }
      break;
    case GroupKind::pp:
    case GroupKind::embedding:
      for (int i = 0; i < world / pp; ++i) {
        std::vector<int> g;
        for (int r = i; r < world; r += world / pp) g.push_back(r);
        if (kind == GroupKind::embedding && g.size() > 1) g = {g.front(), g.back()};
        all.push_back(g);
      }
      break;
    case GroupKind::mp:
      for (int i = 0; i < dp; ++i) {
        std::vector<int> g;
        for (const auto& d : dp_groups) g.push_back(d[i]);
        std::sort(g.begin(), g.end());
        all.push_back(g);
      }
      break;
    case GroupKind::world: {
      std::vector<int> g;
      for (int r = 0; r < world; ++r) g.push_back(r);
      all.push_back(g);
      break;
    }
    case GroupKind::dp_shard:
    case GroupKind::dp_replicate: break;  // hybrid sharding only: tested on their own
  }
  for (const auto& g : all)
    if (std::find(g.begin(), g.end(), rank) != g.end()) return g;
  return {};
}

// World ranks of `c`'s members in group-rank order.
std::vector<int> members(const Communicator& c) {
  MPI_Group g, w;
  MPI_Comm_group(c.raw(), &g);
  MPI_Comm_group(MPI_COMM_WORLD, &w);
  std::vector<int> in(c.size()), out(c.size());
  for (int i = 0; i < c.size(); ++i) in[i] = i;
  MPI_Group_translate_ranks(g, c.size(), in.data(), w, out.data());
  MPI_Group_free(&g);
  MPI_Group_free(&w);
  return out;
}

constexpr GroupKind kCollectiveGroups[] = {GroupKind::tp, GroupKind::dp, GroupKind::pp, GroupKind::mp,
                                           GroupKind::world};

TEST(ProcessMesh, MembershipFollowsMegatron) {
  const int w = world_size(), rank = world_rank();
  for (auto [tp, pp] : mesh_shapes()) {
    SCOPED_TRACE(testing::Message() << "tp " << tp << " pp " << pp);
    ProcessMesh mesh(tp, pp);
    EXPECT_EQ(mesh.dp(), w / (tp * pp));
    EXPECT_EQ(mesh.rank(), rank);
    const RankCoord c = mesh.coord();
    EXPECT_EQ(rank_of(mesh.shape(), c), rank);
    for (GroupKind k : {GroupKind::tp, GroupKind::dp, GroupKind::pp, GroupKind::mp, GroupKind::embedding,
                        GroupKind::world}) {
      SCOPED_TRACE(group_name(k));
      const std::vector<int> expected = megatron_group(tp, pp, w, k, rank);
      EXPECT_EQ(mesh_group_of(mesh.shape(), k, rank), expected);
      if (k == GroupKind::embedding && !mesh.in_embedding_group()) {
        EXPECT_TRUE(expected.empty());
        EXPECT_THROW(mesh.embedding_group(), std::logic_error);
        continue;
      }
      Communicator& g = mesh.group(k);
      EXPECT_EQ(g.name(), group_name(k));
      EXPECT_EQ(&mesh.group(group_name(k)), &g);
      EXPECT_EQ(members(g), expected);
    }
    EXPECT_EQ(mesh.tp_group().rank(), c.tp);
    EXPECT_EQ(mesh.dp_group().rank(), c.dp);
    EXPECT_EQ(mesh.pp_group().rank(), c.pp);
    EXPECT_EQ(mesh.is_first_stage(), c.pp == 0);
    EXPECT_EQ(mesh.is_last_stage(), c.pp == pp - 1);
    const std::vector<int> pipeline = megatron_group(tp, pp, w, GroupKind::pp, rank);
    EXPECT_EQ(mesh.next_stage_world_rank(), pipeline[(c.pp + 1) % pp]);
    EXPECT_EQ(mesh.prev_stage_world_rank(), pipeline[(c.pp + pp - 1) % pp]);
    EXPECT_EQ(pipeline[mesh.next_stage_rank()], mesh.next_stage_world_rank());
    EXPECT_EQ(pipeline[mesh.prev_stage_rank()], mesh.prev_stage_world_rank());
    if (rank == 0 && tp == 2 && pp == 2 && w == 8) std::printf("%s", mesh.describe().c_str());
  }
}

// Hybrid sharding: ZeRO's shard group is a block of consecutive DP ranks,
// its replicas the DP ranks at the same place in the other blocks.
TEST(ProcessMesh, HybridShardGroupsSplitTheDataParallelGroup) {
  const int w = world_size(), rank = world_rank();
  if (w < 4 || w % 2 != 0) GTEST_SKIP() << "needs an even world of at least 4 ranks";
  ParallelConfig p;
  p.dp = w;
  p.zero_shard = 2;
  ProcessMesh mesh(p);
  EXPECT_EQ(members(mesh.zero_shard_group()), (std::vector<int>{rank - rank % 2, rank - rank % 2 + 1}));
  EXPECT_EQ(members(mesh.zero_shard_group()), mesh_group_of(mesh.shape(), GroupKind::dp_shard, rank));
  ASSERT_NE(mesh.zero_replica_group(), nullptr);
  std::vector<int> replicas;
  for (int r = rank % 2; r < w; r += 2) replicas.push_back(r);
  EXPECT_EQ(members(*mesh.zero_replica_group()), replicas);
  EXPECT_EQ(members(*mesh.zero_replica_group()), mesh_group_of(mesh.shape(), GroupKind::dp_replicate, rank));
  EXPECT_EQ(mesh.zero_shard_rank(), rank % 2);
  EXPECT_EQ(mesh.zero_replica(), rank / 2);
  // A sum over the shard group, then over the replicas, is the sum over DP.
  int x = rank;
  mesh.zero_shard_group().all_reduce(&x, 1);
  mesh.zero_replica_group()->all_reduce(&x, 1);
  EXPECT_EQ(x, w * (w - 1) / 2);
  ProcessMesh plain(1, 1);
  EXPECT_EQ(&plain.zero_shard_group(), &plain.dp_group());
  EXPECT_EQ(plain.zero_replica_group(), nullptr);
  p.zero_shard = 3;
  if (w % 3 != 0) {
    EXPECT_THROW(ProcessMesh{p}, Error);
  }
}

TEST(ProcessMesh, RejectsShapesThatDoNotDivideTheWorld) {
  const int w = world_size();
  EXPECT_THROW(ProcessMesh(3, 1), Error);
  EXPECT_THROW(ProcessMesh(w, 2), Error);
  EXPECT_THROW(ProcessMesh(0, 1), Error);
  ParallelConfig p;
  p.tp = 1;
  p.pp = 1;
  p.dp = w + 1;
  EXPECT_THROW(ProcessMesh{p}, Error);
  p.dp = w;
  ProcessMesh ok(p);
  EXPECT_EQ(ok.dp(), w);
  ProcessMesh moved(std::move(ok));
  EXPECT_EQ(moved.world().size(), w);
  int one = 1;
  moved.dp_group().all_reduce(&one, 1);
  EXPECT_EQ(one, w);
}

// Value rank r holds at element i; small integers, exact in bf16 and sums of
// up to 8 of them.
float value(int r, int64_t i) { return static_cast<float>((r + 1) * (i % 4 + 1)); }

template <typename T>
void check_collectives(Communicator& g) {
  const int n = g.size(), r = g.rank();
  const int64_t count = 37;
  auto sum_over_ranks = [&](int64_t i) {
    float s = 0;
    for (int q = 0; q < n; ++q) s += value(q, i);
    return s;
  };
  {  // all_reduce sum and max
    std::vector<T> buf(count), mx(count);
    for (int64_t i = 0; i < count; ++i) buf[i] = mx[i] = from_f32<T>(value(r, i));
    g.all_reduce(buf.data(), count);
    g.all_reduce(mx.data(), count, ReduceOp::max);
    for (int64_t i = 0; i < count; ++i) {
      EXPECT_EQ(to_f32(buf[i]), sum_over_ranks(i)) << i;
      EXPECT_EQ(to_f32(mx[i]), value(n - 1, i)) << i;
    }
  }
  {  // reduce_scatter, out of place and in place
    std::vector<T> send(count * n), recv(count), inplace(count * n);
    for (int64_t i = 0; i < count * n; ++i) send[i] = inplace[i] = from_f32<T>(value(r, i));
    g.reduce_scatter(send.data(), recv.data(), count);
    g.reduce_scatter(Communicator::kInPlace, inplace.data(), count);
    for (int64_t i = 0; i < count; ++i) {
      EXPECT_EQ(to_f32(recv[i]), sum_over_ranks(r * count + i)) << i;
      EXPECT_EQ(to_f32(inplace[i]), sum_over_ranks(r * count + i)) << i;
    }
  }
  {  // all_gather, out of place and in place
    std::vector<T> send(count), recv(count * n), inplace(count * n, from_f32<T>(-1.0f));
    for (int64_t i = 0; i < count; ++i) send[i] = inplace[r * count + i] = from_f32<T>(value(r, i));
    g.all_gather(send.data(), recv.data(), count);
    g.all_gather(Communicator::kInPlace, inplace.data(), count);
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < count; ++i) {
        EXPECT_EQ(to_f32(recv[q * count + i]), value(q, i));
        EXPECT_EQ(to_f32(inplace[q * count + i]), value(q, i));
      }
  }
  {  // broadcast from the last rank
    std::vector<T> buf(count);
    for (int64_t i = 0; i < count; ++i) buf[i] = from_f32<T>(value(r, i));
    g.broadcast(buf.data(), count, n - 1);
    for (int64_t i = 0; i < count; ++i) EXPECT_EQ(to_f32(buf[i]), value(n - 1, i));
  }
  if (n > 1) {  // a ring of sends: even ranks send first, odd ranks receive first
    std::vector<T> out(count), in(count);
    for (int64_t i = 0; i < count; ++i) out[i] = from_f32<T>(value(r, i));
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    if (r % 2 == 0) {
      g.send(out.data(), count, next, 5);
      g.recv(in.data(), count, prev, 5);
    } else {
      g.recv(in.data(), count, prev, 5);
      g.send(out.data(), count, next, 5);
    }
    for (int64_t i = 0; i < count; ++i) EXPECT_EQ(to_f32(in[i]), value(prev, i));
  }
}

TEST(Communicator, CollectivesFloatAndBf16OnEveryGroup) {
  for (auto [tp, pp] : mesh_shapes()) {
    ProcessMesh mesh(tp, pp);
    for (GroupKind k : kCollectiveGroups) {
      SCOPED_TRACE(testing::Message() << "tp " << tp << " pp " << pp << " group " << group_name(k));
      check_collectives<float>(mesh.group(k));
      check_collectives<bf16>(mesh.group(k));
    }
    if (mesh.in_embedding_group()) check_collectives<float>(mesh.embedding_group());
  }
}

TEST(Communicator, NonBlockingRingOnWorld) {
  // The same ring with non-blocking forms: posting every receive first makes
  // it deadlock-free for any group size and message size.
  ProcessMesh mesh(1, 1);
  Communicator& w = mesh.world();
  const int n = w.size(), r = w.rank();
  std::vector<double> out(1000, r), in(1000, -1);
  Request rx = w.irecv(in.data(), 1000, (r + n - 1) % n, 9);
  Request tx = w.isend(out.data(), 1000, (r + 1) % n, 9);
  rx.wait();
  tx.wait();
  for (double x : in) EXPECT_EQ(x, (r + n - 1) % n);
}

// MPI with host staging (the fallback transport for device buffers), with
// host memory posing as the device: every call gives what MPI gives directly,
// goes through the copies, and is counted as before.
TEST(Communicator, StagingTransportGivesTheSameResults) {
  int64_t copies = 0;
  StagingTransport staging([&](void* dst, const void* src, size_t bytes) {
    ++copies;
    std::memcpy(dst, src, bytes);
  });
  for (auto [tp, pp] : mesh_shapes()) {
    ProcessMesh mesh(tp, pp);
    for (GroupKind k : kCollectiveGroups) {
      SCOPED_TRACE(testing::Message() << "tp " << tp << " pp " << pp << " group " << group_name(k));
      Communicator& g = mesh.group(k);
      g.set_transport(&staging);
      const int64_t copies0 = copies;
      check_collectives<float>(g);
      check_collectives<bf16>(g);
      if (g.size() > 1) {
        EXPECT_GT(copies, copies0);
      }
      const int n = g.size(), r = g.rank();
      std::vector<double> out(1000, r), in(1000, -1);
      Request rx = g.irecv(in.data(), 1000, (r + n - 1) % n, 9);
      Request tx = g.isend(out.data(), 1000, (r + 1) % n, 9);
      rx.wait();
      tx.wait();
      for (double x : in) EXPECT_EQ(x, (r + n - 1) % n);
      std::vector<float> ar(64, 1.0f);
      Request q = g.iall_reduce(ar.data(), 64);
      q.wait();
      for (float x : ar) EXPECT_EQ(x, float(n));
      CommStats st = g.stats();
      if (n > 1) {
        EXPECT_GT(st.entry(g.name(), CommOp::iall_reduce, n).calls, 0);
      }
      g.set_transport(nullptr);
    }
  }
}

TEST(Communicator, Bf16AllReduceGivesEveryRankTheSameBits) {
  ProcessMesh mesh(1, 1);
  Communicator& w = mesh.world();
  const int64_t count = 4096;
  std::vector<bf16> buf(count);
  for (int64_t i = 0; i < count; ++i) buf[i] = bf16(std::sin(0.37f * i + w.rank()) * (1 + i % 13));
  w.all_reduce(buf.data(), count);
  std::vector<bf16> everyone(count * w.size());
  w.all_gather(buf.data(), everyone.data(), count);
  for (int q = 0; q < w.size(); ++q)
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(everyone[q * count + i].bits, buf[i].bits) << q << " " << i;
}

TEST(Communicator, NonBlockingForms) {
  for (auto [tp, pp] : mesh_shapes()) {
    ProcessMesh mesh(tp, pp);
    for (GroupKind k : kCollectiveGroups) {
      SCOPED_TRACE(testing::Message() << "tp " << tp << " pp " << pp << " group " << group_name(k));
      Communicator& g = mesh.group(k);
      const int n = g.size(), r = g.rank();
      const int64_t count = 64;
      std::vector<float> ar(count), rs_send(count * n), rs(count), ag(count * n);
      std::vector<bf16> ar16(count);
      for (int64_t i = 0; i < count; ++i) ar[i] = value(r, i), ar16[i] = bf16(value(r, i));
      for (int64_t i = 0; i < count * n; ++i) rs_send[i] = value(r, i);
      for (int64_t i = 0; i < count; ++i) ag[r * count + i] = value(r, i);
      Request reqs[4];
      reqs[0] = g.iall_reduce(ar.data(), count);
      reqs[1] = g.ireduce_scatter(rs_send.data(), rs.data(), count);
      reqs[2] = g.iall_gather(Communicator::kInPlace, ag.data(), count);
      reqs[3] = g.iall_reduce(ar16.data(), count);
      EXPECT_EQ(reqs[0].active(), n > 1);
      bool done = reqs[0].test();
      while (!done) done = reqs[0].test();
      EXPECT_FALSE(reqs[0].active());
      wait_all(reqs, 4);
      for (int64_t i = 0; i < count; ++i) {
        float s = 0, s_rs = 0;
        for (int q = 0; q < n; ++q) s += value(q, i), s_rs += value(q, r * count + i);
        EXPECT_EQ(ar[i], s);
        EXPECT_EQ(to_f32(ar16[i]), s);
        EXPECT_EQ(rs[i], s_rs);
        for (int q = 0; q < n; ++q) EXPECT_EQ(ag[q * count + i], value(q, i));
      }
      {  // a request left unwaited is completed by its destructor
        std::vector<int32_t> x(8, r + 1);
        Request forgotten = g.iall_reduce(x.data(), 8);
        (void)forgotten;
      }
    }
  }
}

TEST(Communicator, StatsCountEveryCall) {
  for (auto [tp, pp] : mesh_shapes()) {
    SCOPED_TRACE(testing::Message() << "tp " << tp << " pp " << pp);
    ProcessMesh mesh(tp, pp);
    mesh.reset_stats();
    Communicator& t = mesh.tp_group();
    Communicator& d = mesh.dp_group();
    Communicator& w = mesh.world();
    std::vector<float> f(100);
    std::vector<bf16> h(10 * t.size());
    for (int i = 0; i < 3; ++i) t.all_reduce(f.data(), 100);
    for (int i = 0; i < 2; ++i) t.all_gather(Communicator::kInPlace, h.data(), 10);
    d.reduce_scatter(Communicator::kInPlace, f.data(), 100 / d.size());
    d.iall_reduce(f.data(), 50).wait();
    w.broadcast(f.data(), 7, 0);
    w.barrier();
    const int n = w.size(), r = w.rank();
    if (r % 2 == 0 && r + 1 < n) w.send(f.data(), 25, r + 1, 1);
    if (r % 2 == 1) w.recv(f.data(), 25, r - 1, 1);

    const CommStats s = mesh.stats();
    auto calls = [&](std::string_view g, CommOp op) {
      const OpStats* e = s.find(g, op);
      return e ? e->calls : 0;
    };
    auto bytes = [&](std::string_view g, CommOp op) {
      const OpStats* e = s.find(g, op);
      return e ? e->bytes : 0;
    };
    // Groups of one rank record nothing.
    const bool tp_multi = t.size() > 1, dp_multi = d.size() > 1;
    EXPECT_EQ(calls("tp", CommOp::all_reduce), tp_multi ? 3 : 0);
    EXPECT_EQ(bytes("tp", CommOp::all_reduce), tp_multi ? 3 * 400 : 0);
    EXPECT_EQ(calls("tp", CommOp::all_gather), tp_multi ? 2 : 0);
    EXPECT_EQ(bytes("tp", CommOp::all_gather), tp_multi ? 2 * 10 * 2 * t.size() : 0);
    EXPECT_EQ(calls("dp", CommOp::reduce_scatter), dp_multi ? 1 : 0);
    EXPECT_EQ(bytes("dp", CommOp::reduce_scatter), dp_multi ? (100 / d.size()) * 4 * d.size() : 0);
    EXPECT_EQ(calls("dp", CommOp::iall_reduce), dp_multi ? 1 : 0);
    EXPECT_EQ(bytes("dp", CommOp::iall_reduce), dp_multi ? 200 : 0);
    EXPECT_EQ(calls("world", CommOp::broadcast), 1);
    EXPECT_EQ(bytes("world", CommOp::broadcast), 28);
    EXPECT_EQ(calls("world", CommOp::barrier), 1);
    EXPECT_EQ(bytes("world", CommOp::barrier), 0);
    const bool sends = r % 2 == 0 && r + 1 < n, recvs = r % 2 == 1;
    EXPECT_EQ(calls("world", CommOp::send), sends ? 1 : 0);
    EXPECT_EQ(bytes("world", CommOp::send), sends ? 100 : 0);
    EXPECT_EQ(calls("world", CommOp::recv), recvs ? 1 : 0);
    EXPECT_EQ(bytes("world", CommOp::recv), recvs ? 100 : 0);
    EXPECT_EQ(s.calls("pp"), 0);
    EXPECT_EQ(s.calls("mp"), 0);
    for (const auto& [key, e] : s.entries()) {
      SCOPED_TRACE(comm_op_name(key.op));
      EXPECT_EQ(e.latencies_s.size(), static_cast<size_t>(e.calls));
      EXPECT_EQ(e.group_size, mesh.group(key.group).size());
      EXPECT_GE(e.total_s, 0.0);
      if (key.op == CommOp::iall_reduce) {
        EXPECT_LE(e.exposed_s, e.total_s + 1e-9);
      } else {
        EXPECT_DOUBLE_EQ(e.exposed_s, e.total_s);
      }
    }
    mesh.reset_stats();
    EXPECT_TRUE(mesh.stats().empty());
  }
}

TEST(Communicator, MpiErrorsAreThrownNotFatal) {
  ProcessMesh mesh(1, 1);
  Communicator& w = mesh.world();
  std::vector<float> buf(8, 1.0f);
  if (w.rank() == 0) w.send(buf.data(), 8, 1, 3);
  if (w.rank() == 1) {
    try {
      w.recv(buf.data(), 4, 0, 3);  // shorter than the message
      ADD_FAILURE() << "truncated receive did not throw";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("MPI_Recv on group 'world' failed"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(w.all_reduce(buf.data(), int64_t{1} << 40), Error);  // beyond MPI's int counts
  w.barrier();
}

TEST(Trace, GatheredFromEveryRank) {
  const int w_size = world_size(), rank = world_rank();
  ProcessMesh mesh(1, w_size % 2 == 0 ? 2 : 1);
  TraceWriter trace(rank, mesh.coord().pp, synchronized_origin_s(mesh.world()));
  mesh.set_tracer(&trace);
  const double t0 = now_s();
  std::vector<float> f(256, 1.0f);
  mesh.world().all_reduce(f.data(), 256);
  mesh.dp_group().iall_reduce(f.data(), 256).wait();
  trace.complete("forward", "compute", t0, now_s(), {{"micro_batch", 0}});
  mesh.set_tracer(nullptr);
  mesh.world().barrier();  // not traced

  // Rank 0 names the file; everyone learns it.
  char path[256] = {};
  if (rank == 0)
    std::snprintf(path, sizeof path, "%s/meshtrain_trace_%d.json",
                  std::filesystem::temp_directory_path().c_str(), static_cast<int>(::getpid()));
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  trace.gather_and_write(mesh.world(), path);
  if (rank != 0) return;

  std::ifstream in(path);
  const nlohmann::json t = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  EXPECT_EQ(t["displayTimeUnit"], "ms");
  std::set<int> named_ranks, forward_ranks, comm_ranks;
  int dp_spans = 0;
  for (const auto& e : t["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name")) << e;
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"].get<int>() < TraceWriter::kCommTidBase)
      named_ranks.insert(e["tid"].get<int>());
    if (e["ph"] != "X") continue;
    ASSERT_TRUE(e.contains("ts") && e.contains("dur")) << e;
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    const int tid = e["tid"].get<int>();
    if (e["name"] == "forward") {
      forward_ranks.insert(tid);
      EXPECT_EQ(e["pid"].get<int>(), coord_of(mesh.shape(), tid).pp);
    }
    if (e["name"] == "all_reduce" && e["cat"] == "world") {
      comm_ranks.insert(tid - TraceWriter::kCommTidBase);
      EXPECT_EQ(e["args"]["bytes"], 1024);
    }
    if (e["name"] == "iall_reduce" && e["cat"] == "dp") ++dp_spans;
    EXPECT_NE(e["name"], "barrier");
  }
  EXPECT_EQ(named_ranks.size(), static_cast<size_t>(w_size));
  EXPECT_EQ(forward_ranks.size(), static_cast<size_t>(w_size));
  EXPECT_EQ(comm_ranks.size(), static_cast<size_t>(w_size));
  EXPECT_EQ(dp_spans, mesh.dp() > 1 ? w_size : 0);
}

// Prints which rank failed, since only rank 0 prints the full report.
class RankFailurePrinter : public testing::EmptyTestEventListener {
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] failure at %s:%d\n%s\n", world_rank(), r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }
};

}  // namespace
}  // namespace meshtrain

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  const int rank = meshtrain::world_rank();
  testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new meshtrain::RankFailurePrinter);
  int failed = RUN_ALL_TESTS() != 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed;
}
