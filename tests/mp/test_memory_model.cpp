// The runtime's memory model (docs/CONTRACT.md "Buffers and views", "Signals"): window buffers
// with typed views at byte offsets, int32/int64 signal windows, empty slices; over every transport.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <vector>
#include <limits>

#include "rank_harness.h"

using namespace rwin;
using rwin_test::expect_error;
using rwin_test::rank_options;
using rwin_test::run_ranks;
using rwin_test::TransportParam;

namespace {

using MemoryModel = rwin_test::TransportSuite;

constexpr uint8_t kSentinel = 0xA5;

// Views at offsets inside one buffer: put, get and put(Add) through them land at exactly those
// bytes of the peer's buffer; the bytes around the views keep their sentinel; an overlapping view
// sees what another view wrote.
TEST_P(MemoryModel, ViewsAtOffsetsMoveExactlyTheirBytes) {
  run(3, [](Context& ctx) {
    const int r = ctx.rank(), n = ctx.size(), next = (r + 1) % n, prev = (r + n - 1) % n;
    constexpr size_t kBytes = 4096 + 12;
    WindowBuffer buf = ctx.alloc_window_buffer("pool", kBytes);
    MP_CHECK(buf.bytes() == kBytes && buf.name() == "pool", "buffer size/name");
    Window x = ctx.window(buf, DType::F32, {2, 64}, 0);       // bytes [0, 512)
    Window y = ctx.window(buf, DType::I32, {1, 31}, 516);     // bytes [516, 640): 4- not 8-aligned
    Window z = ctx.window(buf, DType::F64, {4, 8}, 1024);     // bytes [1024, 1280)
    Window xi = ctx.window(buf, DType::I32, {2, 64}, 0);      // aliases x
    Window tail = ctx.window(buf, DType::I32, {1, 3}, 4096);  // the last 12 bytes
    MP_CHECK(y.byte_offset() == 516 && y.bytes() == 124 && y.buffer().bytes() == kBytes, "view geometry");
    auto* raw = static_cast<uint8_t*>(buf.data());
    std::memset(raw, kSentinel, kBytes);
    // Local sources live in a second buffer with the same views.
    WindowBuffer sbuf = ctx.alloc_window_buffer("src", kBytes);
    Window sx = ctx.window(sbuf, DType::F32, {2, 64}, 0);
    Window sy = ctx.window(sbuf, DType::I32, {1, 31}, 516);
    Window sz = ctx.window(sbuf, DType::F64, {4, 8}, 1024);
    Window stail = ctx.window(sbuf, DType::I32, {1, 3}, 4096);
    for (int i = 0; i < 128; ++i) sx.data_as<float>()[i] = static_cast<float>(r * 1000 + i);
    for (int i = 0; i < 31; ++i) sy.data_as<int32_t>()[i] = r + 1;
    for (int i = 0; i < 32; ++i) sz.data_as<double>()[i] = r * 0.5 + i;
    for (int i = 0; i < 3; ++i) stail.data_as<int32_t>()[i] = -(r + 1) * (i + 1);
    // y starts at 0 everywhere, then every rank adds r + 1 into every rank's y.
    std::memset(static_cast<uint8_t*>(buf.data()) + 516, 0, 124);
    ctx.barrier();
    ctx.put(x.all(), next, sx.all());
    ctx.put(z.slice({1, 2}, {2, 4}), next, sz.slice({1, 2}, {2, 4}));  // strided rectangle
    ctx.put(tail.all(), next, stail.all());
    for (int p = 0; p < n; ++p) ctx.put(y.all(), p, sy.all(), AtomicType::Add);
    ctx.barrier();
    for (int i = 0; i < 128; ++i) {
      MP_CHECK(x.data_as<float>()[i] == static_cast<float>(prev * 1000 + i), "x[" << i << "]");
      float f = static_cast<float>(prev * 1000 + i);
      int32_t bits;
      std::memcpy(&bits, &f, 4);
      MP_CHECK(xi.data_as<int32_t>()[i] == bits, "aliasing view xi[" << i << "]");
    }
    const int32_t sum = n * (n + 1) / 2;
    for (int i = 0; i < 31; ++i) MP_CHECK(y.data_as<int32_t>()[i] == sum, "y[" << i << "] " << y.data_as<int32_t>()[i]);
    for (int i = 0; i < 3; ++i) MP_CHECK(tail.data_as<int32_t>()[i] == -(prev + 1) * (i + 1), "tail[" << i << "]");
    for (int row = 0; row < 4; ++row) {
      for (int col = 0; col < 8; ++col) {
        const bool in = row >= 1 && row < 3 && col >= 2 && col < 6;
        const double v = z.data_as<double>()[row * 8 + col];
        if (in) {
          MP_CHECK(v == prev * 0.5 + row * 8 + col, "z[" << row << "][" << col << "]");
        } else {
          uint8_t b[8];
          std::memcpy(b, &v, 8);
          for (uint8_t c : b) MP_CHECK(c == kSentinel, "z[" << row << "][" << col << "] outside the rectangle changed");
        }
      }
    }
    // Every byte outside the views keeps the sentinel.
    auto outside = [](size_t i) { return (i >= 512 && i < 516) || (i >= 640 && i < 1024) || (i >= 1280 && i < 4096); };
    for (size_t i = 0; i < kBytes; ++i) {
      if (outside(i)) MP_CHECK(raw[i] == kSentinel, "byte " << i << " outside every view changed");
    }
    // get through a view at an offset reads the peer's bytes there.
    Window back = ctx.window(sbuf, DType::I32, {1, 3}, 4096);
    ctx.get(back.all(), next, tail.all());
    for (int i = 0; i < 3; ++i) MP_CHECK(back.data_as<int32_t>()[i] == -(r + 1) * (i + 1), "get back[" << i << "]");
    ctx.barrier();
  });
}

TEST_P(MemoryModel, BadViewsAreRefusedAndFreeingTheBufferFreesEveryView) {
  run(2, [](Context& ctx) {
    const int r = ctx.rank();
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    WindowBuffer buf = ctx.alloc_window_buffer("b", 4096);
    expect_error([&] { ctx.window(buf, DType::F32, {1, 4}, 2); }, ErrorCode::Misaligned,
                 {"rank " + std::to_string(r), "at byte 2", "buffer 'b' (4096 bytes)", "element size 4"});
    expect_error([&] { ctx.window(buf, DType::F64, {1, 513}, 0); }, ErrorCode::OutOfBounds, {"f64[1, 513]", "past the end"});
    expect_error([&] { ctx.window(buf, DType::I32, {1, 1}, 4096); }, ErrorCode::OutOfBounds, {"at byte 4096"});
    expect_error([&] { ctx.window(buf, DType::I32, {kMax, 2}, 0); }, ErrorCode::OutOfBounds, {"past the end"});
    expect_error([&] { ctx.window(buf, DType::I64, {int64_t{1} << 61, 1}, 8); }, ErrorCode::OutOfBounds, {"past the end"});
    expect_error([&] { ctx.window(buf, DType::I32, {0, 4}, 0); }, ErrorCode::InvalidArgument, {"positive"});
    expect_error([&] { ctx.window(buf, static_cast<DType>(200), {1, 4}, 0); }, ErrorCode::InvalidArgument,
                 {"dtype code 200"});
    expect_error([&] { ctx.alloc_window("bad", static_cast<DType>(77), {1, 4}); }, ErrorCode::InvalidArgument,
                 {"dtype code 77"});
    expect_error([&] { ctx.window(WindowBuffer(), DType::I32, {1, 4}, 0); }, ErrorCode::InvalidArgument, {"never allocated"});
    Window v = ctx.window(buf, DType::I64, {8, 64}, 0);
    Window w = ctx.window(buf, DType::I32, {1, 4}, 4080);
    expect_error([&] { ctx.free(v); }, ErrorCode::InvalidArgument, {"is a view", "free its buffer"});
    // A slice of a view reaching past it is OutOfBounds even though the buffer is larger.
    Window small = ctx.window(buf, DType::I32, {1, 4}, 0);
    expect_error([&] { ctx.put(small.slice({0, 2}, {1, 4}), 1 - r, small.slice({0, 0}, {1, 4})); },
                 ErrorCode::OutOfBounds, {"'b' i32[1x4]", "at byte 0 of buffer 'b'"});
    ctx.free(buf);
    MP_CHECK(!buf.valid() && !v.valid() && !w.valid(), "views of a freed buffer still valid");
    expect_error([&] { ctx.put(v.all(), 1 - r, v.all()); }, ErrorCode::UseAfterFree, {"'b'", "freed"});
    expect_error([&] { (void)w.slice({0, 0}, {1, 1}); }, ErrorCode::UseAfterFree, {"'b'", "freed"});
    expect_error([&] { (void)buf.data(); }, ErrorCode::UseAfterFree, {"buffer 'b'", "freed"});
    expect_error([&] { ctx.window(buf, DType::I32, {1, 4}, 0); }, ErrorCode::UseAfterFree, {"buffer 'b'"});
    // An alloc_window window is a view of its own buffer; freeing it frees that buffer.
    Window a = ctx.alloc_window("a", DType::F32, {2, 8});
    Window alias = ctx.window(a.buffer(), DType::I32, {2, 8}, 0);
    ctx.free(a);
    MP_CHECK(!alias.valid(), "a view of a freed window's buffer is still valid");
    ctx.barrier();
  });
}

TEST_P(MemoryModel, BufferSizeDifferingAcrossRanksFailsOnEveryRank) {
  run(3, [](Context& ctx) {
    const size_t bytes = ctx.rank() == 2 ? 4104 : 4096;
    expect_error([&] { ctx.alloc_window_buffer("pool", bytes); }, ErrorCode::WindowMismatch,
                 {"rank " + std::to_string(ctx.rank()), "rank 2 has buffer 'pool' (4104 bytes)", "buffer 'pool' (4096 bytes)"});
    ctx.barrier();
  });
}

// Adjacent int32 signal elements (both halves of 8-byte words, and words straddled by the view's
// 4-byte offset) updated concurrently by every rank with AtomicAdd: no update is lost and no
// neighbour is disturbed. Then Set on one half while the other half is being added to.
TEST_P(MemoryModel, Int32SignalsLoseNoUpdateAndNeverDisturbTheirNeighbour) {
  run(4, [](Context& ctx) {
    const int r = ctx.rank(), n = ctx.size();
    constexpr int kRounds = 12;
    constexpr int kElems = 7;
    WindowBuffer sbuf = ctx.alloc_window_buffer("sig", 64);
    Window s = ctx.window(sbuf, DType::I32, {1, kElems}, 4);  // elements at bytes 4..32
    Window s64 = ctx.window(sbuf, DType::I64, {1, 2}, 48);
    ctx.barrier();
    for (int round = 0; round < kRounds; ++round) {
      for (int k = 0; k < n; ++k) {
        const int p = (r + k) % n;
        for (int e = 0; e < kElems; ++e) ctx.notify(s, p, {0, e}, e + 1);
        ctx.notify(s64, p, {0, 1}, 3);
      }
    }
    for (int e = 0; e < kElems; ++e) ctx.wait(s, {0, e}, int64_t{n} * kRounds * (e + 1), WaitCmp::EQ);
    ctx.wait(s64, {0, 1}, int64_t{n} * kRounds * 3, WaitCmp::EQ);
    ctx.wait(s.all(), 1, WaitCmp::GE);  // every element of a slice
    MP_CHECK(ctx.test(s.slice({0, 1}, {1, 3}), 2, WaitCmp::GE), "test over a slice");
    MP_CHECK(!ctx.test(s.all(), 1000000, WaitCmp::GE), "test of an unmet slice");
    const int32_t* raw = static_cast<const int32_t*>(sbuf.data());
    MP_CHECK(raw[0] == 0 && raw[8] == 0 && raw[9] == 0, "bytes around the int32 view changed");
    ctx.barrier();
    // Set on element 2r of rank 0 while everyone adds to element 2r + 1 (its word neighbour).
    Window t = ctx.window(sbuf, DType::I32, {1, 8}, 0);
    ctx.barrier();
    if (r == 0) std::memset(sbuf.data(), 0, 32);
    ctx.barrier();
    for (int round = 0; round < kRounds; ++round) {
      ctx.notify(t, 0, {0, 2 * r}, 100 * (r + 1) + round, NotifyOp::Set);
      for (int q = 0; q < n; ++q) ctx.notify(t, 0, {0, 2 * q + 1}, 1);
    }
    ctx.barrier();
    if (r == 0) {
      for (int q = 0; q < n; ++q) {
        ctx.wait(t, {0, 2 * q}, 100 * (q + 1) + kRounds - 1, WaitCmp::EQ, std::chrono::milliseconds(20000));
        ctx.wait(t, {0, 2 * q + 1}, n * kRounds, WaitCmp::EQ, std::chrono::milliseconds(20000));
      }
    }
    // int32 values that do not fit are refused; int64 signals take them.
    expect_error([&] { ctx.notify(s, 0, {0, 0}, int64_t{1} << 40); }, ErrorCode::InvalidArgument, {"does not fit", "int32"});
    expect_error([&] { ctx.notify(ctx.window(sbuf, DType::F32, {1, 4}, 0), 0, {0, 0}, 1); }, ErrorCode::DtypeMismatch,
                 {"not int32 or int64"});
    expect_error([&] { ctx.notify(s, 0, {0, kElems}, 1); }, ErrorCode::OutOfBounds, {"[0, 7]"});
    expect_error([&] { ctx.notify(s.slice({0, 0}, {1, 2}), 0, 1); }, ErrorCode::InvalidArgument, {"exactly one"});
    ctx.barrier();
  });
}

// Issue 23, bug 5: a plain put into the other int32 lane of a signal's 8-byte word. Ordered with
// the notifies (put, quiet, then the notifier is told): kept on every path. At the same time as
// the notifies: kept where the contract promises it (CPU atomics: UCX shared memory and am over
// tcp, docs/CONTRACT.md "What is atomic against what"); NIC atomics (verbs, UCX native on RDMA)
// do not promise it, so only the ordered half runs there.
TEST_P(MemoryModel, Int32LaneNextToPutsKeepsBothHalves) {
  const bool cpu_atomics = GetParam().name == "ucx_shm" || GetParam().name == "ucx_tcp";
  run(3, [cpu_atomics](Context& ctx) {
    const int r = ctx.rank();
    constexpr int kRounds = 30;
    WindowBuffer buf = ctx.alloc_window_buffer("word", 16);
    Window lane = ctx.window(buf, DType::I32, {1, 2}, 0);   // [0]: the signal (low half), [1]: data
    Window src = ctx.alloc_window("src", DType::I32, {1, 1});
    auto hs = ctx.alloc_signals("handshake", 2);
    ctx.barrier();
    // Ordered: rank 1 puts lane 1, makes it visible, tells rank 2, which notifies lane 0.
    for (int k = 1; k <= kRounds; ++k) {
      if (r == 1) {
        src.data_as<int32_t>()[0] = 1000 + k;
        ctx.put(lane.slice({0, 1}, {1, 1}), 0, src.all());
        ctx.quiet();
        ctx.notify(hs.at(0), 2, 1);
        ctx.wait(hs.at(1), k, WaitCmp::GE);
      } else if (r == 2) {
        ctx.wait(hs.at(0), k, WaitCmp::GE);
        ctx.notify(lane, 0, {0, 0}, k % 2 ? 1 : 0, k % 3 ? NotifyOp::AtomicAdd : NotifyOp::Set);
        ctx.notify(hs.at(1), 1, 1);
      }
    }
    ctx.barrier();
    if (r == 0) {
      const int32_t* w = lane.data_as<int32_t>();
      int32_t want = 0;
      for (int k = 1; k <= kRounds; ++k) want = k % 3 ? want + (k % 2 ? 1 : 0) : (k % 2 ? 1 : 0);
      MP_CHECK(w[1] == 1000 + kRounds, "data lane holds " << w[1] << " after ordered notifies on its neighbour");
      MP_CHECK(w[0] == want, "signal lane holds " << w[0] << ", expected " << want);
    }
    ctx.barrier();
    if (!cpu_atomics) return;
    // Concurrent: rank 1 puts lane 1 while rank 2 adds into lane 0 (CAS) and lane 1's neighbour word.
    if (r == 0) std::memset(buf.data(), 0, 16);
    ctx.barrier();
    constexpr int kConcurrent = 300;
    if (r == 1) {
      for (int k = 1; k <= kConcurrent; ++k) {
        src.data_as<int32_t>()[0] = k;
        ctx.put(lane.slice({0, 1}, {1, 1}), 0, src.all());
      }
      ctx.quiet();
    } else if (r == 2) {
      for (int k = 1; k <= kConcurrent; ++k) ctx.notify(lane, 0, {0, 0}, 1);
    }
    ctx.barrier();
    if (r == 0) {
      const int32_t* w = lane.data_as<int32_t>();
      MP_CHECK(w[1] == kConcurrent, "data lane holds " << w[1] << " (a put lost under concurrent notifies)");
      MP_CHECK(w[0] == kConcurrent, "signal lane holds " << w[0] << " (a notify lost under concurrent puts)");
    }
    ctx.barrier();
  });
}

// notify seen => earlier puts visible, for int32 signals on either half of a word, Set and Add.
TEST_P(MemoryModel, Int32NotifyIsOrderedAfterEarlierPuts) {
  run(2, [](Context& ctx) {
    const int r = ctx.rank();
    constexpr int kIters = 40;
    constexpr int64_t kElems = 4096;
    Window data = ctx.alloc_window("data", DType::I32, {1, kElems});
    Window src = ctx.alloc_window("src", DType::I32, {1, kElems});
    WindowBuffer sbuf = ctx.alloc_window_buffer("sig", 8);
    Window sig = ctx.window(sbuf, DType::I32, {1, 2}, 0);
    ctx.barrier();
    for (int it = 1; it <= kIters; ++it) {
      if (r == 0) {
        for (int64_t i = 0; i < kElems; ++i) src.data_as<int32_t>()[i] = it * 7 + static_cast<int32_t>(i);
        ctx.put(data.all(), 1, src.all());
        if (it % 2) {
          ctx.notify(sig, 1, {0, 0}, it, NotifyOp::Set);  // low half: CAS
        } else {
          ctx.notify(sig, 1, {0, 1}, 1);  // high half: fetch-free add
        }
        ctx.wait(sig, {0, 0}, it, WaitCmp::GE);  // the ack (rank 1 sets our low half)
      } else {
        if (it % 2) {
          ctx.wait(sig, {0, 0}, it, WaitCmp::GE);
        } else {
          ctx.wait(sig, {0, 1}, it / 2, WaitCmp::GE);
        }
        for (int64_t i = 0; i < kElems; ++i) {
          MP_CHECK(data.data_as<int32_t>()[i] == it * 7 + static_cast<int32_t>(i),
                   "iteration " << it << " element " << i << " not visible after the notify");
        }
        ctx.notify(sig, 0, {0, 0}, it, NotifyOp::Set);
      }
    }
    ctx.barrier();
  });
}

// The runtime's pattern (and the Python suite's): every round a fresh buffer holds the int32 signal
// (same remote address likely, new contents), a ring notify on the word's lower half (CAS), wait,
// free. A stale CAS guess may only cost a retry, never a lost notify.
TEST_P(MemoryModel, Int32SignalsInFreshBuffersEveryRound) {
  run(3, [](Context& ctx) {
    const int r = ctx.rank(), n = ctx.size(), next = (r + 1) % n;
    for (int round = 0; round < 60; ++round) {
      WindowBuffer b = ctx.alloc_window_buffer("sig", 16);
      Window sig = ctx.window(b, DType::I32, {n, 1});
      Window data = ctx.window(b, DType::I32, {1, 1}, 12);
      ctx.barrier();
      ctx.put(data.all(), next, local(&round, {1, 1}));
      ctx.notify(sig, next, {0, 0}, 1 + round % 2, round % 3 == 0 ? NotifyOp::Set : NotifyOp::AtomicAdd);
      ctx.wait(sig, {0, 0}, 1 + round % 2, WaitCmp::EQ, std::chrono::milliseconds(20000));
      MP_CHECK(data.data_as<int32_t>()[0] == round, "round " << round << ": data " << data.data_as<int32_t>()[0]);
      ctx.barrier();
      ctx.free(b);
    }
  });
}

// Empty slices are a no-op in put, get, wait and test once every other check passed; notify needs
// exactly one element; a negative timeout is InvalidArgument.
TEST_P(MemoryModel, EmptySlicesAreNoOpsEverywhereAndTimeoutsMustBeNonNegative) {
  run(2, [](Context& ctx) {
    const int r = ctx.rank();
    Window a = ctx.alloc_window("a", DType::I32, {4, 16});
    auto sig = ctx.alloc_signals("sig", 2);
    for (int i = 0; i < 64; ++i) a.data_as<int32_t>()[i] = r * 100 + i;
    ctx.barrier();
    const Slice e1 = a.slice({4, 16}, {0, 0});  // at the far corner: still in bounds
    const Slice e2 = a.slice({1, 3}, {2, 0});
    ctx.put(e1, 1 - r, e1);
    ctx.put(e2, 1 - r, e2, AtomicType::Add);
    ctx.put_nbi(e2, 1 - r, e2);
    ctx.get(e2, 1 - r, e2);
    ctx.get_nbi(e1, 1 - r, e1);
    ctx.quiet();
    ctx.wait(e2, 1, WaitCmp::EQ, std::chrono::milliseconds(0));  // vacuously true: returns at once
    MP_CHECK(ctx.test(e1, 5, WaitCmp::EQ), "test of an empty slice");
    ctx.wait(sig.slice(0, 0), 1, WaitCmp::EQ);
    MP_CHECK(ctx.test(sig.slice(1, 0), 1, WaitCmp::EQ), "test of an empty signal slice");
    // The other checks still apply to empty slices.
    expect_error([&] { ctx.put(e1, 2, e1); }, ErrorCode::PeerOutOfRange, {"peer 2"});
    expect_error([&] { ctx.get(a.slice({5, 0}, {0, 1}), 1 - r, a.slice({0, 0}, {0, 1})); }, ErrorCode::OutOfBounds, {"dst"});
    expect_error([&] { ctx.wait(a.slice({0, 17}, {1, 0}), 1); }, ErrorCode::OutOfBounds, {"[0, 17]"});
    expect_error([&] { ctx.notify(e2, 1 - r, 1); }, ErrorCode::InvalidArgument, {"exactly one"});
    expect_error([&] { ctx.wait(sig.at(0), 1, WaitCmp::GE, std::chrono::milliseconds(-5)); }, ErrorCode::InvalidArgument,
                 {"negative timeout -5 ms"});
    ctx.barrier();
    for (int i = 0; i < 64; ++i) MP_CHECK(a.data_as<int32_t>()[i] == r * 100 + i, "element " << i << " changed");
    // slice() of a freed window throws like name().
    ctx.free(a);
    expect_error([&] { (void)a.slice({0, 0}, {1, 1}); }, ErrorCode::UseAfterFree, {"'a'", "freed"});
    expect_error([&] { (void)a.all(); }, ErrorCode::UseAfterFree, {"'a'"});
    ctx.barrier();
  });
}

// Plain local memory (heap, stack, mmap; contiguous and with a row stride) as put's src and get's
// dst, also put(Add) and the non-blocking forms; memory unmapped and mapped again at the same address
// is sent as it is now, never as the registration cache last saw it.
TEST_P(MemoryModel, PlainLocalMemoryAsTheLocalSide) {
  run(2, [](Context& ctx) {
    const int r = ctx.rank(), peer = 1 - r;
    constexpr int64_t kRows = 8, kCols = 300;
    Window w = ctx.alloc_window("w", DType::I32, {kRows, kCols});
    Window acc = ctx.alloc_window("acc", DType::I64, {1, 64});
    auto sig = ctx.alloc_signals("sig", 1);
    auto expect_w = [&](int64_t rows, int64_t cols, auto value, const char* what) {
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          MP_CHECK(w.data_as<int32_t>()[i * kCols + j] == value(i, j), what << " [" << i << "][" << j << "]");
        }
      }
    };
    auto round = [&](auto&& send, int64_t rows, int64_t cols, auto value, const char* what) {
      std::memset(w.data(), 0, w.bytes());
      ctx.barrier();
      send();
      ctx.notify(sig.at(0), peer, 1);
      ctx.wait(sig.at(0), 1, WaitCmp::GE);
      sig.store(0, 0);
      expect_w(rows, cols, value, what);
      ctx.barrier();
    };
    // Heap, contiguous rows: the whole window in one put.
    std::vector<int32_t> heap(kRows * kCols);
    for (int64_t i = 0; i < kRows * kCols; ++i) heap[static_cast<size_t>(i)] = static_cast<int32_t>(r * 100000 + i);
    round([&] { ctx.put(w.all(), peer, local(heap.data(), {kRows, kCols})); }, kRows, kCols,
          [&](int64_t i, int64_t j) { return static_cast<int32_t>(peer * 100000 + i * kCols + j); }, "heap put");
    // Stack, with a row stride (a 3x5 rectangle out of a 3x7 local array) into an offset slice.
    int32_t stack[3][7];
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 7; ++j) stack[i][j] = r * 1000 + i * 10 + j;
    }
    round([&] { ctx.put(w.slice({0, 0}, {3, 5}), peer, local(&stack[0][0], {3, 5}, 7)); }, 3, 5,
          [&](int64_t i, int64_t j) { return static_cast<int32_t>(peer * 1000 + i * 10 + j); }, "stack put");
    // mmap, then unmapped and mapped again at the same address with new contents.
    const size_t map_bytes = 64 * 4096;
    void* m = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MP_CHECK(m != MAP_FAILED, "mmap");
    auto fill = [&](int gen) {
      auto* p = static_cast<int32_t*>(m);
      for (int64_t i = 0; i < kRows * kCols; ++i) p[i] = static_cast<int32_t>(gen * 1000000 + r * 100000 + i);
    };
    for (int gen = 1; gen <= 3; ++gen) {
      if (gen > 1) {
        MP_CHECK(::munmap(m, map_bytes) == 0, "munmap");
        void* again = ::mmap(m, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        MP_CHECK(again == m, "mmap at the same address");
      }
      fill(gen);
      round([&] { ctx.put(w.all(), peer, local(static_cast<int32_t*>(m), {kRows, kCols})); }, kRows, kCols,
            [&](int64_t i, int64_t j) { return static_cast<int32_t>(gen * 1000000 + peer * 100000 + i * kCols + j); },
            "mmap put after remap");
    }
    // get into plain memory (heap with a row stride; the gaps stay untouched), blocking and nbi.
    for (int64_t i = 0; i < kRows * kCols; ++i) w.data_as<int32_t>()[i] = static_cast<int32_t>(r * 7 + i);
    ctx.barrier();
    std::vector<int32_t> into(4 * 400, -1);
    ctx.get(local(into.data(), {4, kCols}, 400), peer, w.slice({2, 0}, {4, kCols}));
    std::vector<int32_t> into2(kCols, -1);
    ctx.get_nbi(local(into2.data(), {1, kCols}), peer, w.slice({7, 0}, {1, kCols}));
    ctx.quiet();
    for (int64_t i = 0; i < 4; ++i) {
      for (int64_t j = 0; j < 400; ++j) {
        const int32_t v = into[static_cast<size_t>(i * 400 + j)];
        if (j < kCols) {
          MP_CHECK(v == static_cast<int32_t>(peer * 7 + (i + 2) * kCols + j), "get into heap [" << i << "][" << j << "]");
        } else {
          MP_CHECK(v == -1, "get wrote into the row gap at [" << i << "][" << j << "]");
        }
      }
    }
    for (int64_t j = 0; j < kCols; ++j) {
      MP_CHECK(into2[static_cast<size_t>(j)] == static_cast<int32_t>(peer * 7 + 7 * kCols + j), "get_nbi [" << j << "]");
    }
    ctx.barrier();
    // put_nbi from the mapping, and put(Add) from the stack into one rank.
    fill(9);
    std::memset(w.data(), 0, w.bytes());
    ctx.barrier();
    ctx.put_nbi(w.all(), peer, local(static_cast<int32_t*>(m), {kRows, kCols}));
    int64_t add[64];
    for (int i = 0; i < 64; ++i) add[i] = i + 1;
    ctx.put(acc.all(), 0, local(add, {1, 64}), AtomicType::Add);
    ctx.barrier();
    expect_w(kRows, kCols, [&](int64_t i, int64_t j) { return static_cast<int32_t>(9000000 + peer * 100000 + i * kCols + j); },
             "put_nbi");
    if (r == 0) {
      for (int i = 0; i < 64; ++i) MP_CHECK(acc.data_as<int64_t>()[i] == 2 * (i + 1), "put(Add) from local [" << i << "]");
    }
    ctx.deregister(m);
    MP_CHECK(::munmap(m, map_bytes) == 0, "munmap");
    // Misuse of plain memory.
    expect_error([&] { ctx.put(w.slice({0, 0}, {1, 4}), peer, local(heap.data(), {1, 5})); }, ErrorCode::ShapeMismatch,
                 {"src local memory", "[1, 5]", "[1, 4]"});
    expect_error([&] { ctx.put(w.slice({0, 0}, {1, 4}), peer, local(add, {1, 4})); }, ErrorCode::DtypeMismatch,
                 {"i64", "'w' i32"});
    expect_error([&] { ctx.get(local(into.data(), {2, 8}, 4), peer, w.slice({0, 0}, {2, 8})); }, ErrorCode::InvalidArgument,
                 {"row stride 4"});
    expect_error([&] { ctx.get(Local{nullptr, DType::I32, {1, 4}, 0}, peer, w.slice({0, 0}, {1, 4})); },
                 ErrorCode::InvalidArgument, {"null pointer"});
    // (rows - 1) * stride * 4 bytes wraps 64 bits: refused before anything is read.
    expect_error([&] { ctx.put(w.slice({0, 0}, {2, 4}), peer, local(heap.data(), {2, 4}, int64_t{1} << 62)); },
                 ErrorCode::OutOfBounds, {"row stride 4611686018427387904", "does not fit"});
    ctx.barrier();
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, MemoryModel, ::testing::ValuesIn(rwin_test::transports()),
                         [](const ::testing::TestParamInfo<TransportParam>& pinfo) { return pinfo.param.name; });

}  // namespace
