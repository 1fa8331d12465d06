// put and get: chunking a rectangle into transport work, the single-op fast path, the pipeline
// that keeps pipeline_depth chunks in flight, and the non-blocking forms.
#include <algorithm>

#include "chunk_planner.h"
#include "common/copy.h"
#include "context_impl.h"
#include "ops.h"
#include "wait_until.h"

namespace rwin {

using namespace detail;  // the core's internal types (context_impl.h, ops.h)
using transport::Op;
using transport::PostResult;
using transport::Work;

Xfer detail::make_xfer(int peer, const WindowState& local, const Slice& local_slice, const WindowState& remote,
                       const Slice& remote_slice) {
  Xfer x;
  x.peer = peer;
  x.dtype = local.dtype;
  x.esz = dtype_size(local.dtype);
  x.shape = local_slice.shape;
  x.local_base = local.base();
  x.local_mr = local.mr();
  x.local_cols = local.shape[1];
  x.local_offsets = local_slice.offsets;
  x.remote_base = remote.remote_base(peer);
  x.rkey = &remote.rkey(peer);
  x.remote_cols = remote.shape[1];
  x.remote_offsets = remote_slice.offsets;
  return x;
}

Xfer detail::make_xfer(int peer, const Local& local, const transport::MemoryRegion* mr, const WindowState& remote,
                       const Slice& remote_slice) {
  Xfer x;
  x.peer = peer;
  x.dtype = local.dtype;
  x.esz = dtype_size(local.dtype);
  x.shape = local.shape;
  x.local_base = static_cast<char*>(local.data);
  x.local_mr = mr;
  x.local_cols = local.row_stride == 0 ? local.shape[1] : local.row_stride;
  x.local_offsets = {0, 0};
  x.remote_base = remote.remote_base(peer);
  x.rkey = &remote.rkey(peer);
  x.remote_cols = remote.shape[1];
  x.remote_offsets = remote_slice.offsets;
  return x;
}

ChunkPlanner detail::plan_chunks(const ContextImpl& c, const Xfer& x, uint64_t max_chunk) {
  TransferShape t;
  t.elem_bytes = x.esz;
  t.shape = x.shape;
  t.local_offsets = x.local_offsets;
  t.local_cols = x.local_cols;
  t.remote_offsets = x.remote_offsets;
  t.remote_cols = x.remote_cols;
  t.max_chunk_bytes = max_chunk == 0 ? std::min<uint64_t>(c.opt.chunk_bytes, c.caps.max_message_bytes) : max_chunk;
  return ChunkPlanner(t);
}

Work detail::chunk_work(Op op, const Xfer& x, const Chunk& ch) {
  Work w;
  w.op = op;
  w.peer = x.peer;
  w.local = x.local_base + ch.local_offset;
  w.local_mr = x.local_mr;
  w.remote_addr = x.remote_base + ch.remote_offset;
  w.rkey = x.rkey;
  w.bytes = ch.bytes;
  if (op == Op::Accumulate) w.operand = static_cast<uint64_t>(x.dtype);  // the target adds as this type
  return w;
}

namespace {

// Context::stats(): one put or get of `bytes` to `peer`, cut into `chunks` work requests.
void count_transfer(const ContextImpl& c, Op op, int peer, uint64_t bytes, uint64_t chunks) {
  PeerStats& p = c.peer_stats[static_cast<size_t>(peer)];
  if (op == Op::Accumulate) {  // run_accumulate counted the call and its bytes; `chunks` counts puts' and gets'
    if (c.open_span) c.open_span->add_work(0, chunks);
    return;
  }
  if (op == Op::Write) {
    ++p.puts;
    p.put_bytes += bytes;
  } else {
    ++p.gets;
    p.get_bytes += bytes;
  }
  p.chunks += chunks;
  if (c.open_span) c.open_span->add_work(bytes, chunks);
}
uint64_t xfer_bytes(const Xfer& x) {
  return static_cast<uint64_t>(x.shape[0]) * static_cast<uint64_t>(x.shape[1]) * x.esz;
}

}  // namespace

namespace {

// The rectangle as one contiguous run on both sides (a single row, or full rows on both): fills
// `out` and returns true; false sends the caller to the planner.
bool one_run(const Xfer& x, Chunk& out) {
  const int64_t rows = x.shape[0], cols = x.shape[1];
  if (rows != 1 && (cols != x.local_cols || cols != x.remote_cols)) return false;
  out.bytes = static_cast<uint64_t>(rows * cols) * x.esz;
  out.local_offset = static_cast<uint64_t>(x.local_offsets[0] * x.local_cols + x.local_offsets[1]) * x.esz;
  out.remote_offset = static_cast<uint64_t>(x.remote_offsets[0] * x.remote_cols + x.remote_offsets[1]) * x.esz;
  return true;
}

// The common small case: one run that fits one chunk (of at most `max_chunk` bytes where not 0).
bool single_run(const ContextImpl& c, const Xfer& x, Chunk& out, uint64_t max_chunk) {
  return one_run(x, out) && out.bytes <= c.opt.chunk_bytes && out.bytes <= c.caps.max_message_bytes &&
         (max_chunk == 0 || out.bytes <= max_chunk);
}

// The shared-memory fast path: the peer's view is mapped here at `remote` (WindowState::mapped),
// so the core copies with the CPU, as OpenSHMEM's shmem_ptr users do. Complete on return: no
// Work, no completion record, nothing left for quiet/fence (a later notify is an atomic
// instruction after these stores, so a peer that sees it sees them).
void direct_transfer(const ContextImpl& c, Op op, const Xfer& x, char* remote) {
  count_transfer(c, op, x.peer, xfer_bytes(x), 0);
  Chunk ch;
  auto run = [&] {
    if (op == Op::Write) {
      common::copy(remote + ch.remote_offset, x.local_base + ch.local_offset, ch.bytes);
    } else {
      common::copy(x.local_base + ch.local_offset, remote + ch.remote_offset, ch.bytes);
    }
  };
  if (one_run(x, ch)) return run();
  ChunkPlanner planner = plan_chunks(c, x, uint64_t{1} << 62);  // rows, uncut
  while (planner.next(ch)) run();
}

// direct_transfer between two window slices, the one-run case without building an Xfer (the
// 8-byte put's whole budget is a few nanoseconds).
void direct_slices(const ContextImpl& c, Op op, int peer, const WindowState& lw, const Slice& ls,
                   const WindowState& rw, const Slice& rs, char* remote) {
  const int64_t rows = ls.shape[0], cols = ls.shape[1];
  if (rows == 1 || (cols == lw.shape[1] && cols == rw.shape[1])) {
    const uint64_t esz = dtype_size(lw.dtype);
    const uint64_t n = static_cast<uint64_t>(rows * cols) * esz;
    char* l = lw.base() + static_cast<uint64_t>(ls.offsets[0] * lw.shape[1] + ls.offsets[1]) * esz;
    char* r = remote + static_cast<uint64_t>(rs.offsets[0] * rw.shape[1] + rs.offsets[1]) * esz;
    if (op == Op::Write) {
      common::copy(r, l, n);
    } else {
      common::copy(l, r, n);
    }
    count_transfer(c, op, peer, n, 0);
    return;
  }
  direct_transfer(c, op, make_xfer(peer, lw, ls, rw, rs), remote);
}

}  // namespace

// One blocking op without the slot table or a Transfer record: posts it and polls until its own
// completion arrives. The cookie (kSyncBit | peer << 32 | sequence) routes the completion here.
void detail::run_single(ContextImpl& c, Work& w, const char* what) {
  Deadline deadline(c.opt.op_timeout);
  run_single(c, w, what, deadline);
}

void detail::run_single(ContextImpl& c, Work& w, const char* what, Deadline& deadline) {
  c.sync_cookie = ContextImpl::kSyncBit | (static_cast<uint64_t>(w.peer) << 32) | (++c.sync_seq & 0xffffffffu);
  c.sync_done = false;
  c.sync_error.clear();
  w.cookie = c.sync_cookie;
  WaitFor room{"room in the transport's queue", w.peer};
  wait_until(
      c, room, deadline,
      [&](uint64_t) {
        const PostResult r = c.tp->post(w);
        if (r == PostResult::Ok) return true;
        if (r == PostResult::PeerFailed) {
          std::string err = c.tp->peer_error(w.peer);
          c.peers[static_cast<size_t>(w.peer)].failed = err;
          throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + " to peer " + std::to_string(w.peer) + ": " +
                                                 c.peer_failed_text(w.peer, err));
        }
        c.progress();
        c.watch();
        return false;
      },
      [&] {
        c.degraded = true;
        throw Error(ErrorCode::Timeout, c.who() + ": " + what + " to peer " + std::to_string(w.peer) +
                                            ": transport stayed busy until the deadline (" + c.tp->describe() + ")");
      });
  PeerState& ps = c.peers[static_cast<size_t>(w.peer)];
  WaitFor wf{"completion", w.peer};
  wait_until(
      c, wf, deadline,
      [&](uint64_t) {
        c.progress();
        if (c.sync_done) return true;
        c.watch();
        if (!ps.failed.empty()) {
          c.sync_cookie = 0;  // its completion, if it ever comes, is stale
          throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + " peer " + std::to_string(w.peer) + " (" +
                                                 std::to_string(w.bytes) + " bytes): " + c.peer_failed_text(w.peer, ps.failed));
        }
        return false;
      },
      [&] {
        const std::string msg = c.who() + ": " + what + " peer " + std::to_string(w.peer) + ": 1 chunk (" +
                                std::to_string(w.bytes) + " bytes) unfinished after " +
                                std::to_string(c.opt.op_timeout.count()) + " ms (" + c.tp->describe() + ")";
        c.peers[static_cast<size_t>(w.peer)].failed = msg;
        c.sync_cookie = 0;  // its completion, if it ever comes, is stale
        throw Error(ErrorCode::Timeout, msg);
      });
  if (!c.sync_error.empty()) {
    throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + " peer " + std::to_string(w.peer) + " (" +
                                           std::to_string(w.bytes) + " bytes): " +
                                           c.peer_failed_text(w.peer, c.sync_error + " (chunk 1/1)"));
  }
}

