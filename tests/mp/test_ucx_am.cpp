// The UCX am mode (rwin's ordered active-message RMA, transport/ucx/ucx_am_*.cpp) with real
// ranks over tcp loopback: which peers use it, and that a notify after puts needs no flush to be
// ordered, for rendezvous-sized puts and for many ranks at once.
#include <gtest/gtest.h>

#include "rank_harness.h"

using namespace rwin;
using rwin_test::rank_options;
using rwin_test::run_ranks;
using rwin_test::TransportParam;

namespace {

TransportParam tcp(const std::string& rma) {
  TransportParam p{"ucx_tcp_" + rma, "ucx", {{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "lo"}}, true};
  if (!rma.empty()) p.env.push_back({"RWIN_UCX_RMA", rma});
  return p;
}

// Runs `body` on `n` ranks with a ready Context; `o` supplies chunking overrides.
void run(int n, const TransportParam& p, const std::function<void(Context&)>& body, Options over = {}) {
  auto res = run_ranks(n, p, [&](int rank, int nranks, const std::string& root) {
    Options o = rank_options(rank, nranks, root, p);
    if (over.chunk_bytes) o.chunk_bytes = over.chunk_bytes;
    if (over.pipeline_depth) o.pipeline_depth = over.pipeline_depth;
    Context ctx(o);
    body(ctx);
  });
  ASSERT_TRUE(res.all_ok()) << res.report();
}

uint64_t pattern(int sender, int round, uint64_t i) { return (uint64_t(sender) << 48) ^ (uint64_t(round) << 32) ^ (i * 0x9e3779b1u); }

TEST(UcxAmRanks, TransportNameSaysWhichModeEachSettingPicks) {
  // auto: am over tcp where no RDMA device exists (UCX would emulate RMA); native otherwise.
  const bool auto_am = !rwin_test::have_rdma_device();
  run(2, tcp(""), [auto_am](Context& ctx) {
    const std::string name = ctx.transport_name();
    MP_CHECK((name.find("am rma") != std::string::npos) == auto_am, "auto over tcp: " << name);
  });
  run(2, tcp("am"), [](Context& ctx) {
    MP_CHECK(ctx.transport_name().find("am rma") != std::string::npos, ctx.transport_name());
  });
  run(2, tcp("native"), [](Context& ctx) {
    MP_CHECK(ctx.transport_name().find("am rma") == std::string::npos, ctx.transport_name());
  });
  // Shared memory: auto maps the peer's window (direct loads, stores and atomics); native keeps
  // ucp_put/get/atomic_op_nbx.
  TransportParam shm{"ucx_shm", "ucx", {{"UCX_TLS", "posix,sysv,self"}}, false};
  run(2, shm, [](Context& ctx) {
    const std::string name = ctx.transport_name();
    MP_CHECK(name.find("am rma") == std::string::npos && name.find("direct shm") != std::string::npos,
             "auto over shm: " << name);
  });
  shm.env.push_back({"RWIN_UCX_RMA", "native"});
  run(2, shm, [](Context& ctx) {
    MP_CHECK(ctx.transport_name().find("direct") == std::string::npos, "native over shm: " << ctx.transport_name());
  });
}

// Context::rma_mode(peer) (what rwin-perf's JSON records) agrees with the setting and the path:
// every peer, self included, of 3 ranks; and a peer outside the job is InvalidArgument, named.
TEST(UcxAmRanks, RmaModeNamesEachPeersPath) {
  auto expect = [](const std::string& want) {
    return [want](Context& ctx) {
      for (int q = 0; q < ctx.size(); ++q) {
        MP_CHECK(ctx.rma_mode(q) == want, "peer " << q << ": " << ctx.rma_mode(q) << ", want " << want << " ("
                                                   << ctx.transport_name() << ")");
      }
      for (int q : {-1, ctx.size()}) {
        try {
          (void)ctx.rma_mode(q);
          MP_CHECK(false, "rma_mode(" << q << ") did not throw");
        } catch (const Error& e) {
          MP_CHECK(e.code() == ErrorCode::InvalidArgument &&
                       std::string(e.what()).find("peer " + std::to_string(q)) != std::string::npos,
                   e.what());
        }
      }
    };
  };
  run(3, tcp("am"), expect("am"));
  run(3, tcp("native"), expect("native"));
  TransportParam shm{"ucx_shm", "ucx", {{"UCX_TLS", "posix,sysv,self"}}, false};
  run(3, shm, expect("direct"));
  shm.env.push_back({"RWIN_UCX_RMA", "native"});
  run(3, shm, expect("native"));
}

// One 8 MiB put (one rendezvous message: no chunking) then a notify: when the signal is seen,
// every byte is there. Also with 1 MiB chunks pipelined (several rendezvous in flight). With
// put_nbi the notify leaves while the rendezvous data is still to be fetched, so the target
// must hold the notify back; with a blocking put the data has landed before put returns.
TEST(UcxAmRanks, RendezvousPutThenNotifyIsOrdered) {
  for (bool nbi : {true, false}) {
  for (size_t chunk : {size_t{8} << 20, size_t{1} << 20}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk) + (nbi ? " put_nbi" : " put"));
    Options o;
    o.chunk_bytes = chunk;
    o.pipeline_depth = 4;
    run(2, tcp("am"), [nbi](Context& ctx) {
      constexpr int kRounds = 6;
      constexpr int64_t kWords = (8 << 20) / 8;
      const int r = ctx.rank();
      auto src = ctx.alloc_window("src", DType::U64, {1, kWords});
      auto dst = ctx.alloc_window("dst", DType::U64, {1, kWords});
      auto sig = ctx.alloc_signals("sig", 2);  // 0: data ready, 1: consumed
      for (int round = 1; round <= kRounds; ++round) {
        if (r == 0) {
          auto* s = src.data_as<uint64_t>();
          for (int64_t i = 0; i < kWords; ++i) s[i] = pattern(0, round, static_cast<uint64_t>(i));
          if (nbi) {
            ctx.put_nbi(dst.all(), 1, src.all());
          } else {
            ctx.put(dst.all(), 1, src.all());
          }
          ctx.notify(sig.at(0), 1, 1);
          ctx.wait(sig.at(1), round, WaitCmp::GE);
          ctx.quiet();  // src of a put_nbi is ours again
        } else {
          ctx.wait(sig.at(0), round, WaitCmp::GE);
          const auto* d = dst.data_as<uint64_t>();
          for (int64_t i = 0; i < kWords; ++i) {
            MP_CHECK(d[i] == pattern(0, round, static_cast<uint64_t>(i)), "round " << round << " word " << i);
          }
          ctx.notify(sig.at(1), 0, 1);
        }
      }
      ctx.barrier();
    }, o);
  }
  }
}

