// The mixed transport (transport/mixed) and the transport choice at start-up: RWIN_TRANSPORT=auto
// resolving by hosts, RWIN_HOST_ID, and ranks that ask for different transports. The transport-
// parameterised suites run everything else over mixed too (their "mixed" lane).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rank_harness.h"
#include "rwin/collectives.h"

using namespace rwin;
using rwin_test::expect_error;
using rwin_test::TransportParam;

namespace {

TransportParam shm_lane(const std::string& transport, int hosts) {
  return {"shm", transport, {{"UCX_TLS", "posix,sysv,self"}, {"RWIN_IFNAME", "lo"}}, false, hosts};
}

// Every rank puts a row (several chunks) into every rank's window, adds into a shared counter by put(Add)
// and fetch_add, and notifies: data, sums and signals checked exactly.
void exchange_with_everyone(Context& ctx) {
  const int rank = ctx.rank(), n = ctx.size();
  constexpr int64_t kCols = 3 * 65536 + 7;  // rows of 786 KB, odd-sized
  Window w = ctx.alloc_window("w", DType::I32, {n, kCols});
  Window acc = ctx.alloc_window("acc", DType::I64, {1, 4});
  SignalArray sig = ctx.alloc_signals("sig", 2);
  Window src = ctx.alloc_window("src", DType::I32, {1, kCols});
  Window add = ctx.alloc_window("add", DType::I64, {1, 3});  // put(Add) on acc 0-2, fetch_add on 3 (no mix on one word)
  for (int64_t i = 0; i < kCols; ++i) src.data_as<int32_t>()[i] = rank * 1000003 + static_cast<int32_t>(i);
  for (int i = 0; i < 3; ++i) add.data_as<int64_t>()[i] = rank + 1;
  ctx.barrier();
  for (int p = 0; p < n; ++p) {
    ctx.put(w.slice({rank, 0}, {1, kCols}), p, src.all());
    ctx.put(acc.slice({0, 0}, {1, 3}), p, add.all(), AtomicType::Add);
    (void)ctx.fetch_add(acc.slice({0, 3}, {1, 1}), p, 100);
    ctx.notify(sig.at(0), p, 1);
  }
  ctx.wait(sig.at(0), n);
  const auto* rows = w.data_as<int32_t>();
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < kCols; i += 4099) {
      const int32_t got = rows[static_cast<size_t>(r * kCols + i)], want = r * 1000003 + static_cast<int32_t>(i);
      MP_CHECK(got == want, "row " << r << " [" << i << "] = " << got << ", wanted " << want);
    }
    MP_CHECK(rows[static_cast<size_t>(r * kCols + kCols - 1)] == r * 1000003 + static_cast<int32_t>(kCols - 1),
             "last element of row " << r);
  }
  const auto* sums = acc.data_as<int64_t>();
  const int64_t total = n * (n + 1) / 2;  // every rank added rank + 1
  for (int i = 0; i < 3; ++i) MP_CHECK(sums[i] == total, "acc[" << i << "] = " << sums[i] << ", wanted " << total);
  MP_CHECK(sums[3] == 100 * n, "acc[3] = " << sums[3] << ", wanted " << 100 * n);
}

// Four ranks on two "hosts" (even, odd): every rank reaches its own host's ranks through UCX's shared
// memory (direct) and the others through rwin's tcp ("native"), and data, signals, put(Add) and fetching
// atomics arrive exactly over both, into one window from both kinds of peer at once.
TEST(MixedTransport, EachPeerGoesByItsHost) {
  const auto res = rwin_test::run_ranks(4, shm_lane("mixed", 2), [](int rank, int n, const std::string& root) {
    Context ctx(rwin_test::rank_options(rank, n, root, shm_lane("mixed", 2)));
    const std::string name = ctx.transport_name();
    MP_CHECK(name.rfind("mixed(ucx", 0) == 0 && name.find("tcp") != std::string::npos &&
                 name.find("2 of 4 ranks on other hosts") != std::string::npos,
             name);
    for (int p = 0; p < n; ++p) {
      const std::string want = p % 2 == rank % 2 ? "direct" : "native";
      MP_CHECK(ctx.rma_mode(p) == want, "rank " << rank << " -> " << p << ": " << ctx.rma_mode(p) << ", wanted " << want);
    }
    exchange_with_everyone(ctx);
    ctx.barrier();
  });
  ASSERT_TRUE(res.all_ok()) << res.report();
}