// Moves a rectangle in chunks, keeping at most pipeline_depth in flight.
void detail::run_transfer(ContextImpl& c, Op op, const Xfer& x, const char* what, uint64_t max_chunk) {
  const int peer = x.peer;
  Chunk ch;
  if (single_run(c, x, ch, max_chunk)) {
    count_transfer(c, op, peer, ch.bytes, 1);
    Work w = chunk_work(op, x, ch);
    run_single(c, w, what);
    return;
  }
  Deadline deadline(c.opt.op_timeout);
  ChunkPlanner planner = plan_chunks(c, x, max_chunk);
  count_transfer(c, op, peer, xfer_bytes(x), planner.total_chunks());
  Transfer tr;
  uint64_t index = 0;
  bool more = true;
  WaitFor wf{"chunk completions", peer};
  for (;;) {
    while (more && tr.inflight < c.opt.pipeline_depth && tr.error.empty()) {
      more = planner.next(ch);
      if (!more) break;
      Work w = chunk_work(op, x, ch);
      Slot s;
      s.kind = Slot::Chunk;
      s.peer = peer;
      s.transfer = &tr;
      s.index = index++;
      s.total = planner.total_chunks();
      try {
        c.post_blocking(w, s, deadline, what);
      } catch (...) {
        c.abandon(tr);
        throw;
      }
      tr.inflight++;
    }
    if (!tr.error.empty()) more = false;  // stop posting; collect what is in flight
    if (tr.inflight == 0) break;
    // Until a chunk completes and one more may be posted (or, past the last, until all have).
    const int room_at = more ? c.opt.pipeline_depth : 1;
    wait_until(
        c, wf, deadline,
        [&](uint64_t) {
          c.progress();
          if (tr.inflight < room_at || (more && !tr.error.empty())) return true;  // an error stops the posting
          c.watch();
          // A failed peer may never complete the chunks still in flight (also after one of them failed).
          if (const std::string& f = c.peers[static_cast<size_t>(peer)].failed; !f.empty()) {
            c.abandon(tr);  // chunks still in flight complete into nothing
            throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + " peer " + std::to_string(peer) + " (" +
                                                   std::to_string(planner.total_bytes()) + " bytes, " +
                                                   std::to_string(tr.inflight) + " chunks in flight): " +
                                                   c.peer_failed_text(peer, tr.error.empty() ? f : tr.error));
          }
          return false;
        },
        [&] {
          const std::string msg = c.who() + ": " + what + " peer " + std::to_string(peer) + ": " +
                                  std::to_string(tr.inflight) + " of " + std::to_string(planner.total_chunks()) +
                                  " chunks (" + std::to_string(planner.total_bytes()) + " bytes) unfinished after " +
                                  std::to_string(c.opt.op_timeout.count()) + " ms (" + c.tp->describe() + ")";
          // A peer that cannot finish a transfer by the deadline is treated as failed.
          c.peers[static_cast<size_t>(peer)].failed = msg;
          c.abandon(tr);
          throw Error(ErrorCode::Timeout, msg);
        });
  }
  if (!tr.error.empty()) {
    throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + " peer " + std::to_string(peer) + " (" +
                                           std::to_string(planner.total_bytes()) + " bytes): " +
                                           c.peer_failed_text(peer, tr.error));
  }
}

