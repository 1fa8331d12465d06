// put(Add) staging, the target's half (staging.h): the region at start-up, and applying the slots
// peers posted to this rank. The source's half is in accumulate.cpp.
#include <atomic>
#include <cstdio>

#include "context_impl.h"
#include "ops.h"
#include "staging.h"
#include "window_blob.h"
#include "common/log.h"

namespace rwin {

using namespace detail;
using transport::Op;
using transport::PostResult;
using transport::Work;

void ContextImpl::start_staging() {
  auto st = std::make_unique<StagingState>();
  st->mine = staging_layout(nranks, opt.accumulate_staging_bytes);
  const StagingLayout& l = st->mine;
  st->mr = tp->allocate(l.total_bytes());  // throws TransportError: the caller reports it
  // The layout travels in a window descriptor: K slots x C bytes as its shape.
  const Shape2 shape{static_cast<int64_t>(l.slots), static_cast<int64_t>(l.slot_bytes)};
  const auto all = bs->allgather(window_blob("rwin.accumulate_staging", DType::U8, shape, BlobKind::Buffer,
                                             st->mr->packed_key()));
  for (int r = 0; r < nranks; ++r) {
    const auto d = parse_window_blob(all[static_cast<size_t>(r)]);
    if (!d || d->shape[0] != static_cast<int64_t>(kStagingSlots) || d->shape[1] < static_cast<int64_t>(kMinSlotBytes) ||
        d->shape[1] % 4096 != 0) {
      throw Error(ErrorCode::Bootstrap, who() + ": accumulate staging: malformed descriptor from rank " +
                                            std::to_string(r) + " (mixed rwin builds in one job?)");
    }
    StagingLayout pl;
    pl.nranks = nranks;
    pl.slots = kStagingSlots;
    pl.slot_bytes = static_cast<uint64_t>(d->shape[1]);
    st->layouts.push_back(pl);
    st->rkeys.push_back(tp->unpack_key(r, d->key));
  }
  // The outbox holds this rank's slots before they are written: as large as the largest peer slot.
  for (const auto& pl : st->layouts) {
    if (pl.slot_bytes > l.slot_bytes) {
      throw Error(ErrorCode::InvalidArgument, who() + ": RWIN_ACCUMULATE_STAGING_BYTES differs across ranks (rank " +
                                                  std::to_string(rank) + " has slots of " +
                                                  std::to_string(l.slot_bytes) + " bytes, a peer larger ones)");
    }
  }
  st->posted_to.assign(static_cast<size_t>(nranks), 0);
  st->applied_from.assign(static_cast<size_t>(nranks), 0);
  st->ack_owed.assign(static_cast<size_t>(nranks), 0);
  st->ack_queued.assign(static_cast<size_t>(nranks), 0);
  st->bells.reset(l);
  staging = std::move(st);
}

void ContextImpl::apply_staged() {
  StagingState& st = *staging;
  if (st.applying) return;  // a lock wait inside an apply does not progress, but be sure
  struct Guard {
    bool& f;
    explicit Guard(bool& b) : f(b) { f = true; }
    ~Guard() { f = false; }
  } guard(st.applying);
  // Acks the transport was too busy for last time (only those sources: no scan of every peer).
  if (!st.ack_retry.empty()) {
    std::vector<int> retry;
    retry.swap(st.ack_retry);
    for (int src : retry) {
      st.ack_queued[static_cast<size_t>(src)] = 0;
      post_staging_ack(src);
    }
  }
  std::vector<TargetSpan> spans;
  std::vector<BufferState*> span_buf;
  const auto read = [&](uint64_t off) {
    return std::atomic_ref<uint64_t>(*st.word(off)).load(std::memory_order_acquire);
  };
  // Applies (or, from a failed source, drops) what `src` posted since the last call; returns how many.
  const auto visit = [&](int src) -> uint64_t {
    const size_t s = static_cast<size_t>(src);
    PeerState& ps = peers[s];
    const uint64_t posted = read(st.mine.posted_word(src));
    const uint64_t before = st.applied_from[s];
    if (!ps.failed.empty()) {  // a failed source's staged slots are dropped
      if (posted > before) st.applied_from[s] = posted;
      return st.applied_from[s] - before;
    }
    while (st.applied_from[s] < posted) {
      const uint64_t seq = st.applied_from[s];
      const char* slot = static_cast<const char*>(st.mr->addr()) + st.mine.inbox(src, seq % st.mine.slots);
      if (spans.empty()) {
        for (const auto& b : buffers) {
          if (b->kind == BufferState::Kind::Signals || !b->mr) continue;
          spans.push_back(TargetSpan{reinterpret_cast<uint64_t>(b->mr->addr()), b->bytes});
          span_buf.push_back(b.get());
        }
      }
      const SlotCheck chk = check_slot_header(slot, st.mine.payload_bytes(), src, seq, spans);
      if (!chk.ok) {
        // A source that writes garbage is not trusted with our memory again: the rest is dropped.
        const std::string why = "rank " + std::to_string(rank) + " refused " + chk.error;
        RWIN_LOG(Warn, Core, "rwin: %s", why.c_str());
        ps.failed = why;
        degraded = true;
        tp->fail_peer(src, why);
        st.applied_from[s] = posted;
        return st.applied_from[s] - before;
      }
      BufferState& b = *span_buf[chk.span];
      char* base = static_cast<char*>(b.mr->addr());
      LockWait lw;
      lw.in_progress = true;
      lw.buf = &b;
      add_locked(*this, base, b.bytes, chk.header.addr - reinterpret_cast<uint64_t>(base), slot + kSlotHeaderBytes,
                 chk.header.bytes, static_cast<DType>(chk.header.dtype), lw);
      st.applied_from[s]++;
      st.ack_owed[s]++;
    }
    if (st.ack_owed[s] != 0) post_staging_ack(src);
    return st.applied_from[s] - before;
  };
  st.bells.scan(st.mine, read, visit);
}

// Posts the source's "acked" word for this rank: it returns from put(Add) once it reaches its count.
void ContextImpl::post_staging_ack(int src) {
  StagingState& st = *staging;
  const size_t s = static_cast<size_t>(src);
  PeerState& ps = peers[s];
  if (st.ack_owed[s] == 0 || !ps.failed.empty()) return;
  Work w;
  w.op = Op::AtomicAdd;
  w.peer = src;
  w.rkey = st.rkeys[s].get();
  w.remote_addr = st.rkeys[s]->base() + st.layouts[s].acked_word(rank);
  w.bytes = 8;
  w.operand = st.ack_owed[s];
  Slot slot;
  slot.kind = Slot::Async;
  slot.peer = src;
  const uint32_t id = take_slot(slot);
  w.cookie = id;
  const PostResult r = tp->post(w);
  if (r == PostResult::Ok) {
    st.ack_owed[s] = 0;
    ps.outstanding++;
    ps.unflushed = true;
    return;
  }
  free_slots.push_back(id);  // PeerFailed: nobody waits for it
  if (r == PostResult::PeerFailed) {
    if (ps.failed.empty()) ps.failed = tp->peer_error(src);
  } else if (!st.ack_queued[s]) {  // Busy: the next progress() retries
    st.ack_queued[s] = 1;
    st.ack_retry.push_back(src);
  }
}

}  // namespace rwin