// RWIN_TRANSPORT unset (auto): UCX when the ranks share a host; across hosts "mixed", unless every host
// has an RDMA device (then UCX, which drives it: the soft-RoCE guest).
TEST(MixedTransport, AutoPicksByHosts) {
  for (const int hosts : {0, 2}) {
    const auto res = rwin_test::run_ranks(2, shm_lane("", hosts), [hosts](int rank, int n, const std::string& root) {
      ::unsetenv("RWIN_TRANSPORT");
      Context ctx(rwin_test::rank_options(rank, n, root, shm_lane("", hosts)));
      const bool mixed = hosts > 0 && !rwin_test::have_rdma_device();
      const std::string name = ctx.transport_name();
      MP_CHECK(name.rfind(mixed ? "mixed(ucx" : "ucx(", 0) == 0, "hosts " << hosts << ": " << name);
      exchange_with_everyone(ctx);
      ctx.barrier();
    });
    ASSERT_TRUE(res.all_ok()) << "hosts " << hosts << ": " << res.report();
  }
}

// Ranks that ask for transports that do not resolve to the same one fail at start-up on every rank,
// naming the other rank and both settings; ranks whose settings resolve alike (auto and ucx on one
// host) run.
TEST(MixedTransport, RanksMustAgreeOnTheTransport) {
  const auto res = rwin_test::run_ranks(2, shm_lane("ucx", 0), [](int rank, int n, const std::string& root) {
    Options o = rwin_test::rank_options(rank, n, root, shm_lane(rank == 0 ? "tcp" : "mixed", 0));
    o.startup_timeout = std::chrono::milliseconds(10000);
    const std::string other = rank == 0 ? "rank 1 uses transport 'mixed'" : "rank 0 uses transport 'tcp'";
    expect_error([&] { Context ctx(o); }, ErrorCode::InvalidArgument, {other, "every rank of a job must use the same one"});
  });
  ASSERT_TRUE(res.all_ok()) << res.report();
  const auto ok = rwin_test::run_ranks(2, shm_lane("ucx", 0), [](int rank, int n, const std::string& root) {
    Context ctx(rwin_test::rank_options(rank, n, root, shm_lane(rank == 0 ? "auto" : "ucx", 0)));
    MP_CHECK(ctx.transport_name().rfind("ucx(", 0) == 0, ctx.transport_name());
    ctx.barrier();
  });
  ASSERT_TRUE(ok.all_ok()) << ok.report();
}

TEST(MixedTransport, BadSettingsFailAtStartUp) {
  const auto res = rwin_test::run_ranks(1, shm_lane("ucx", 0), [](int rank, int n, const std::string& root) {
    ::setenv("RWIN_HOST_ID", "two words", 1);
    expect_error([&] { Context ctx(rwin_test::rank_options(rank, n, root, shm_lane("ucx", 0))); },
                 ErrorCode::InvalidArgument, {"RWIN_HOST_ID='two words'", "without white space"});
    ::unsetenv("RWIN_HOST_ID");
    expect_error([&] { Context ctx(rwin_test::rank_options(rank, n, root, shm_lane("rdma", 0))); },
                 ErrorCode::Transport, {"unknown transport 'rdma'", "auto, ucx, tcp, mixed, verbs"});
  });
  ASSERT_TRUE(res.all_ok()) << res.report();
}

