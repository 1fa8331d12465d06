// Fetching atomics (issue 25, item 4): fetch_add, compare_swap, swap and atomic_fetch on int32,
// int64, uint32 and uint64 window elements and signal words, over every transport, exact under
// contention (a ticket dispenser and a compare-and-swap spin lock from every rank at once).
#include <gtest/gtest.h>

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

INSTANTIATE_TEST_SUITE_P(Transports, Atomics, ::testing::ValuesIn(rwin_test::transports()),
                         [](const ::testing::TestParamInfo<TransportParam>& pinfo) { return pinfo.param.name; });

}  // namespace