namespace {

// Posts every chunk of a transfer and returns; each counts as outstanding work to the peer until
// its completion, so quiet/fence/notify (all of which drain the peer) cover it.
void post_transfer(ContextImpl& c, Op op, const Xfer& x, const char* what) {
  Deadline deadline(c.opt.op_timeout);
  ChunkPlanner planner = plan_chunks(c, x, 0);
  count_transfer(c, op, x.peer, xfer_bytes(x), planner.total_chunks());
  PeerState& ps = c.peers[static_cast<size_t>(x.peer)];
  Chunk ch;
  while (planner.next(ch)) {
    Work w = chunk_work(op, x, ch);
    Slot s;
    s.kind = Slot::Async;
    s.peer = x.peer;
    c.post_blocking(w, s, deadline, what);  // a full queue makes it poll, not fail
    ps.outstanding++;
  }
  c.progress();  // hands staged work to the device before returning (transport.h)
}

// A copy into or out of a peer's mapped memory of up to kStampAfterBytes (tens of nanoseconds) is
// stamped once, after it (trace.h, StampLater).
constexpr uint64_t kStampAfterBytes = 1024;
uint64_t slice_bytes(const WindowState& w, const Slice& s) { return static_cast<uint64_t>(s.elements()) * dtype_size(w.dtype); }

// The trace span of one put/get call (trace.h); count_transfer and run_accumulate add its bytes and
// chunks. Null-pointer tests only when tracing is off. It starts now, unless the call is a CPU copy of
// at most kStampAfterBytes into or out of mapped memory (`mapped`: the peer's memory is mapped here,
// `bytes` the copy's size): then it is stamped once, when it ends.
struct XferSpan {
  const ContextImpl& c;
  TraceSpan span;
  XferSpan(const ContextImpl& ctx, const char* name, int peer, bool mapped, uint64_t bytes) noexcept
      : c(ctx), span(ctx.trace.get(), name, "rma", peer, 0, TraceSpan::StampLater{}) {
    if (!span.on()) return;
    c.open_span = &span;
    if (!mapped || bytes > kStampAfterBytes) span.start();
  }
  ~XferSpan() { c.open_span = nullptr; }
  void ok() noexcept { span.ok(); }  // every return but an exception's (TraceSpan::ok)
  XferSpan(const XferSpan&) = delete;
  XferSpan& operator=(const XferSpan&) = delete;
};

}  // namespace