// Collectives across hosts gather small vectors through one leader per host (core/src/collectives/
// hier.cpp): 4 ranks on 2 hosts (even, odd). An allreduce of floats whose sum depends on the order gives
// the same bits as Bruck's (every member reduces all inputs in team-rank order), allgather the exact rows,
// reduce_scatter the exact sums, all_to_all the exact blocks, broadcast from every root, on the world and
// on a 3-member team; a member whose count differs ends the call in CollectiveMismatch
// on every member naming the hierarchy's mode (so the path was taken); RWIN_COLL_HIER_MAX=0 turns it off.
TEST(MixedTransport, SmallCollectivesGoThroughHostLeaders) {
  for (const bool off : {false, true}) {
    const auto res = rwin_test::run_ranks(4, shm_lane("mixed", 2), [off](int rank, int n, const std::string& root) {
      if (off) ::setenv("RWIN_COLL_HIER_MAX", "0", 1);
      Context ctx(rwin_test::rank_options(rank, n, root, shm_lane("mixed", 2)));
      for (const bool whole : {true, false}) {
        if (!whole && rank == 3) break;
        Team t = whole ? world(ctx) : make_team(ctx, {2, 1, 0});
        const int me = t.rank(), nr = t.size();
        constexpr int64_t kN = 257;
        Window x = t.alloc_window("x", DType::F32, {1, kN});
        Window a = t.alloc_window("a", DType::F32, {1, kN});
        Window b = t.alloc_window("b", DType::F32, {1, kN});
        Window rows = t.alloc_window("rows", DType::F32, {nr, kN});
        for (int64_t i = 0; i < kN; ++i) x.data_as<float>()[i] = 1.0f / static_cast<float>(3 + (me * 7919 + i * 104729) % 1000);
        t.allreduce(x, a);
        t.allreduce(x, b, ReduceOp::Sum, AllreduceMode::Bruck);
        MP_CHECK(std::memcmp(a.data(), b.data(), kN * 4) == 0, "allreduce bits differ from Bruck's on team rank " << me);
        t.allgather(x, rows);
        for (int q = 0; q < nr; ++q) {
          for (int64_t i = 0; i < kN; i += 16) {
            const float want = 1.0f / static_cast<float>(3 + (q * 7919 + i * 104729) % 1000);
            MP_CHECK(rows.data_as<float>()[q * kN + i] == want, "row " << q << " [" << i << "]");
          }
        }
        Window bc = t.alloc_window("bc", DType::I64, {1, 1000});
        for (int from = 0; from < nr; ++from) {
          for (int64_t i = 0; i < 1000; ++i) bc.data_as<int64_t>()[i] = me == from ? from * 1000003 + i : -1;
          t.broadcast(bc, from);
          for (int64_t i = 0; i < 1000; i += 7) MP_CHECK(bc.data_as<int64_t>()[i] == from * 1000003 + i, "broadcast from " << from);
        }
        Window st = t.alloc_window("st", DType::I32, {nr, 5}), got = t.alloc_window("got", DType::I32, {nr, 5});
        for (int q = 0; q < nr; ++q) {
          for (int64_t i = 0; i < 5; ++i) st.data_as<int32_t>()[q * 5 + i] = me * 10000 + q * 100 + static_cast<int32_t>(i);
        }
        t.all_to_all(st, got);
        for (int s = 0; s < nr; ++s) {
          for (int64_t i = 0; i < 5; ++i) {
            MP_CHECK(got.data_as<int32_t>()[s * 5 + i] == s * 10000 + me * 100 + static_cast<int32_t>(i), "all_to_all row " << s);
          }
        }
        Window rs = t.alloc_window("rs", DType::I32, {nr, 33});
        for (int q = 0; q < nr; ++q) {
          for (int64_t i = 0; i < 33; ++i) rs.data_as<int32_t>()[q * 33 + i] = (me + 1) * 1000 + q * 100 + static_cast<int32_t>(i);
        }
        t.reduce_scatter(rs);
        for (int64_t i = 0; i < 33; ++i) {
          const int32_t want = 1000 * nr * (nr + 1) / 2 + nr * (me * 100 + static_cast<int32_t>(i));
          MP_CHECK(rs.data_as<int32_t>()[me * 33 + i] == want, "reduce_scatter [" << i << "]");
        }
        Window x65 = ctx.window(x.buffer(), DType::F32, {1, 65}), x64 = ctx.window(x.buffer(), DType::F32, {1, 64});
        try {
          t.allreduce(me == 1 ? x65 : x64);
          t.barrier();
          MP_CHECK(false, "no error on team rank " << me);
        } catch (const Error& e) {
          MP_CHECK(e.code() == ErrorCode::CollectiveMismatch, to_string(e.code()) << ": " << e.what());
          // The member that found it names both calls (the others: "team rank q found that ...").
          const std::string what = e.what();
          if (what.find("its error names both sides") == std::string::npos) {
            const bool named = what.find("through the host leaders") != std::string::npos;
            MP_CHECK(named != off, (off ? "RWIN_COLL_HIER_MAX=0 still went through the leaders: " : "not the hierarchy's mode: ")
                                       << what);
            std::printf("FOUND IT (%s team)\n", whole ? "world" : "3-member");
          }
        }
      }
    });
    ASSERT_TRUE(res.all_ok()) << (off ? "RWIN_COLL_HIER_MAX=0: " : "") << res.report();
    for (const char* team : {"world", "3-member"}) {
      bool found = false;
      for (const auto& r : res.ranks) found = found || r.output.find(std::string("FOUND IT (") + team) != std::string::npos;
      EXPECT_TRUE(found) << "no member found the mismatch on the " << team << " team: " << res.report();
    }
  }
}

