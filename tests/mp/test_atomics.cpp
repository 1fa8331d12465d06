// Fetching atomics (issue 25, item 4): fetch_add, compare_swap, swap and atomic_fetch on int32,
// int64, uint32 and uint64 window elements and signal words, blocking and non-blocking (_nbi, the
// old value written to local memory by quiet), over every transport, exact under contention (a
// ticket dispenser and a compare-and-swap spin lock from every rank at once).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

#include "rank_harness.h"

using namespace rwin;
using rwin_test::expect_error;
using rwin_test::TransportParam;

namespace {

using Atomics = rwin_test::TransportSuite;

// Every rank takes kTickets tickets from rank 0's int64 counter with fetch_add at once, and writes
// its rank + 1 into rank 0's slot of each ticket it got. A ticket handed out twice leaves another
// slot empty (the tickets are 0 .. n * kTickets - 1): every slot filled means each ticket once.
TEST_P(Atomics, TicketDispenserHandsOutEveryTicketOnce) {
  constexpr int kTickets = 60;
  run(4, [](Context& ctx) {
    const int n = ctx.size();
    Window counter = ctx.alloc_window("counter", DType::I64, {1, 1});
    Window owner = ctx.alloc_window("owner", DType::I64, {1, int64_t{n} * kTickets});
    Window one = ctx.alloc_window("one", DType::I64, {1, 1});
    one.data_as<int64_t>()[0] = ctx.rank() + 1;
    ctx.barrier();
    for (int i = 0; i < kTickets; ++i) {
      const int64_t t = ctx.fetch_add(counter.all(), 0, 1);
      MP_CHECK(t >= 0 && t < int64_t{n} * kTickets, "ticket " << t << " out of range");
      ctx.put(owner.slice({0, t}, {1, 1}), 0, one.all());
    }
    ctx.quiet();
    ctx.barrier();
    if (ctx.rank() == 0) {
      MP_CHECK(counter.data_as<int64_t>()[0] == int64_t{n} * kTickets, "counter " << counter.data_as<int64_t>()[0]);
      std::vector<int> per_rank(static_cast<size_t>(n));
      for (int64_t t = 0; t < int64_t{n} * kTickets; ++t) {
        const int64_t o = owner.data_as<int64_t>()[t];
        MP_CHECK(o >= 1 && o <= n, "ticket " << t << " was never handed out (slot holds " << o << ")");
        ++per_rank[static_cast<size_t>(o - 1)];
      }
      for (int r = 0; r < n; ++r) MP_CHECK(per_rank[r] == kTickets, "rank " << r << " got " << per_rank[r]);
    }
    ctx.barrier();
  });
}

// A spin lock in the upper uint32 of rank 0's word (compare_swap 0 -> rank + 1, released with
// swap), guarding a read-modify-write of a plain int64 counter by get and put: the count is exact
// only if no two ranks were ever inside at once. The lower uint32 of the same word takes a
// fetch_add from every rank meanwhile: neither half loses an update of the other's.
TEST_P(Atomics, CompareSwapSpinLockExcludesAndItsNeighbourLaneLosesNothing) {
  constexpr int kRounds = 15;
  run(4, [](Context& ctx) {
    const int n = ctx.size(), me = ctx.rank();
    Window lock = ctx.alloc_window("lock", DType::U32, {1, 2});  // [0]: counter lane, [1]: the lock
    Window count = ctx.alloc_window("count", DType::I64, {1, 1});
    Window tmp = ctx.alloc_window("tmp", DType::I64, {1, 1});
    ctx.barrier();
    for (int i = 0; i < kRounds; ++i) {
      while (ctx.compare_swap(lock.slice({0, 1}, {1, 1}), 0, 0, me + 1) != 0) {
      }
      ctx.get(tmp.all(), 0, count.all());
      tmp.data_as<int64_t>()[0] += 1;
      ctx.put(count.all(), 0, tmp.all());
      ctx.quiet();  // the count is at rank 0 before the lock is released
      const int64_t held = ctx.swap(lock.slice({0, 1}, {1, 1}), 0, 0);
      MP_CHECK(held == me + 1, "round " << i << ": the lock held " << held << " while rank " << me << " owned it");
      ctx.fetch_add(lock.slice({0, 0}, {1, 1}), 0, 1);
    }
    ctx.barrier();
    if (me == 0) {
      MP_CHECK(count.data_as<int64_t>()[0] == int64_t{n} * kRounds, "count " << count.data_as<int64_t>()[0]
                                                                             << ": two ranks were inside at once");
      MP_CHECK(lock.data_as<uint32_t>()[0] == static_cast<uint32_t>(n * kRounds), "lane " << lock.data_as<uint32_t>()[0]);
      MP_CHECK(lock.data_as<uint32_t>()[1] == 0, "lock left held by " << lock.data_as<uint32_t>()[1]);
    }
    ctx.barrier();
  });
}

// Every operation on every type returns the old value as the type holds it, and leaves what it
// should, on the right neighbour's element (and on itself through the same path).
TEST_P(Atomics, EveryOpReturnsTheOldValueOnEveryType) {
  run(3, [](Context& ctx) {
    const int me = ctx.rank(), right = (me + 1) % ctx.size();
    for (DType t : {DType::I32, DType::I64, DType::U32, DType::U64}) {
      const bool wide = dtype_size(t) == 8, is_signed = t == DType::I32 || t == DType::I64;
      Window w = ctx.alloc_window(std::string("a_") + dtype_name(t), t, {1, 3});
      ctx.barrier();
      for (int peer : {right, me}) {
        const Slice e = w.slice({0, peer == me ? 2 : 1}, {1, 1});
        // A value at the type's edge: the most negative signed value, the largest unsigned one.
        const int64_t edge = is_signed ? (wide ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int32_t>::min())
                                       : (wide ? int64_t{-1} : int64_t{std::numeric_limits<uint32_t>::max()});
        MP_CHECK(ctx.swap(e, peer, edge) == 0, dtype_name(t) << ": swap on a fresh element");
        MP_CHECK(ctx.atomic_fetch(e, peer) == edge, dtype_name(t) << ": atomic_fetch after swap");
        // fetch_add wraps like the type: edge + (-1) for signed goes to the maximum, unsigned max + 1 to 0.
        const int64_t add = is_signed ? -1 : 1;
        MP_CHECK(ctx.fetch_add(e, peer, add) == edge, dtype_name(t) << ": fetch_add returns the old value");
        const int64_t wrapped = is_signed ? (wide ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int32_t>::max()) : 0;
        MP_CHECK(ctx.atomic_fetch(e, peer) == wrapped, dtype_name(t) << ": after the wrap " << ctx.atomic_fetch(e, peer));
        MP_CHECK(ctx.compare_swap(e, peer, 12345, 7) == wrapped, dtype_name(t) << ": a failed compare returns the value");
        MP_CHECK(ctx.atomic_fetch(e, peer) == wrapped, dtype_name(t) << ": a failed compare changed the element");
        MP_CHECK(ctx.compare_swap(e, peer, wrapped, 42) == wrapped, dtype_name(t) << ": a matching compare");
        MP_CHECK(ctx.fetch_add(e, peer, 8) == 42, dtype_name(t) << ": fetch_add after compare_swap");
      }
      ctx.barrier();
      // What landed here: element 1 from the left neighbour, element 2 from myself; 0 untouched.
      auto read = [&](int64_t i) -> int64_t {
        switch (t) {
          case DType::I32: return w.data_as<int32_t>()[i];
          case DType::U32: return w.data_as<uint32_t>()[i];
          case DType::I64: return w.data_as<int64_t>()[i];
          default: return static_cast<int64_t>(w.data_as<uint64_t>()[i]);
        }
      };
      for (int64_t i : {1, 2}) MP_CHECK(read(i) == 50, dtype_name(t) << " element " << i << " holds " << read(i) << ", expected 50");
      MP_CHECK(read(0) == 0, dtype_name(t) << ": element 0 touched");
      ctx.barrier();
    }
    // Signal words take the same operations.
    auto sig = ctx.alloc_signals("sig", 2);
    ctx.barrier();
    MP_CHECK(ctx.fetch_add(sig.at(1), right, 5) == 0, "signal fetch_add");
    MP_CHECK(ctx.compare_swap(sig.at(1), right, 5, 9) == 5, "signal compare_swap");
    ctx.barrier();
    MP_CHECK(sig.load(1) == 9 && sig.load(0) == 0, "signal words " << sig.load(0) << ", " << sig.load(1));
    ctx.barrier();
  });
}

// Wrong targets and values: a clear error naming the operation, the peer and the element; nothing
// changes.
TEST_P(Atomics, BadTargetsAndValuesAreRefused) {
  run(2, [](Context& ctx) {
    const int right = (ctx.rank() + 1) % ctx.size();
    Window f = ctx.alloc_window("f", DType::F32, {1, 2});
    Window i32 = ctx.alloc_window("i32", DType::I32, {1, 2});
    Window u32 = ctx.alloc_window("u32", DType::U32, {1, 2});
    ctx.barrier();
    expect_error([&] { ctx.fetch_add(f.slice({0, 0}, {1, 1}), right, 1); }, ErrorCode::DtypeMismatch,
                 {"fetch_add peer", "not int32, int64, uint32 or uint64"});
    expect_error([&] { ctx.swap(i32.all(), right, 1); }, ErrorCode::InvalidArgument,
                 {"swap peer", "2 elements", "exactly one"});
    expect_error([&] { ctx.swap(i32.slice({0, 0}, {1, 1}), right, int64_t{1} << 31); }, ErrorCode::InvalidArgument,
                 {"swap peer", "2147483648 does not fit the i32 element"});
    expect_error([&] { ctx.compare_swap(u32.slice({0, 0}, {1, 1}), right, -1, 1); }, ErrorCode::InvalidArgument,
                 {"compare_swap peer", "expected value -1 does not fit the u32 element"});
    expect_error([&] { ctx.fetch_add(i32.slice({0, 2}, {1, 1}), right, 1); }, ErrorCode::OutOfBounds, {"fetch_add"});
    expect_error([&] { ctx.atomic_fetch(i32.slice({0, 0}, {1, 1}), ctx.size()); }, ErrorCode::PeerOutOfRange,
                 {"atomic_fetch"});
    ctx.barrier();
    MP_CHECK(i32.data_as<int32_t>()[0] == 0 && i32.data_as<int32_t>()[1] == 0 && u32.data_as<uint32_t>()[0] == 0,
             "a refused atomic changed memory");
    ctx.barrier();
  });
}

// Every rank takes kTickets tickets from one counter at rank 0 with fetch_add_nbi into distinct
// local slots, all in flight at once (every third one blocking, to mix the two completion paths),
// then quiet. Over all ranks the tickets must be exactly {0 .. n * kTickets - 1}: each rank puts its
// rank + 1 into rank 0's slot of every ticket it holds, and rank 0 finds every slot filled. The
// same on an int64 counter, and on both int32 lanes of one word at once (the CAS loop driven from
// progress, each lane's tickets exact and neither lane losing the other's updates).
TEST_P(Atomics, NbiTicketDispenserHandsOutEveryTicketOnce) {
  constexpr int kTickets = 150;
  run(4, [](Context& ctx) {
    const int n = ctx.size(), me = ctx.rank();
    const int64_t total = int64_t{n} * kTickets;
    Window c64 = ctx.alloc_window("c64", DType::I64, {1, 1});
    Window c32 = ctx.alloc_window("c32", DType::I32, {1, 2});  // two counters in one 8-byte word
    Window owner = ctx.alloc_window("owner", DType::I64, {3, total});
    Window one = ctx.alloc_window("one", DType::I64, {1, 1});
    one.data_as<int64_t>()[0] = me + 1;
    ctx.barrier();
    std::vector<int64_t> got(static_cast<size_t>(3 * kTickets), -1);  // row r: counter r's tickets
    for (int i = 0; i < kTickets; ++i) {
      int64_t* t = &got[static_cast<size_t>(i)];
      if (i % 3 == 2) {
        *t = ctx.fetch_add(c64.all(), 0, 1);
      } else {
        ctx.fetch_add_nbi(t, c64.all(), 0, 1);
      }
      ctx.fetch_add_nbi(&got[static_cast<size_t>(kTickets + i)], c32.slice({0, 0}, {1, 1}), 0, 1);
      ctx.fetch_add_nbi(&got[static_cast<size_t>(2 * kTickets + i)], c32.slice({0, 1}, {1, 1}), 0, 1);
    }
    ctx.quiet();
    for (int r = 0; r < 3; ++r) {
      for (int i = 0; i < kTickets; ++i) {
        const int64_t t = got[static_cast<size_t>(r * kTickets + i)];
        MP_CHECK(t >= 0 && t < total, "counter " << r << " ticket " << i << " is " << t << " after quiet");
        ctx.put(owner.slice({r, t}, {1, 1}), 0, one.all());
      }
    }
    ctx.barrier();
    if (me == 0) {
      MP_CHECK(c64.data_as<int64_t>()[0] == total, "int64 counter " << c64.data_as<int64_t>()[0]);
      MP_CHECK(c32.data_as<int32_t>()[0] == total && c32.data_as<int32_t>()[1] == total,
               "int32 counters " << c32.data_as<int32_t>()[0] << ", " << c32.data_as<int32_t>()[1]);
      for (int r = 0; r < 3; ++r) {
        std::vector<int> per_rank(static_cast<size_t>(n));
        for (int64_t t = 0; t < total; ++t) {
          const int64_t o = owner.data_as<int64_t>()[r * total + t];
          MP_CHECK(o >= 1 && o <= n, "counter " << r << ": ticket " << t << " was never handed out (slot holds " << o << ")");
          ++per_rank[static_cast<size_t>(o - 1)];
        }
        for (int q = 0; q < n; ++q) MP_CHECK(per_rank[q] == kTickets, "counter " << r << ": rank " << q << " got " << per_rank[q]);
      }
    }
    ctx.barrier();
  });
}

// Every rank has every op in flight to every peer (itself included) at once, on elements whose
// old values differ per (owner, issuer): each fetch location must get its own op's old value,
// and each element its new value. Types: int64 (native), int32 lanes of one word (CAS loops),
// uint32 (zero-extended), signal words. fence(peer) also completes them (checked first, on one peer).
TEST_P(Atomics, NbiToSeveralPeersInFlightEachReturnItsOwnOldValue) {
  run(3, [](Context& ctx) {
    const int n = ctx.size(), me = ctx.rank(), right = (me + 1) % n;
    Window w64 = ctx.alloc_window("w64", DType::I64, {1, n});
    Window w32 = ctx.alloc_window("w32", DType::I32, {1, 2 * n});  // per issuer: [swap lane, cas lane]
    Window u32 = ctx.alloc_window("u32", DType::U32, {1, n});
    SignalArray sig = ctx.alloc_signals("sig", n);
    // Element j is issuer j's, with values that name both owner and issuer.
    for (int j = 0; j < n; ++j) {
      w64.data_as<int64_t>()[j] = (int64_t{1} << 40) + 1000 * me + j;
      w32.data_as<int32_t>()[2 * j] = -(1000 * me + j);  // negative: sign extension
      w32.data_as<int32_t>()[2 * j + 1] = 7 * me + j;
      u32.data_as<uint32_t>()[j] = 0xfffffff0u - static_cast<uint32_t>(10 * me + j);  // > INT32_MAX: zero extension
      sig.store(j, 5000 + 10 * me + j);
    }
    ctx.barrier();
    // fence(peer) completes what was issued to that peer.
    int64_t early = -1;
    ctx.atomic_fetch_nbi(&early, u32.slice({0, me}, {1, 1}), right);
    ctx.fence(right);
    MP_CHECK(early == int64_t{0xfffffff0u} - (10 * right + me), "atomic_fetch_nbi after fence holds " << early);
    std::vector<int64_t> a(n, -1), b(n, -1), c(n, -1), d(n, -1), e(n, -1), f(n, -1);
    for (int p = 0; p < n; ++p) {
      ctx.fetch_add_nbi(&a[p], w64.slice({0, me}, {1, 1}), p, 3);
      ctx.swap_nbi(&b[p], w32.slice({0, 2 * me}, {1, 1}), p, 123 + p);
      ctx.compare_swap_nbi(&c[p], w32.slice({0, 2 * me + 1}, {1, 1}), p, 7 * p + me, -99);
      ctx.compare_swap_nbi(&d[p], u32.slice({0, me}, {1, 1}), p, 1, 2);  // does not match: unchanged
      ctx.fetch_add_nbi(&e[p], sig.at(me), p, 2);
      ctx.swap_nbi(&f[p], sig.at(me), p, 77);  // after the add only once quiet orders them: either order
    }
    ctx.quiet();
    for (int p = 0; p < n; ++p) {
      MP_CHECK(a[p] == (int64_t{1} << 40) + 1000 * p + me, "fetch_add_nbi to " << p << " returned " << a[p]);
      MP_CHECK(b[p] == -(1000 * p + me), "swap_nbi (int32) to " << p << " returned " << b[p]);
      MP_CHECK(c[p] == 7 * p + me, "compare_swap_nbi (int32) to " << p << " returned " << c[p]);
      MP_CHECK(d[p] == int64_t{0xfffffff0u} - (10 * p + me), "compare_swap_nbi (uint32) to " << p << " returned " << d[p]);
      const int64_t s0 = 5000 + 10 * p + me;
      // Two ops on one word, unordered: either the add saw s0 and the swap s0 + 2, or the swap saw
      // s0 and the add 77.
      const bool add_first = e[p] == s0 && f[p] == s0 + 2, swap_first = f[p] == s0 && e[p] == 77;
      MP_CHECK(add_first || swap_first, "signal ops to " << p << " returned " << e[p] << " and " << f[p]);
    }
    ctx.barrier();
    for (int j = 0; j < n; ++j) {
      MP_CHECK(w64.data_as<int64_t>()[j] == (int64_t{1} << 40) + 1000 * me + j + 3, "w64[" << j << "]");
      MP_CHECK(w32.data_as<int32_t>()[2 * j] == 123 + me, "w32[" << 2 * j << "] " << w32.data_as<int32_t>()[2 * j]);
      MP_CHECK(w32.data_as<int32_t>()[2 * j + 1] == -99, "w32[" << 2 * j + 1 << "] " << w32.data_as<int32_t>()[2 * j + 1]);
      MP_CHECK(u32.data_as<uint32_t>()[j] == 0xfffffff0u - static_cast<uint32_t>(10 * me + j), "u32[" << j << "]");
      const int64_t s = sig.load(j);
      MP_CHECK(s == 77 || s == 79, "sig[" << j << "] " << s);
    }
    ctx.barrier();
  });
}

// Refused non-blocking calls throw before anything is posted, naming the op, the peer and the
// element, and leave both the fetch location and the target as they were.
TEST_P(Atomics, NbiBadInputsAreRefusedBeforeAnythingIsPosted) {
  run(2, [](Context& ctx) {
    const int right = (ctx.rank() + 1) % ctx.size();
    Window f = ctx.alloc_window("f", DType::F32, {1, 2});
    Window i32 = ctx.alloc_window("i32", DType::I32, {1, 2});
    Window gone = ctx.alloc_window("gone", DType::I64, {1, 1});
    SignalArray sig = ctx.alloc_signals("sig", 2);
    const Slice gone_all = gone.all();  // a view made before the free: the op finds it freed
    ctx.free(gone);
    ctx.barrier();
    int64_t out = -5;
    expect_error([&] { ctx.fetch_add_nbi(nullptr, i32.slice({0, 1}, {1, 1}), right, 1); }, ErrorCode::InvalidArgument,
                 {"rank ", "fetch_add_nbi peer", "null fetch pointer", "element [0, 1]", "'i32' i32"});
    expect_error([&] { ctx.swap_nbi(&out, f.slice({0, 1}, {1, 1}), right, 1); }, ErrorCode::DtypeMismatch,
                 {"swap_nbi peer", "element [0, 1] of window 'f' f32", "not int32, int64, uint32 or uint64"});
    expect_error([&] { ctx.compare_swap_nbi(&out, i32.slice({0, 2}, {1, 1}), right, 0, 1); }, ErrorCode::OutOfBounds,
                 {"compare_swap_nbi peer", "offsets [0, 2]"});
    expect_error([&] { ctx.fetch_add_nbi(&out, i32.slice({0, 0}, {1, 1}), right, int64_t{1} << 33); },
                 ErrorCode::InvalidArgument, {"fetch_add_nbi peer", "does not fit the i32 element [0, 0]"});
    expect_error([&] { ctx.atomic_fetch_nbi(&out, gone_all, right); }, ErrorCode::UseAfterFree,
                 {"atomic_fetch_nbi peer", "element [0, 0] of window 'gone' i64", "freed"});
    expect_error([&] { ctx.atomic_fetch_nbi(&out, i32.slice({0, 0}, {1, 1}), ctx.size()); }, ErrorCode::PeerOutOfRange,
                 {"atomic_fetch_nbi"});
    expect_error([&] { ctx.swap_nbi(&out, sig.slice(0, 2), right, 1); }, ErrorCode::InvalidArgument,
                 {"swap_nbi peer", "exactly one"});
    expect_error([&] { ctx.atomic_fetch_nbi(nullptr, sig.at(0), right); }, ErrorCode::InvalidArgument,
                 {"atomic_fetch_nbi peer", "null fetch pointer"});
    ctx.quiet();
    MP_CHECK(out == -5, "a refused call wrote its fetch location: " << out);
    ctx.barrier();
    MP_CHECK(i32.data_as<int32_t>()[0] == 0 && i32.data_as<int32_t>()[1] == 0 && sig.load(0) == 0 && sig.load(1) == 0,
             "a refused atomic changed memory");
    ctx.barrier();
  });
}

// A quiet that gives up (its deadline) leaves every nbi atomic it did not complete detached: when
// their replies arrive later, no fetch location is written. Deterministic where the atomic needs the
// target's progress (tcp: am mode, UCX's emulated atomics): rank 1 blocks outside rwin until rank 0's
// quiet has timed out, then progresses; rank 0 posts its atomics only once rank 1 says it is out of
// rwin (the barrier alone let rank 1's last progress in it serve the first of them under ASan: fetch 0
// came back before the quiet, CI 2026-12-07 23:32). Elsewhere (shared memory, verbs) the op
// completes without the target, so the suite is instantiated over the tcp transports only (below).
using AtomicsNeedingTargetProgress = rwin_test::TransportSuite;
TEST_P(AtomicsNeedingTargetProgress, NbiAfterAFailedQuietNeverWriteTheirFetchLocations) {
  const rwin_test::Pipe go, out;  // rank 0 -> 1: its quiet timed out; rank 1 -> 0: it is out of rwin
  constexpr int kOps = 40;
  Options o;
  o.op_timeout = std::chrono::milliseconds(1500);
  run(2, [&](Context& ctx) {
    Window c64 = ctx.alloc_window("c64", DType::I64, {1, 1});
    Window c32 = ctx.alloc_window("c32", DType::I32, {1, 2});
    ctx.barrier();
    if (ctx.rank() == 1) {
      out.put_byte();  // no rwin call from here until go
      MP_CHECK(go.await_byte(), "rank 0 never said its quiet timed out");  // bounded
      ctx.barrier();  // progresses: the atomics land and their replies go back
      ctx.barrier();
      MP_CHECK(c64.data_as<int64_t>()[0] >= 0 && c64.data_as<int64_t>()[0] <= kOps + 1, "counter " << c64.data_as<int64_t>()[0]);
      ctx.barrier();
      return;
    }
    MP_CHECK(out.await_byte(), "rank 1 never said it left rwin");  // bounded
    std::vector<int64_t> got(2 * kOps, -7);
    for (int i = 0; i < kOps; ++i) {
      ctx.fetch_add_nbi(&got[static_cast<size_t>(i)], c64.all(), 1, 1);
      ctx.fetch_add_nbi(&got[static_cast<size_t>(kOps + i)], c32.slice({0, 0}, {1, 1}), 1, 1);  // a CAS chain
    }
    expect_error([&] { ctx.quiet(); }, ErrorCode::Timeout,
                 {"rank 0: quiet: peer 1 did not complete", "fetch_add_nbi peer 1 of the i"});
    go.put_byte();
    ctx.barrier();  // its quiet waits for every late completion
    for (int i = 0; i < 2 * kOps; ++i) MP_CHECK(got[static_cast<size_t>(i)] == -7, "fetch " << i << " written after the failed quiet: " << got[static_cast<size_t>(i)]);
    // The peer still works, nbi included.
    const int64_t now = ctx.atomic_fetch(c64.all(), 1);
    int64_t next = -7;
    ctx.fetch_add_nbi(&next, c64.all(), 1, 1);
    ctx.quiet();
    MP_CHECK(next == now, "fetch_add_nbi after recovery returned " << next << ", the counter held " << now);
    ctx.barrier();
    ctx.barrier();
  }, o);
}

INSTANTIATE_TEST_SUITE_P(Transports, Atomics, ::testing::ValuesIn(rwin_test::transports()),
                         [](const ::testing::TestParamInfo<TransportParam>& pinfo) { return pinfo.param.name; });

std::vector<TransportParam> tcp_transports() {
  std::vector<TransportParam> out;
  for (const auto& p : rwin_test::transports()) {
    // UCX over tcp only: rwin's own tcp transport serves atomics from its receiver thread.
    if (p.transport == "ucx" && p.name.find("tcp") != std::string::npos) out.push_back(p);
  }
  return out;
}
INSTANTIATE_TEST_SUITE_P(Transports, AtomicsNeedingTargetProgress, ::testing::ValuesIn(tcp_transports()),
                         [](const ::testing::TestParamInfo<TransportParam>& pinfo) { return pinfo.param.name; });

}  // namespace