void Context::put(const Slice& dst, int peer, const Slice& src, AtomicType atomic) {
  ContextImpl& c = *impl_;
  auto [d, s] = check_transfer(c, "put", peer, dst, src);
  if (src.elements() == 0) return;
  char* m = atomic == AtomicType::Add ? nullptr : d.mapped(peer);  // put(Add) is applied by the target's owner
  XferSpan span(c, atomic == AtomicType::Add ? "put(Add)" : "put", peer, m, slice_bytes(s, src));
  if (m) {
    direct_slices(c, Op::Write, peer, s, src, d, dst, m);
    return span.ok();
  }
  const Xfer x = make_xfer(peer, s, src, d, dst);
  if (atomic == AtomicType::Add) {
    run_accumulate(c, x, d);
  } else {
    run_transfer(c, Op::Write, x, "put");
  }
  c.peers[static_cast<size_t>(peer)].dirty = true;
  c.peers[static_cast<size_t>(peer)].unflushed = true;
}

void Context::put_nbi(const Slice& dst, int peer, const Slice& src) {
  ContextImpl& c = *impl_;
  auto [d, s] = check_transfer(c, "put_nbi", peer, dst, src);
  if (src.elements() == 0) return;
  char* m = d.mapped(peer);
  XferSpan span(c, "put_nbi", peer, m, slice_bytes(s, src));
  if (m) {
    direct_slices(c, Op::Write, peer, s, src, d, dst, m);
    return span.ok();
  }
  post_transfer(c, Op::Write, make_xfer(peer, s, src, d, dst), "put_nbi");
  c.peers[static_cast<size_t>(peer)].dirty = true;
  c.peers[static_cast<size_t>(peer)].unflushed = true;
}

void Context::get_nbi(const Slice& dst, int peer, const Slice& src) {
  ContextImpl& c = *impl_;
  auto [d, s] = check_transfer(c, "get_nbi", peer, dst, src);
  if (src.elements() == 0) return;
  char* m = s.mapped(peer);
  XferSpan span(c, "get_nbi", peer, m, slice_bytes(d, dst));
  if (m) {
    direct_slices(c, Op::Read, peer, d, dst, s, src, m);
    return span.ok();
  }
  post_transfer(c, Op::Read, make_xfer(peer, d, dst, s, src), "get_nbi");
}