// Large allreduce and reduce_scatter along the hosts (hier.cpp's chain): hosts holding runs of
// consecutive ranks (rank r on host r / per), each host's k-th member folding block k (allreduce) or
// the rows of every host's k-th member (reduce_scatter), the fold carried from host to host. allreduce
// must give Ring's bits (every element folded in team-rank order), reduce_scatter's row Ring
// allreduce's bits of that row with the other rows untouched in place: order-sensitive float sums and
// products, f16/bf16 (carried in f32, rounded once), wrapping integers, fmax with NaNs; in place and
// not; several chunks per block, lengths the hosts' size does not divide; inputs and results read in
// place (team windows) and sent as messages (views that are not copies, RWIN_COLL_PULL_MIN=0); 2 x 2,
// 2 x 3, 3 x 2, 2 x 4 and 3 x 3 ranks, 1, 2, 3 and all lanes. A member whose count differs ends the call in CollectiveMismatch naming the chain's mode
// where it applies (so the chain ran), and not where it does not.
TEST(MixedTransport, LargeReductionsChainAlongTheHosts) {
  struct Layout {
    int n, per;
    const char* lanes;     // RWIN_COLL_CHAIN_LANES (null: the default, 2)
    const char* pull_min;  // RWIN_COLL_PULL_MIN (null: the default; "0": every piece as a message)
  };
  // reduce_scatter chains only where the flat exchange would carry twice its bytes across hosts: the
  // 2 x 4 and 3 x 3 layouts are for it.
  for (const Layout lay : {Layout{4, 2, nullptr, nullptr}, Layout{6, 3, "1", nullptr}, Layout{6, 2, nullptr, "0"},
                           Layout{8, 4, "3", nullptr}, Layout{9, 3, "5", "0"}}) {
    const auto res = rwin_test::run_ranks(lay.n, shm_lane("mixed", 0), [lay](int rank, int n, const std::string& root) {
      ::setenv("RWIN_HOST_ID", ("chainhost" + std::to_string(rank / lay.per)).c_str(), 1);
      ::setenv("RWIN_COLL_CHUNK_BYTES", "65536", 1);  // several chunks per block at these sizes
      if (lay.lanes) ::setenv("RWIN_COLL_CHAIN_LANES", lay.lanes, 1);
      if (lay.pull_min) ::setenv("RWIN_COLL_PULL_MIN", lay.pull_min, 1);
      const int hosts = n / lay.per;
      const bool rs_chains = lay.per * (hosts - 1) >= 2 * hosts;
      Context ctx(rwin_test::rank_options(rank, n, root, shm_lane("mixed", 0)));
      Team t = world(ctx);
      struct Case {
        DType dt;
        ReduceOp op;
        int64_t count;
      };
      const Case cases[] = {{DType::F32, ReduceOp::Sum, 100003}, {DType::F32, ReduceOp::Prod, 8191},
                            {DType::BF16, ReduceOp::Sum, 90001},  {DType::F16, ReduceOp::Sum, 40009},
                            {DType::F64, ReduceOp::Max, 30011},   {DType::I8, ReduceOp::Sum, 70001},
                            {DType::I32, ReduceOp::Prod, 20011}};
      for (const Case& c : cases) {
        const size_t es = dtype_size(c.dt);
        Window x = t.alloc_window("x", c.dt, {1, c.count});
        Window a = t.alloc_window("a", c.dt, {1, c.count});
        Window b = t.alloc_window("b", c.dt, {1, c.count});
        auto fill = [&](Window& w) {
          auto* p = static_cast<unsigned char*>(w.data());
          for (int64_t i = 0; i < c.count; ++i) {
            const uint32_t v = static_cast<uint32_t>((rank * 7919 + i * 104729) % 1000 + 3);
            switch (c.dt) {
              case DType::F32: {
                const float f = c.op == ReduceOp::Prod ? 1.0f + 1.0f / static_cast<float>(v) : 1.0f / static_cast<float>(v);
                std::memcpy(p + i * 4, &f, 4);
                break;
              }
              case DType::F64: {
                const double d = i % 97 == 0 && rank == 1 ? std::nan("") : 1.0 / v;
                std::memcpy(p + i * 8, &d, 8);
                break;
              }
              case DType::BF16:
              case DType::F16: {
                // bits of small positive values of either format: exponent field mid-range, mantissa from v
                const uint16_t h = c.dt == DType::BF16 ? static_cast<uint16_t>(0x3c00 + v % 512) : static_cast<uint16_t>(0x2c00 + v % 1024);
                std::memcpy(p + i * 2, &h, 2);
                break;
              }
              case DType::I8: p[i] = static_cast<unsigned char>(v * 37); break;
              default: {
                const int32_t k = static_cast<int32_t>(v * 2654435761u);
                std::memcpy(p + i * 4, &k, 4);
              }
            }
          }
        };
        fill(x);
        t.allreduce(x, a, c.op);
        t.allreduce(x, b, c.op, AllreduceMode::Ring);
        MP_CHECK(std::memcmp(a.data(), b.data(), static_cast<size_t>(c.count) * es) == 0,
                 dtype_name(c.dt) << " " << reduce_op_name(c.op) << ": bits differ from Ring's on rank " << rank);
        t.allreduce(x, c.op);  // in place
        MP_CHECK(std::memcmp(x.data(), b.data(), static_cast<size_t>(c.count) * es) == 0,
                 dtype_name(c.dt) << " " << reduce_op_name(c.op) << " in place: bits differ from Ring's on rank " << rank);
        ctx.free(x);
        ctx.free(a);
        ctx.free(b);
      }
      {
        // Views that are not copies of each other (rank 1's starts 64 bytes further into its buffer):
        // rank 1's host members cannot read its src in place, so its blocks travel as messages, and theirs to it.
        constexpr int64_t kN = 50001;
        WindowBuffer buf = t.alloc_window_buffer("skew", (kN + 16) * 4);
        Window v = ctx.window(buf, DType::F32, {1, kN}, rank == 1 ? 64 : 0);
        Window ra = t.alloc_window("ra", DType::F32, {1, kN}), rb = t.alloc_window("rb", DType::F32, {1, kN});
        for (int64_t i = 0; i < kN; ++i) v.data_as<float>()[i] = 1.0f / static_cast<float>(3 + (rank * 7919 + i * 104729) % 1000);
        t.allreduce(v, ra);
        t.allreduce(v, rb, ReduceOp::Sum, AllreduceMode::Ring);
        MP_CHECK(std::memcmp(ra.data(), rb.data(), kN * 4) == 0, "skewed views: bits differ from Ring's on rank " << rank);
        t.allreduce(v);
        MP_CHECK(std::memcmp(v.data(), rb.data(), kN * 4) == 0, "skewed views in place: bits differ from Ring's on rank " << rank);
      }
      // reduce_scatter along the hosts: row `me` must hold Ring allreduce's bits of that row; the other
      // rows stay as they were; data in team windows (read in place) and skewed (sent as messages).
      for (const Case& c : {Case{DType::F32, ReduceOp::Sum, 20011}, Case{DType::BF16, ReduceOp::Sum, 30011},
                            Case{DType::I8, ReduceOp::Sum, 9001}, Case{DType::F64, ReduceOp::Max, 5003}}) {
        for (const bool skew : {false, true}) {
          const size_t es = dtype_size(c.dt);
          const size_t rowb = static_cast<size_t>(c.count) * es;
          WindowBuffer buf = t.alloc_window_buffer("rsbuf", static_cast<size_t>(n) * rowb + 64);
          Window d = ctx.window(buf, c.dt, {n, c.count}, skew && rank == 1 ? 64 : 0);
          Window keep = t.alloc_window("keep", c.dt, {n, c.count});
          Window ref = t.alloc_window("ref", c.dt, {n, c.count});
          Window o = t.alloc_window("o", c.dt, {1, c.count});
          auto* p = static_cast<unsigned char*>(d.data());
          for (size_t k = 0; k < static_cast<size_t>(n) * rowb; k += es) {
            const uint32_t v = static_cast<uint32_t>((rank * 7919 + k * 104729) % 1000 + 3);
            if (c.dt == DType::F32) {
              const float f = 1.0f / static_cast<float>(v);
              std::memcpy(p + k, &f, 4);
            } else if (c.dt == DType::F64) {
              const double x = 1.0 / v;
              std::memcpy(p + k, &x, 8);
            } else if (c.dt == DType::BF16) {
              const uint16_t b16 = static_cast<uint16_t>(0x3c00 + v % 512);
              std::memcpy(p + k, &b16, 2);
            } else {
              p[k] = static_cast<unsigned char>(v * 37);
            }
          }
          std::memcpy(keep.data(), d.data(), static_cast<size_t>(n) * rowb);
          t.allreduce(keep, ref, c.op, AllreduceMode::Ring);
          const auto* want = static_cast<const unsigned char*>(ref.data()) + static_cast<size_t>(rank) * rowb;
          t.reduce_scatter(d, o, c.op);
          MP_CHECK(std::memcmp(o.data(), want, rowb) == 0, dtype_name(c.dt) << (skew ? " skewed" : "")
                                                                        << ": reduce_scatter row differs from Ring's on rank " << rank);
          t.reduce_scatter(d, c.op);  // in place
          for (int r = 0; r < n; ++r) {
            const auto* got = static_cast<const unsigned char*>(d.data()) + static_cast<size_t>(r) * rowb;
            const auto* was = static_cast<const unsigned char*>(keep.data()) + static_cast<size_t>(r) * rowb;
            MP_CHECK(std::memcmp(got, r == rank ? want : was, rowb) == 0,
                     dtype_name(c.dt) << (skew ? " skewed" : "") << ": in place, row " << r << " wrong on rank " << rank);
          }
          ctx.free(o);
          ctx.free(ref);
          ctx.free(keep);
          t.barrier();
        }
      }
      {
        // On a team of its own (the same ranks, in order): after a mismatch a team's next calls are not
        // this test's subject.
        std::vector<int> all(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) all[static_cast<size_t>(r)] = r;
        Team t2 = make_team(ctx, all);
        Window rs = t2.alloc_window("rs", DType::F32, {n, 20000});
        Window rs1 = ctx.window(rs.buffer(), DType::F32, {n, 19999});
        try {
          t2.reduce_scatter(rank == 2 ? rs1 : rs);
          t2.barrier();
          MP_CHECK(false, "no error on rank " << rank);
        } catch (const Error& e) {
          MP_CHECK(e.code() == ErrorCode::CollectiveMismatch, to_string(e.code()) << ": " << e.what());
          const std::string what = e.what();
          if (what.find("its error names both sides") == std::string::npos) {
            const bool chain = what.find("a chain along the hosts") != std::string::npos;
            MP_CHECK(chain == rs_chains, (rs_chains ? "not the chain's mode: " : "the chain's mode: ") << what);
            std::printf("FOUND RS\n");
          }
        }
      }
      Window y = t.alloc_window("y", DType::F32, {1, 40001});
      Window y1 = ctx.window(y.buffer(), DType::F32, {1, 40000});
      try {
        t.allreduce(rank == 1 ? y : y1);
        t.barrier();
        MP_CHECK(false, "no error on rank " << rank);
      } catch (const Error& e) {
        MP_CHECK(e.code() == ErrorCode::CollectiveMismatch, to_string(e.code()) << ": " << e.what());
        const std::string what = e.what();
        if (what.find("its error names both sides") == std::string::npos) {
          const bool chain = what.find("a chain along the hosts") != std::string::npos;
          MP_CHECK(chain, "not the chain's mode: " << what);
          std::printf("FOUND IT\n");
        }
      }
    });
    ASSERT_TRUE(res.all_ok()) << lay.n << " ranks, " << lay.per << " per host, lanes " << (lay.lanes ? lay.lanes : "default")
                              << ": " << res.report();
    for (const char* tag : {"FOUND IT", "FOUND RS"}) {
      bool found = false;
      for (const auto& r : res.ranks) found = found || r.output.find(tag) != std::string::npos;
      EXPECT_TRUE(found) << "no member found the mismatch (" << tag << "): " << res.report();
    }
  }
}