// Every rank put_nbi's to every other rank (eager-sized and rendezvous-sized blocks alternating) and
// notifies with a Set of the round number; each target checks each sender's block as soon as that
// sender's signal shows the round. No flush anywhere between the puts and the notifies.
TEST(UcxAmRanks, ManyRanksManyPutThenNotify) {
  run(6, tcp("am"), [](Context& ctx) {
    constexpr int kRounds = 24;
    constexpr int64_t kMaxWords = (256 << 10) / 8;
    const int r = ctx.rank(), n = ctx.size();
    auto src = ctx.alloc_window("src", DType::U64, {1, kMaxWords});
    auto dst = ctx.alloc_window("dst", DType::U64, {n, kMaxWords});  // row s: from sender s
    auto sig = ctx.alloc_signals("sig", n);                          // word s: sender s's round
    for (int round = 1; round <= kRounds; ++round) {
      const int64_t words = round % 2 ? 32 : kMaxWords;
      auto* s = src.data_as<uint64_t>();
      for (int64_t i = 0; i < words; ++i) s[i] = pattern(r, round, static_cast<uint64_t>(i));
      for (int k = 1; k < n; ++k) {
        const int to = (r + k) % n;
        ctx.put_nbi(dst.slice({r, 0}, {1, words}), to, src.slice({0, 0}, {1, words}));
        ctx.notify(sig.at(r), to, round, NotifyOp::Set);
      }
      for (int k = 1; k < n; ++k) {
        const int from = (r + n - k) % n;
        ctx.wait(sig.at(from), round, WaitCmp::GE);
        const auto* d = dst.data_as<uint64_t>() + from * kMaxWords;
        for (int64_t i = 0; i < words; ++i) {
          MP_CHECK(d[i] == pattern(from, round, static_cast<uint64_t>(i)),
                   "rank " << r << " round " << round << " from " << from << " word " << i);
        }
      }
      ctx.quiet();    // src of the put_nbi calls is ours again
      ctx.barrier();  // nobody overwrites a block before its target has checked it
    }
  });
}

// ---- batching: small puts are staged per peer and leave with the next notify/get/flush ----

// Many small blocking puts (each staged: one message with the notify after them), overlapping
// so that a later put must win, then one notify: when the signal is seen, every byte is there.
TEST(UcxAmRanks, ManySmallPutsThenOneNotify) {
  run(2, tcp("am"), [](Context& ctx) {
    constexpr int kRounds = 8;
    constexpr int kPuts = 300;
    constexpr int64_t kWords = 4096;
    const int r = ctx.rank();
    auto src = ctx.alloc_window("src", DType::U64, {1, kWords});
    auto dst = ctx.alloc_window("dst", DType::U64, {1, kWords});
    auto sig = ctx.alloc_signals("sig", 2);  // 0: data ready, 1: consumed
    std::vector<uint64_t> expect(kWords);
    for (int round = 1; round <= kRounds; ++round) {
      // The same sequence on both ranks: the sender puts it, the target rebuilds what it must see.
      std::fill(expect.begin(), expect.end(), 0);
      for (int i = 0; i < kPuts; ++i) {
        const int64_t at = (int64_t(i) * 37 + round) % (kWords - 64);
        const int64_t n = 1 + (i * 7 + round) % 64;  // 8 B .. 512 B
        for (int64_t k = 0; k < n; ++k) expect[size_t(at + k)] = pattern(round, i, uint64_t(k));
      }
      if (r == 0) {
        auto* s = src.data_as<uint64_t>();
        for (int i = 0; i < kPuts; ++i) {
          const int64_t at = (int64_t(i) * 37 + round) % (kWords - 64);
          const int64_t n = 1 + (i * 7 + round) % 64;
          for (int64_t k = 0; k < n; ++k) s[k] = pattern(round, i, uint64_t(k));
          ctx.put(dst.slice({0, at}, {1, n}), 1, src.slice({0, 0}, {1, n}));  // src reused right after
        }
        ctx.notify(sig.at(0), 1, 1);
        ctx.wait(sig.at(1), round, WaitCmp::GE);
      } else {
        ctx.wait(sig.at(0), round, WaitCmp::GE);
        const auto* d = dst.data_as<uint64_t>();
        for (int64_t i = 0; i < kWords; ++i) {
          MP_CHECK(d[i] == expect[size_t(i)], "round " << round << " word " << i);
        }
        std::fill(dst.data_as<uint64_t>(), dst.data_as<uint64_t>() + kWords, 0);
        ctx.notify(sig.at(1), 0, 1);
      }
    }
    ctx.barrier();
  });
}