void Context::get(const Slice& dst, int peer, const Slice& src) {
  ContextImpl& c = *impl_;
  auto [d, s] = check_transfer(c, "get", peer, dst, src);
  if (src.elements() == 0) return;
  char* m = s.mapped(peer);
  XferSpan span(c, "get", peer, m, slice_bytes(d, dst));
  if (m) {
    direct_slices(c, Op::Read, peer, d, dst, s, src, m);
    return span.ok();
  }
  run_transfer(c, Op::Read, make_xfer(peer, d, dst, s, src), "get");
}

// ---------------------------------------------------------------------------------------------
// Plain local memory (rwin::Local) as the local side

namespace {

// One acquire() of the registration cache, released when the blocking operation returns (or throws).
struct LocalPin {
  ContextImpl& c;
  const transport::MemoryRegion* mr = nullptr;
  LocalPin(ContextImpl& ctx, const void* p, uint64_t bytes) : c(ctx) { mr = c.acquire_local(p, bytes); }
  ~LocalPin() {
    if (mr && c.regcache) c.regcache->release(mr);
  }
  LocalPin(const LocalPin&) = delete;
  LocalPin& operator=(const LocalPin&) = delete;
};

WindowState& check_remote(ContextImpl& c, const char* op, int peer, const char* side, const Slice& s) {
  c.check_peer(peer, op);
  return check_slice(c, op, peer, side, s);
}

}  // namespace

namespace {

// put/get (blocking or nbi) between plain local memory and a window slice: `op` Write = put.
void local_transfer(ContextImpl& c, Op op, bool nbi, const char* what, int peer, const Slice& remote,
                    const Local& local) {
  const bool put = op == Op::Write;
  WindowState& w = check_remote(c, what, peer, put ? "dst" : "src", remote);
  const uint64_t bytes = check_local(c, what, peer, put ? "src" : "dst", local, remote, w);
  if (bytes == 0) return;
  char* m = w.mapped(peer);
  XferSpan span(c, what, peer, m, bytes);
  if (m) {
    direct_transfer(c, op, make_xfer(peer, local, nullptr, w, remote), m);
    return span.ok();
  }
  if (nbi) {
    const transport::MemoryRegion* mr = c.acquire_local(local.data, bytes);
    if (mr) c.nbi_pins.push_back(mr);  // released once nothing is outstanding (ContextImpl::release_nbi_pins)
    post_transfer(c, op, make_xfer(peer, local, mr, w, remote), what);
  } else {
    LocalPin pin(c, local.data, bytes);
    run_transfer(c, op, make_xfer(peer, local, pin.mr, w, remote), what);
  }
  if (put) {
    c.peers[static_cast<size_t>(peer)].dirty = true;
    c.peers[static_cast<size_t>(peer)].unflushed = true;
  }
}

}  // namespace

void Context::put(const Slice& dst, int peer, const Local& src, AtomicType atomic) {
  ContextImpl& c = *impl_;
  if (atomic != AtomicType::Add) return local_transfer(c, Op::Write, false, "put", peer, dst, src);
  WindowState& d = check_remote(c, "put", peer, "dst", dst);
  if (check_local(c, "put", peer, "src", src, dst, d) == 0) return;
  XferSpan span(c, "put(Add)", peer, false, 0);  // applied by the target's owner, never a CPU copy here
  run_accumulate(c, make_xfer(peer, src, nullptr, d, dst), d);  // reads src with the CPU
  c.peers[static_cast<size_t>(peer)].dirty = true;
  c.peers[static_cast<size_t>(peer)].unflushed = true;
}

void Context::get(const Local& dst, int peer, const Slice& src) {
  local_transfer(*impl_, Op::Read, false, "get", peer, src, dst);
}
void Context::put_nbi(const Slice& dst, int peer, const Local& src) {
  local_transfer(*impl_, Op::Write, true, "put_nbi", peer, dst, src);
}
void Context::get_nbi(const Local& dst, int peer, const Slice& src) {
  local_transfer(*impl_, Op::Read, true, "get_nbi", peer, src, dst);
}

void Context::deregister(const void* ptr) {
  impl_->check_owner("deregister");
  if (impl_->regcache) impl_->regcache->deregister(ptr);
}

}  // namespace rwin