// 4 ranks on 2 hosts of 2 (rank / 2), `knob` set to value(rank): a chain allreduce ends in
// CollectiveMismatch on every member, and some member's message holds every one of `named`.
void expect_chain_setting_mismatch(const char* knob, std::string (*value)(int), const std::vector<std::string>& named) {
  const auto res = rwin_test::run_ranks(4, shm_lane("mixed", 0), [&](int rank, int n, const std::string& root) {
    ::setenv("RWIN_HOST_ID", ("knobhost" + std::to_string(rank / 2)).c_str(), 1);
    ::setenv(knob, value(rank).c_str(), 1);
    Context ctx(rwin_test::rank_options(rank, n, root, shm_lane("mixed", 0)));
    Team t = world(ctx);
    Window x = t.alloc_window("x", DType::F32, {1, 100000});
    try {
      t.allreduce(x);
      MP_CHECK(false, "no error on rank " << rank);
    } catch (const Error& e) {
      MP_CHECK(e.code() == ErrorCode::CollectiveMismatch, to_string(e.code()) << ": " << e.what());
      const std::string what = e.what();
      bool all = true;
      for (const auto& part : named) all = all && what.find(part) != std::string::npos;
      if (all) std::printf("NAMED ALL\n");
      std::printf("rank %d: %s\n", rank, what.c_str());  // in the report when the test fails
    }
  });
  ASSERT_TRUE(res.all_ok()) << knob << ": " << res.report();
  bool found = false;
  for (const auto& r : res.ranks) found = found || r.output.find("NAMED ALL") != std::string::npos;
  EXPECT_TRUE(found) << knob << ": no member named both values: " << res.report();
}