// quiet() and fence(peer) alone carry staged puts (no notify to the target): rank 0 puts to
// rank 1, quiets (or fences), then tells rank 2, which tells rank 1; rank 1 must see the data.
TEST(UcxAmRanks, StagedPutsLeaveAtQuietAndFence) {
  for (bool use_fence : {false, true}) {
    SCOPED_TRACE(use_fence ? "fence" : "quiet");
    run(3, tcp("am"), [use_fence](Context& ctx) {
      constexpr int64_t kWords = 512;
      const int r = ctx.rank();
      auto src = ctx.alloc_window("src", DType::U64, {1, kWords});
      auto dst = ctx.alloc_window("dst", DType::U64, {1, kWords});
      auto sig = ctx.alloc_signals("sig", 1);
      for (int round = 1; round <= 4; ++round) {
        if (r == 0) {
          auto* s = src.data_as<uint64_t>();
          for (int64_t i = 0; i < kWords; ++i) s[i] = pattern(0, round, uint64_t(i));
          for (int64_t i = 0; i < kWords; i += 16) ctx.put(dst.slice({0, i}, {1, 16}), 1, src.slice({0, i}, {1, 16}));
          if (use_fence) {
            ctx.fence(1);
          } else {
            ctx.quiet();
          }
          ctx.notify(sig.at(0), 2, 1);
        } else if (r == 2) {
          ctx.wait(sig.at(0), round, WaitCmp::GE);
          ctx.notify(sig.at(0), 1, 1);
        } else {
          ctx.wait(sig.at(0), round, WaitCmp::GE);
          const auto* d = dst.data_as<uint64_t>();
          for (int64_t i = 0; i < kWords; ++i) MP_CHECK(d[i] == pattern(0, round, uint64_t(i)), "round " << round << " word " << i);
        }
        ctx.barrier();
      }
    });
  }
}

// A get of bytes this rank just put to the same peer returns the put's data (the staged put
// leaves with the get's request, ahead of it); also for put_nbi/get_nbi.
TEST(UcxAmRanks, GetAfterPutToTheSamePeerSeesThePut) {
  run(2, tcp("am"), [](Context& ctx) {
    constexpr int64_t kWords = 1024;
    const int r = ctx.rank();
    auto src = ctx.alloc_window("src", DType::U64, {1, kWords});
    auto dst = ctx.alloc_window("dst", DType::U64, {1, kWords});
    auto back = ctx.alloc_window("back", DType::U64, {1, kWords});
    auto sig = ctx.alloc_signals("sig", 1);
    if (r == 0) {
      for (int round = 1; round <= 20; ++round) {
        const int64_t n = 1 + round * 13 % 128;
        const int64_t at = round * 29 % (kWords - n);
        auto* s = src.data_as<uint64_t>();
        for (int64_t i = 0; i < n; ++i) s[i] = pattern(0, round, uint64_t(i));
        if (round % 2) {
          ctx.put(dst.slice({0, at}, {1, n}), 1, src.slice({0, 0}, {1, n}));
          ctx.get(back.slice({0, 0}, {1, n}), 1, dst.slice({0, at}, {1, n}));
        } else {
          ctx.put_nbi(dst.slice({0, at}, {1, n}), 1, src.slice({0, 0}, {1, n}));
          ctx.get_nbi(back.slice({0, 0}, {1, n}), 1, dst.slice({0, at}, {1, n}));
          ctx.quiet();
        }
        const auto* b = back.data_as<uint64_t>();
        for (int64_t i = 0; i < n; ++i) MP_CHECK(b[i] == pattern(0, round, uint64_t(i)), "round " << round << " word " << i);
      }
      ctx.notify(sig.at(0), 1, 1);
    } else {
      ctx.wait(sig.at(0), 1, WaitCmp::GE);  // progresses, so the gets are answered
    }
    ctx.barrier();
  });
}

}  // namespace
