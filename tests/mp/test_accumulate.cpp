// put(..., AtomicType::Add) under concurrency (docs/CONTRACT.md, "Accumulate"): every rank adds
// into the same elements of every rank at once, through every path at the same time (its own
// memory, peers mapped here, the staging protocol), for every dtype and for sizes around the
// protocol's edges: one element, odd counts, exactly a stripe, across stripe boundaries, more than
// one staging slot and more than a source's whole staging area. Results against a reference
// computed here.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <span>
#include <vector>

#include "context_impl.h"
#include "ops.h"
#include "rank_harness.h"
#include "stripe_locks.h"

using namespace rwin;

namespace {

using Accumulate = rwin_test::TransportSuite;

// Small staging, so the sizes below need several slots and wrap each source's ring: 16 KiB slots
// (the minimum), 4 per source.
constexpr size_t kStaging = 64 << 10;
constexpr uint64_t kStripe = rwin::detail::kStripeBytes;

constexpr DType kTypes[] = {DType::I8, DType::U8, DType::I16, DType::U16, DType::I32, DType::U32,
                            DType::I64, DType::U64, DType::F32, DType::F64, DType::F16, DType::BF16};

bool is_float(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16; }

// Element i as added by rank r. Integers: large values, so every width wraps. Floats: 1..5, so
// every partial sum is a small integer, exact in each float type (bf16 up to 256).
uint64_t addend(DType t, int r, uint64_t i) {
  if (is_float(t)) return (static_cast<uint64_t>(r) + i) % 5 + 1;
  return (static_cast<uint64_t>(r) + 1) * 0x9E3779B97F4A7C15ull + i * 0x100000001b3ull;
}
uint64_t initial(DType t, uint64_t i) { return is_float(t) ? i % 3 : i * 0xbf58476d1ce4e5b9ull; }

// Stores integer value v as element of type t (integers truncate: two's complement wrap).
void store(DType t, void* p, uint64_t v) {
  switch (t) {
    case DType::F32: { const float f = static_cast<float>(v); std::memcpy(p, &f, 4); return; }
    case DType::F64: { const double d = static_cast<double>(v); std::memcpy(p, &d, 8); return; }
    case DType::F16: { const f16 h = to_f16(static_cast<float>(v)); std::memcpy(p, &h, 2); return; }
    case DType::BF16: { const bf16 h = to_bf16(static_cast<float>(v)); std::memcpy(p, &h, 2); return; }
    default: std::memcpy(p, &v, dtype_size(t)); return;  // little-endian: the low bytes
  }
}

struct Case {
  const char* name;
  uint64_t offset;  // view's byte offset in the buffer, a multiple of the element size
  int64_t count;    // elements
};

// Cases for elements of `esz` bytes in a buffer of kBufBytes.
constexpr uint64_t kBufBytes = 4 * kStripe + 4096;
std::vector<Case> cases(size_t esz) {
  const int64_t stripe_elems = static_cast<int64_t>(kStripe / esz);
  return {
      {"one element", 3 * esz, 1},
      {"odd count at an odd element offset", 5 * esz, 333},
      {"exactly a stripe", kStripe, stripe_elems},
      {"across a stripe boundary", kStripe - 7 * esz, 19},
      {"larger than a slot and a source's staging area, across stripes", esz, 3 * stripe_elems + 11},
  };
}

// Every rank adds into every rank's view (its own included), `rounds` times back to back, each
// rank starting at a different peer; afterwards each rank checks its view against the reference.
// `types`: the dtypes to run (every one by default).
void all_add_into_all(Context& ctx, int rounds, std::span<const DType> types = kTypes) {
  const int r = ctx.rank(), n = ctx.size();
  WindowBuffer dst = ctx.alloc_window_buffer("acc.dst", kBufBytes);
  WindowBuffer src = ctx.alloc_window_buffer("acc.src", kBufBytes);
  for (DType t : types) {
    const size_t esz = dtype_size(t);
    for (const Case& c : cases(esz)) {
      Window d = ctx.window(dst, t, {1, c.count}, c.offset);
      Window s = ctx.window(src, t, {1, c.count}, c.offset);
      auto* db = static_cast<unsigned char*>(dst.data());
      std::memset(db, 0x5a, kBufBytes);
      for (int64_t i = 0; i < c.count; ++i) {
        store(t, static_cast<char*>(d.data()) + i * esz, initial(t, static_cast<uint64_t>(i)));
        store(t, static_cast<char*>(s.data()) + i * esz, addend(t, r, static_cast<uint64_t>(i)));
      }
      ctx.barrier();
      for (int round = 0; round < rounds; ++round) {
        for (int k = 0; k < n; ++k) ctx.put(d.all(), (r + k) % n, s.all(), AtomicType::Add);
      }
      ctx.barrier();
      std::vector<unsigned char> want(esz);
      for (int64_t i = 0; i < c.count; ++i) {
        uint64_t sum = initial(t, static_cast<uint64_t>(i));
        for (int q = 0; q < n; ++q) sum += static_cast<uint64_t>(rounds) * addend(t, q, static_cast<uint64_t>(i));
        store(t, want.data(), sum);
        const unsigned char* got = static_cast<const unsigned char*>(d.data()) + i * esz;
        MP_CHECK(std::memcmp(got, want.data(), esz) == 0,
                 dtype_name(t) << " " << c.name << ": element " << i << " of " << c.count << " is not the sum");
      }
      for (uint64_t b = 0; b < kBufBytes; ++b) {
        const bool in = b >= c.offset && b < c.offset + static_cast<uint64_t>(c.count) * esz;
        if (!in) MP_CHECK(db[b] == 0x5a, dtype_name(t) << " " << c.name << ": byte " << b << " outside the view changed");
      }
      ctx.barrier();  // nobody adds into the next case's memory before everyone checked this one
    }
  }
}

// The CI tier adds once per case (the largest case alone wraps every source's 4-slot staging ring);
// --full twice back to back.
TEST_P(Accumulate, EveryRankAddsIntoEveryRankEveryDtypeAndSize) {
  Options o;
  o.accumulate_staging_bytes = kStaging;
  run(3, [](Context& ctx) { all_add_into_all(ctx, rwin_test::trials(2, 1)); }, o);
}

// Five ranks contending. The CI tier runs one dtype of each kind of arithmetic per width (integer
// adds are the same bits signed or not; the test above runs all twelve): the cases' data volume,
// five sources into five ranks, is most of this test's time over soft-RoCE.
constexpr DType kCiTypes[] = {DType::I8, DType::U16, DType::I32, DType::U64, DType::F32, DType::F64, DType::F16, DType::BF16};
TEST_P(Accumulate, FiveRanksAddIntoEveryRank) {
  Options o;
  o.accumulate_staging_bytes = kStaging;
  run(5, [](Context& ctx) {
    all_add_into_all(ctx, 1, rwin_test::ci_tier() ? std::span<const DType>(kCiTypes) : std::span<const DType>(kTypes));
  }, o);
}

// Two ranks with the default staging (one slot holds the largest case), and eight contending on
// every stripe.
TEST_P(Accumulate, TwoAndEightRanksWithTheirStaging) {
  run(2, [](Context& ctx) { all_add_into_all(ctx, 2); });
  Options o;
  o.accumulate_staging_bytes = kStaging;
  run(8, [](Context& ctx) {
    const int r = ctx.rank(), n = ctx.size();
    // Every rank adds 1..8 into the same 3 stripes + a bit of rank 0's f32 window, 3 rounds.
    const int64_t count = static_cast<int64_t>(3 * kStripe / 4) + 5;
    Window acc = ctx.alloc_window("acc", DType::F32, {1, count});
    Window mine = ctx.alloc_window("mine", DType::F32, {1, count});
    for (int64_t i = 0; i < count; ++i) mine.data_as<float>()[i] = static_cast<float>(r + 1);
    ctx.barrier();
    for (int round = 0; round < 3; ++round) ctx.put(acc.all(), 0, mine.all(), AtomicType::Add);
    ctx.barrier();
    if (r == 0) {
      const float want = 3.0f * static_cast<float>(n * (n + 1) / 2);
      for (int64_t i = 0; i < count; ++i) MP_CHECK(acc.data_as<float>()[i] == want, "acc[" << i << "]");
    }
    ctx.barrier();
  }, o);
}

// put(Add) returns once its sums are in the target's memory: a notify after it is ordered behind
// them, also when the sums take many staging slots.
TEST_P(Accumulate, NotifyAfterAManySlotPutAddSeesTheSums) {
  Options o;
  o.accumulate_staging_bytes = kStaging;
  run(3, [](Context& ctx) {
    const int r = ctx.rank(), n = ctx.size(), target = n - 1;
    const int64_t count = 50000;  // 400 KiB of i64: 25 slots, 6 rings of one source's staging
    Window acc = ctx.alloc_window("acc", DType::I64, {1, count});
    Window mine = ctx.alloc_window("mine", DType::I64, {1, count});
    SignalArray sig = ctx.alloc_signals("sig", 1);
    SignalArray ack = ctx.alloc_signals("ack", 1);
    for (int64_t i = 0; i < count; ++i) mine.data_as<int64_t>()[i] = (int64_t{r} + 1) << 20 | i;
    int64_t ranks = 0;
    for (int q = 0; q < n - 1; ++q) ranks += (int64_t{q} + 1) << 20;
    ctx.barrier();
    constexpr int kRounds = 4;
    if (r != target) {
      for (int k = 0; k < kRounds; ++k) {
        ctx.put(acc.all(), target, mine.all(), AtomicType::Add);
        ctx.notify(sig.at(0), target, 1);
        // Round by round: the target reads the sums while nothing else lands (a read beside adds
        // still landing, by another thread where the transport applies them, would race them).
        ctx.wait(ack.at(0), k + 1, WaitCmp::GE);
      }
    } else {
      for (int k = 1; k <= kRounds; ++k) {
        // Every source's notify of round k stands behind its whole put(Add): exactly k rounds summed.
        ctx.wait(sig.at(0), int64_t{k} * (n - 1), WaitCmp::GE);
        for (int64_t i = 0; i < count; i += 997) {
          const int64_t v = acc.data_as<int64_t>()[i];
          MP_CHECK(v == k * (ranks + (n - 1) * i), "after round " << k << "'s notifies acc[" << i << "] = " << v);
        }
        for (int q = 0; q < n - 1; ++q) ctx.notify(ack.at(0), q, 1);
      }
      for (int64_t i = 0; i < count; ++i) {
        MP_CHECK(acc.data_as<int64_t>()[i] == kRounds * (ranks + (n - 1) * i), "acc[" << i << "]");
      }
    }
    ctx.barrier();
  }, o);
}

// A slot whose header lies outside every buffer of the target is refused, never applied, and its
// source is marked failed with the reason. Rank 0 forges one below the public API (the core's own
// staging region and transport), as a corrupt or hostile peer could.
TEST_P(Accumulate, AGarbageSlotHeaderIsRefusedAndItsSourceMarkedFailed) {
  run(2, [](Context& ctx) {
    Window w = ctx.alloc_window("w", DType::F32, {1, 64});
    SignalArray sig = ctx.alloc_signals("sig", 1);
    ctx.barrier();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    if (ctx.rank() == 0) {
      detail::ContextImpl& ci = *w.all().window->buf->ctx;
      detail::StagingState& st = *ci.staging;
      char* out = static_cast<char*>(st.mr->addr()) + st.mine.outbox(0);
      detail::SlotHeader h;
      h.dtype = static_cast<uint8_t>(DType::F32);
      h.src = 0;
      h.seq = 0;
      h.addr = 0x1000;  // no buffer of rank 1 is there
      h.bytes = 4;
      std::memcpy(out, &h, sizeof h);
      transport::Work wr;
      wr.op = transport::Op::Write;
      wr.peer = 1;
      wr.local = out;
      wr.local_mr = st.mr.get();
      wr.rkey = st.rkeys[1].get();
      wr.remote_addr = st.rkeys[1]->base() + st.layouts[1].inbox(0, 0);
      wr.bytes = detail::kSlotHeaderBytes + 4;
      detail::run_single(ci, wr, "forged slot");
      if (!ci.peers[1].ordered) {
        transport::Work f;
        f.op = transport::Op::Flush;
        f.peer = 1;
        detail::run_single(ci, f, "forged slot flush");
      }
      transport::Work a;
      a.op = transport::Op::AtomicAdd;
      a.peer = 1;
      a.rkey = st.rkeys[1].get();
      a.remote_addr = st.rkeys[1]->base() + st.layouts[1].posted_word(0);
      a.bytes = 8;
      a.operand = 1;
      detail::run_single(ci, a, "forged slot posted");
      a.remote_addr = st.rkeys[1]->base() + st.layouts[1].group_bell_word(0);  // and its doorbell
      detail::run_single(ci, a, "forged slot doorbell");
      try {  // progress until rank 1 is gone (it leaves once it refused the slot)
        while (std::chrono::steady_clock::now() < until) ctx.test(sig.at(0), 1);
      } catch (const Error& e) {
        MP_CHECK(e.code() == ErrorCode::PeerFailed, "rank 0: " << e.what());
      }
    } else {
      for (;;) {
        MP_CHECK(std::chrono::steady_clock::now() < until, "rank 1 applied or ignored the forged slot");
        ctx.test(sig.at(0), 1);  // progress: the target checks staged slots here
        try {
          ctx.put(w.all(), 0, w.all());
        } catch (const Error& e) {
          MP_CHECK(e.code() == ErrorCode::PeerFailed, e.what());
          const std::string m = e.what();
          for (const char* part : {"refused put(Add) slot 0 from rank 0", "outside every window buffer"}) {
            MP_CHECK(m.find(part) != std::string::npos, "message lacks '" << part << "': " << m);
          }
          break;
        }
      }
      for (int i = 0; i < 64; ++i) MP_CHECK(w.data_as<float>()[i] == 0.0f, "w[" << i << "] changed");
    }
  });
}

// rwin's own tcp applies put(Add) in the target's receiver thread (Op::Accumulate, RegionAdder):
// the sums land while the target stays outside rwin, which the staged path cannot do (it waits
// for the target's progress and would run into the deadline here).
rwin_test::TransportParam own_tcp() {
  for (const auto& p : rwin_test::transports()) {
    if (p.name == std::string("tcp")) return p;
  }
  throw std::runtime_error("no tcp transport parameter");
}

using rwin_test::Pipe;

TEST(TargetAppliedAdds, LandWhileTheTargetIsOutsideRwin) {
  const Pipe done;
  const auto p = own_tcp();
  const auto res = rwin_test::run_ranks(2, p, [&](int rank, int n, const std::string& root) {
    Options o = rwin_test::rank_options(rank, n, root, p);
    o.op_timeout = std::chrono::milliseconds(10000);
    Context ctx(o);
    // 1.5 MiB of i64 and 7 more: several Accumulate frames (1 MiB at most), across stripes; then
    // 3 elements at an odd offset (one small frame, sent with its flush).
    const int64_t count = static_cast<int64_t>(24 * kStripe / 8) + 7;
    Window acc = ctx.alloc_window("acc", DType::I64, {1, count});
    Window mine = ctx.alloc_window("mine", DType::I64, {1, count});
    for (int64_t i = 0; i < count; ++i) {
      acc.data_as<int64_t>()[i] = i;
      mine.data_as<int64_t>()[i] = (int64_t{rank} + 1) << 40 | i;
    }
    ctx.barrier();
    if (rank == 0) {
      ctx.put(acc.all(), 1, mine.all(), AtomicType::Add);
      ctx.put(acc.slice({0, 5}, {1, 3}), 1, mine.slice({0, 9}, {1, 3}), AtomicType::Add);
      done.put_byte();
    } else {
      // Not one rwin call until rank 0's put(Add)s returned: only the receiver thread can add.
      MP_CHECK(done.await_byte(), "rank 0 did not finish its put(Add)s within 60 s");
      const int64_t* a = acc.data_as<int64_t>();
      for (int64_t i = 0; i < count; ++i) {
        int64_t want = i + ((int64_t{1} << 40) | i);
        if (i >= 5 && i < 8) want += (int64_t{1} << 40) | (i + 4);
        MP_CHECK(a[i] == want, "acc[" << i << "] = " << a[i] << ", want " << want);
      }
    }
    ctx.barrier();
  });
  ASSERT_TRUE(res.all_ok()) << res.report();
}

// A stripe lock that stays held (here: a lock word the target set itself) is not waited for past
// the target's deadline: the put(Add) is refused whole, its source fails naming the stripe, and
// not one element is added, also in the stripes that were free.
TEST(TargetAppliedAdds, AStripeLockedPastTheDeadlineRefusesTheWholeAdd) {
  const Pipe done, checked;
  const auto p = own_tcp();
  const auto res = rwin_test::run_ranks(2, p, [&](int rank, int n, const std::string& root) {
    Options o = rwin_test::rank_options(rank, n, root, p);
    o.op_timeout = std::chrono::milliseconds(rank == 1 ? 300 : 10000);  // rank 1's adder waits 300 ms
    Context ctx(o);
    const int64_t count = static_cast<int64_t>(3 * kStripe / 4);  // 3 stripes of f32
    Window acc = ctx.alloc_window("acc", DType::F32, {1, count});
    Window mine = ctx.alloc_window("mine", DType::F32, {1, count});
    for (int64_t i = 0; i < count; ++i) mine.data_as<float>()[i] = 1.0f;
    auto* locks = reinterpret_cast<uint64_t*>(static_cast<char*>(acc.data()) + detail::lock_offset(count * 4));
    if (rank == 1) detail::try_lock(locks + 1, 777);  // stripe 1, held by no rank
    ctx.barrier();
    if (rank == 0) {
      try {
        ctx.put(acc.all(), 1, mine.all(), AtomicType::Add);
        MP_CHECK(false, "put(Add) into a locked stripe returned");
      } catch (const Error& e) {
        MP_CHECK(e.code() == ErrorCode::PeerFailed, e.what());
        const std::string m = e.what();
        for (const char* part : {"rank 1 refused it", "stripe 1 of", "still locked (lock word 777)", "nothing added"}) {
          MP_CHECK(m.find(part) != std::string::npos, "message lacks '" << part << "': " << m);
        }
      }
      done.put_byte();
    } else {
      MP_CHECK(done.await_byte(), "rank 0 did not see its put(Add) refused within 60 s");
      for (int64_t i = 0; i < count; ++i) MP_CHECK(acc.data_as<float>()[i] == 0.0f, "acc[" << i << "] changed");
      detail::unlock(locks + 1);
      checked.put_byte();
    }
    // Rank 0 hosts the job's store: it leaves after rank 1 checked (each then ends with its peer failed).
    if (rank == 0) MP_CHECK(checked.await_byte(), "rank 1 did not check its window within 60 s");
  });
  ASSERT_TRUE(res.all_ok()) << res.report();
}

INSTANTIATE_TEST_SUITE_P(Transports, Accumulate, ::testing::ValuesIn(rwin_test::transports()),
                         [](const ::testing::TestParamInfo<rwin_test::TransportParam>& pinfo) { return pinfo.param.name; });

}  // namespace