// Members whose RWIN_COLL_CHAIN_LANES differ fold different shares: the chain's header carries the lanes,
// so the call ends in CollectiveMismatch on every member (one naming both), not in a hang or wrong
// data; so does a RWIN_COLL_PULL_MIN that differs inside a host (its offers carry it: each end would
// otherwise expect the other to read in place, or to send); a value that is not a lane count is
// InvalidArgument.
TEST(MixedTransport, ChainSettingsMustAgree) {
  expect_chain_setting_mismatch("RWIN_COLL_CHAIN_LANES", [](int rank) { return std::string(rank == 3 ? "1" : "2"); },
                                {"2 lanes", "1 lanes"});
  expect_chain_setting_mismatch("RWIN_COLL_PULL_MIN", [](int rank) { return std::string(rank == 0 ? "0" : "8192"); },
                                {"RWIN_COLL_PULL_MIN=0", "RWIN_COLL_PULL_MIN=8192"});
  const auto bad = rwin_test::run_ranks(1, shm_lane("ucx", 0), [](int rank, int n, const std::string& root) {
    ::setenv("RWIN_COLL_CHAIN_LANES", "0", 1);
    expect_error([&] { Context ctx(rwin_test::rank_options(rank, n, root, shm_lane("ucx", 0))); }, ErrorCode::InvalidArgument,
                 {"RWIN_COLL_CHAIN_LANES='0'", "auto or 1..1024"});
  });
  ASSERT_TRUE(bad.all_ok()) << bad.report();
}

// A member that dies in the middle of a collective, 4 ranks on 2 hosts of 2 (shared memory inside a
// host, tcp across): each algorithm that runs across hosts (the chain, the push, the host leaders' path,
// and the flat ones forced), each kind of member as the victim (a lane or leader, a member whose inputs
// are read in place, the last host's), several delays. Whatever step it reached, every survivor's call
// ends in PeerFailed naming the call and the victim well before the deadline, or (its worker had done
// its part) ends with every element exact and the next call fails; never a hang, a Timeout or torn data.
TEST(MixedTransport, MemberDyingMidCollectiveEndsItForTheSurvivors) {
  enum class Algo { Chain, Push, PushAllToAll, Leaders, LeadersAllToAll, LeadersBroadcast, Ring, Mesh, Bruck, ReduceScatter };
  struct Kind {
    Algo algo;
    const char* name;
    const char* call;
    int64_t n;  // elements (f32) per row
  };
  const Kind kinds[] = {
      {Algo::Chain, "chain allreduce", "allreduce", 1 << 20},         // 4 MiB > RWIN_COLL_HIER_MAX
      {Algo::Push, "push allgather", "allgather", 1 << 20},           // 4 MiB rows pushed
      {Algo::PushAllToAll, "push all_to_all", "all_to_all", 1 << 18},  // 1 MiB rows pushed
      {Algo::Leaders, "leaders' allreduce", "allreduce", 256},        // 1 KiB: through the host leaders
      {Algo::LeadersAllToAll, "leaders' all_to_all", "all_to_all", 1024},
      {Algo::LeadersBroadcast, "leaders' broadcast", "broadcast", 4096},
      {Algo::Ring, "ring allreduce", "allreduce", 1 << 18},
      {Algo::Mesh, "mesh allreduce", "allreduce", 1 << 14},
      {Algo::Bruck, "bruck allreduce", "allreduce", 64},
      {Algo::ReduceScatter, "reduce_scatter", "reduce_scatter", 1 << 16},
  };
  struct Trial {
    Kind kind;
    int victim;
    int delay_us;
  };
  std::vector<Trial> trials;
  for (size_t k = 0; k < std::size(kinds); ++k) {
    if (rwin_test::ci_tier()) {
      trials.push_back({kinds[k], static_cast<int>(k % 4), k % 3 == 2 ? 300 : 0});  // every victim and algorithm
      continue;
    }
    for (int v = 0; v < 4; ++v) {
      for (const int d : {0, 100, 1000}) trials.push_back({kinds[k], v, d});
    }
  }
  for (const Trial tr : trials) {
    const rwin_test::Pipe passed;  // the survivors are past the barrier (else they may learn of the death inside it)
    const auto res = rwin_test::run_ranks(4, shm_lane("mixed", 0), [tr, &passed](int rank, int n, const std::string& root) {
      ::setenv("RWIN_HOST_ID", ("diehost" + std::to_string(rank / 2)).c_str(), 1);
      Options o = rwin_test::rank_options(rank, n, root, shm_lane("mixed", 0));
      o.op_timeout = std::chrono::milliseconds(20000);
      Context ctx(o);
      Team t = world(ctx);
      const Algo algo = tr.kind.algo;
      const int64_t N = tr.kind.n;
      const bool rows_in = algo == Algo::PushAllToAll || algo == Algo::LeadersAllToAll || algo == Algo::ReduceScatter;
      const bool rows_out = algo == Algo::Push || algo == Algo::PushAllToAll || algo == Algo::LeadersAllToAll;
      Window x = t.alloc_window("x", DType::F32, {rows_in ? n : 1, N});
      Window y = t.alloc_window("y", DType::F32, {rows_out ? n : 1, N});
      // Small integers: every sum is exact in f32, so a call that ended well can be checked exactly.
      // Element i of row q of rank r's input:
      auto value = [](int r, int64_t q, int64_t i) { return static_cast<float>((r + 1) * ((i + 3 * q) % 7 + 1)); };
      for (int64_t q = 0; q < x.shape()[0]; ++q) {
        for (int64_t i = 0; i < N; ++i) x.data_as<float>()[q * N + i] = value(rank, q, i);
      }
      auto run = [&]() -> CollectiveRequest {
        switch (algo) {
          case Algo::Push: return t.start_allgather(x, y);
          case Algo::PushAllToAll:
          case Algo::LeadersAllToAll: return t.start_all_to_all(x, y);
          case Algo::LeadersBroadcast: return t.start_broadcast(x, 0);
          case Algo::Ring: return t.start_allreduce(x, y, ReduceOp::Sum, AllreduceMode::Ring);
          case Algo::Mesh: return t.start_allreduce(x, y, ReduceOp::Sum, AllreduceMode::Mesh);
          case Algo::Bruck: return t.start_allreduce(x, y, ReduceOp::Sum, AllreduceMode::Bruck);
          case Algo::ReduceScatter: return t.start_reduce_scatter(x, y);
          default: return t.start_allreduce(x, y);
        }
      };
      t.barrier();
      if (rank != tr.victim) passed.put_byte();
      if (rank == tr.victim) {
        for (int k = 0; k < n - 1; ++k) MP_CHECK(passed.await_byte(), "the survivors never passed the barrier");
        CollectiveRequest r = run();
        if (tr.delay_us) std::this_thread::sleep_for(std::chrono::microseconds(tr.delay_us));
        ::_exit(0);  // mid-call (its worker may be anywhere in it), without a word
      }
      const std::string victim = "peer " + std::to_string(tr.victim) + " failed";
      const auto t0 = std::chrono::steady_clock::now();
      bool ended = false;
      try {
        run().wait();
      } catch (const Error& e) {
        const std::string what = e.what();
        MP_CHECK(e.code() == ErrorCode::PeerFailed, tr.kind.name << ", victim " << tr.victim << ": wrong code " << to_string(e.code()) << ": " << what);
        MP_CHECK(what.find(tr.kind.call) != std::string::npos && what.find(victim) != std::string::npos,
                 tr.kind.name << ": message lacks the call or the peer: " << what);
        ended = true;
      }
      if (!ended) {
        // What every element must hold after a call that ended well.
        auto want = [&](int64_t q, int64_t i) {
          switch (algo) {
            case Algo::Push: return value(static_cast<int>(q), 0, i);
            case Algo::PushAllToAll:
            case Algo::LeadersAllToAll: return value(static_cast<int>(q), rank, i);  // row `rank` of member q's stage
            case Algo::LeadersBroadcast: return value(0, 0, i);
            default: {
              float sum = 0;
              for (int r = 0; r < n; ++r) sum += value(r, algo == Algo::ReduceScatter ? rank : 0, i);
              return sum;
            }
          }
        };
        const Window& out = algo == Algo::LeadersBroadcast ? x : y;
        for (int64_t q = 0; q < out.shape()[0]; ++q) {
          for (int64_t i = 0; i < N; ++i) {
            const float got = out.data_as<float>()[q * N + i];
            MP_CHECK(got == want(q, i), tr.kind.name << " that ended well: [" << q << "][" << i << "] = " << got << ", wanted " << want(q, i));
          }
        }
        expect_error([&] { t.barrier(); }, ErrorCode::PeerFailed, {"barrier", victim});
      }
      MP_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(15000), "the failure took the whole deadline");
    });
    ASSERT_TRUE(res.all_ok()) << tr.kind.name << ", victim " << tr.victim << ", delay " << tr.delay_us << " us: " << res.report();
  }
}

// The team barrier through the host leaders, with three hosts (the leaders then run a dissemination
// barrier among themselves: a single count for all of them let a leader already in the next barrier
// stand in for one still missing). 6 ranks, rank r on host r % 3: each round every member puts the
// round's number into its row of every member's window, the barrier makes them visible (it quiets
// first), every member checks every row, and a second barrier keeps the next round's puts out until
// everyone has checked. Also with two hosts, and the flat dissemination barrier across three
// (RWIN_COLL_HIER_MAX=0).
TEST(MixedTransport, BarrierThroughHostLeaders) {
  for (const auto& [hosts, hier] : {std::pair{3, true}, std::pair{2, true}, std::pair{3, false}}) {
    const int rounds = rwin_test::trials(300, 60);
    const auto res = rwin_test::run_ranks(6, shm_lane("mixed", hosts), [rounds, hier](int rank, int n, const std::string& root) {
      if (!hier) ::setenv("RWIN_COLL_HIER_MAX", "0", 1);
      Context ctx(rwin_test::rank_options(rank, n, root, shm_lane("mixed", 0)));
      Team t = world(ctx);
      Window x = t.alloc_window("x", DType::I64, {n, 1});
      Window src = t.alloc_window("src", DType::I64, {1, 1});
      for (int64_t it = 1; it <= rounds; ++it) {
        src.data_as<int64_t>()[0] = it;
        for (int p = 0; p < n; ++p) ctx.put(x.slice({rank, 0}, {1, 1}), p, src.all());
        t.barrier();
        for (int q = 0; q < n; ++q) {
          MP_CHECK(x.data_as<int64_t>()[q] == it, "round " << it << ": row " << q << " = " << x.data_as<int64_t>()[q]);
        }
        t.barrier();
      }
    });
    ASSERT_TRUE(res.all_ok()) << hosts << " hosts" << (hier ? "" : ", flat") << ": " << res.report();
  }
}

}  // namespace
