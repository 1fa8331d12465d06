// The registration cache (reg_cache.h) and the process-wide unmap log its entries are checked
// against.
//
// The log: libucm calls on_unmapped() before memory leaves the address space (VM_UNMAPPED is a
// "pre" event), from the thread that unmaps, possibly inside our own ibv_reg_mr/ibv_dereg_mr or
// inside malloc/free holding glibc's arena lock. So the hook only appends: it claims a sequence
// number (one fetch_add on `head`), then writes its slot as a seqlock (stamp 0, range, stamp seq+1).
// No lock, no allocation, no call into the cache. A cache keeps the sequence number it has applied
// up to; acquire() compares it with `head` (one atomic load when nothing was unmapped) and applies
// the new records. A record whose writer is still between its fetch_add and its last store is
// waited for (the writer is running a few stores, in another thread: it is not waiting for us).
// A cache that fell more than kRing records behind, or finds its record overwritten, drops every
// entry: correct, just a cold cache.
#include "reg_cache.h"

#include <sched.h>
#include <sys/mman.h>
#include <ucm/api/ucm.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"

namespace rwin {
namespace reg_cache_detail {
namespace {

constexpr uint64_t kRing = 4096;

struct Slot {
  std::atomic<uint64_t> stamp{0};  // seq + 1 when the record `seq` is complete, 0 while written
  std::atomic<uintptr_t> addr{0};
  std::atomic<uintptr_t> len{0};
};

// Static storage with constant initialisation and trivial destruction: the hook stays valid for
// the whole life of the process (it is never removed: libucm may call it during exit).
struct Log {
  std::atomic<uint64_t> head{0};  // records claimed so far
  Slot slots[kRing];
};
constinit Log g_log;

void append(uintptr_t a, uintptr_t n) noexcept {
  const uint64_t s = g_log.head.fetch_add(1, std::memory_order_acq_rel);
  Slot& sl = g_log.slots[s % kRing];
  sl.stamp.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  sl.addr.store(a, std::memory_order_relaxed);
  sl.len.store(n, std::memory_order_relaxed);
  sl.stamp.store(s + 1, std::memory_order_release);
}

// Reads record `s` (s < head). False: it was overwritten (the reader fell a ring behind).
bool read_record(uint64_t s, uintptr_t& a, uintptr_t& n) noexcept {
  Slot& sl = g_log.slots[s % kRing];
  for (;;) {
    const uint64_t st = sl.stamp.load(std::memory_order_acquire);
    if (st == s + 1) {
      a = sl.addr.load(std::memory_order_relaxed);
      n = sl.len.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      return sl.stamp.load(std::memory_order_relaxed) == s + 1;
    }
    if (st > s + 1) return false;
    // 0 or an older record: a writer between its fetch_add and its last store. Ours, or one that
    // lapped us (then head is more than a ring ahead).
    if (g_log.head.load(std::memory_order_acquire) - s > kRing) return false;
    sched_yield();
  }
}

void on_unmapped(ucm_event_type_t type, ucm_event_t* ev, void*) {
  if (type != UCM_EVENT_VM_UNMAPPED) return;
  append(reinterpret_cast<uintptr_t>(ev->vm_unmapped.address), ev->vm_unmapped.size);
}

bool g_hooks = false;
std::once_flag g_install_once;

void ignore_event(ucm_event_type_t, ucm_event_t*, void*) {}

// Which of the calls behind VM_UNMAPPED libucm's own self-test finds hooked, one by one ("munmap ok,
// mremap Unsupported operation, ..."): what a failed install says, since libucm's reason is a
// diag-level line of its own log.
std::string probe_unmap_events() {
  static const std::pair<ucm_event_type_t, const char*> kEvents[] = {
      {UCM_EVENT_MUNMAP, "munmap"}, {UCM_EVENT_MREMAP, "mremap"},   {UCM_EVENT_SHMDT, "shmdt"},
      {UCM_EVENT_MADVISE, "madvise"}, {UCM_EVENT_BRK, "brk"}, {UCM_EVENT_SBRK, "sbrk"}};
  std::string out;
  for (const auto& [ev, name] : kEvents) {
    const ucs_status_t s = ucm_set_event_handler(ev, 1000, ignore_event, nullptr);
    if (s == UCS_OK) ucm_unset_event_handler(ev, ignore_event, nullptr);
    out += std::string(out.empty() ? "" : ", ") + name + (s == UCS_OK ? " ok" : std::string(" ") + ucs_status_string(s));
  }
  return out;
}

void install() {
  // libucm installs its hooks, then tests them by firing each call once. One CI run in the TCG guest
  // got "Unsupported operation" in a process where every other run found the hooks working: a failed
  // test is tried twice more before the cache goes off for the process, and the log says which calls
  // libucm found hooked, one by one, after the first failure.
  ucs_status_t s = ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 1000, on_unmapped, nullptr);
  std::string one_by_one;
  int attempts = 1;
  while (s == UCS_ERR_UNSUPPORTED && attempts < 3) {
    if (one_by_one.empty()) one_by_one = probe_unmap_events();
    s = ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 1000, on_unmapped, nullptr);
    ++attempts;
  }
  if (s != UCS_OK) {
    RWIN_LOG(Warn, Core,
             "rwin: registration cache off, registering caller memory per operation: libucm memory hooks "
             "unavailable (ucm_set_event_handler(VM_UNMAPPED): %s, %d attempts; one by one: %s)",
             ucs_status_string(s), attempts, one_by_one.empty() ? "not probed" : one_by_one.c_str());
    return;
  }
  if (attempts > 1) {
    RWIN_LOG(Warn, Core, "rwin: libucm's VM_UNMAPPED hook installed at attempt %d (after the first failed, one by one: %s)",
             attempts, one_by_one.c_str());
  }
  // libucm tests its own hooks; check ours end to end: a munmap must reach the log.
  const long page = sysconf(_SC_PAGESIZE);
  void* p = mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    RWIN_LOG(Warn, Core, "rwin: registration cache off: mmap for the hook self-test failed");
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, on_unmapped, nullptr);
    return;
  }
  const uint64_t before = g_log.head.load(std::memory_order_acquire);
  munmap(p, static_cast<size_t>(page));
  const uint64_t after = g_log.head.load(std::memory_order_acquire);
  bool seen = false;
  for (uint64_t i = before; i < after && after - i <= kRing && !seen; ++i) {
    uintptr_t a = 0, n = 0;
    seen = read_record(i, a, n) && a <= reinterpret_cast<uintptr_t>(p) &&
           reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(page) <= a + n;
  }
  if (!seen) {
    RWIN_LOG(Warn, Core,
             "rwin: registration cache off, registering caller memory per operation: libucm reported its "
             "memory hooks installed but a munmap did not reach them (UCX_MEM_MMAP_HOOK_MODE?)");
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, on_unmapped, nullptr);
    return;
  }
  g_hooks = true;
}

}  // namespace

bool hooks_installed() {
  std::call_once(g_install_once, install);
  return g_hooks;
}

uint64_t log_head() { return g_log.head.load(std::memory_order_acquire); }

void log_unmapped(const void* p, size_t n) noexcept { append(reinterpret_cast<uintptr_t>(p), n); }

}  // namespace reg_cache_detail

namespace rd = reg_cache_detail;

RegCache::RegCache(Registrar registrar) : RegCache(std::move(registrar), Config{}) {}

RegCache::RegCache(Registrar registrar, Config cfg) : registrar_(std::move(registrar)), cfg_(cfg) {
  page_ = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  if (cfg_.cache < 0) cfg_.cache = reg_cache_from_env();
  caching_ = cfg_.cache != 0 && (cfg_.trust_without_hooks || rd::hooks_installed());
  // From the current head: nothing is cached yet, so older records concern nothing of ours.
  log_next_ = rd::g_log.head.load(std::memory_order_acquire);
}

RegCache::~RegCache() {
  last_ = nullptr;
  by_start_.clear();
  lru_.clear();
  all_.clear();  // deregisters every region
}

const transport::MemoryRegion* RegCache::pin(Entry* e) noexcept {
  ++e->pins;
  return e->mr.get();
}

const transport::MemoryRegion* RegCache::acquire(const void* p, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (n == 0) n = 1;
  if (a > UINTPTR_MAX - page_ || n > UINTPTR_MAX - page_ - a) {
    throw transport::TransportError("registration cache: range at " + std::to_string(a) + " of " + std::to_string(n) +
                                    " bytes wraps the address space");
  }
  const uintptr_t b = a + n;
  if (caching_) {
    if (rd::g_log.head.load(std::memory_order_acquire) != log_next_) apply_log();
    if (last_ && last_->start <= a && b <= last_->end) {  // last_ is cached and first in the LRU
      ++stats_.hits;
      return pin(last_);
    }
    auto it = by_start_.upper_bound(a);
    if (it != by_start_.begin()) {
      Entry* e = std::prev(it)->second;
      if (b <= e->end) {
        ++stats_.hits;
        lru_.splice(lru_.begin(), lru_, e->lru);
        last_ = e;
        return pin(e);
      }
    }
  }
  // Miss: the page-rounded range, widened to cover every entry it overlaps (they are replaced).
  uintptr_t ra = a & ~(page_ - 1);
  uintptr_t rb = (b + page_ - 1) & ~(page_ - 1);
  std::vector<Entry*> overlapped;
  if (caching_) {
    auto it = by_start_.upper_bound(ra);
    if (it != by_start_.begin() && std::prev(it)->second->end > ra) --it;
    for (; it != by_start_.end() && it->first < rb; ++it) overlapped.push_back(it->second);
    if (!overlapped.empty()) {
      ra = std::min(ra, overlapped.front()->start);
      rb = std::max(rb, overlapped.back()->end);
    }
  }
  ++stats_.misses;
  std::unique_ptr<transport::MemoryRegion> mr = registrar_(reinterpret_cast<void*>(ra), rb - ra);
  auto owned = std::make_unique<Entry>();
  Entry* e = owned.get();
  e->start = ra;
  e->end = rb;
  e->mr = std::move(mr);
  const transport::MemoryRegion* key = e->mr.get();
  all_.emplace(key, std::move(owned));
  pin(e);
  if (!caching_) return key;  // retired from the start: release() deregisters it
  for (Entry* o : overlapped) uncache(o);
  e->cached = true;
  by_start_.emplace(ra, e);
  lru_.push_front(e);
  e->lru = lru_.begin();
  bytes_ += rb - ra;
  last_ = e;
  // Unmapped while we registered (the caller raced its own munmap): the entry serves this one op,
  // then goes.
  if (rd::g_log.head.load(std::memory_order_acquire) != log_next_) apply_log();
  evict();
  return key;
}

void RegCache::release(const transport::MemoryRegion* r) noexcept {
  auto it = all_.find(r);
  if (it == all_.end()) return;
  Entry* e = it->second.get();
  if (e->pins > 0) --e->pins;
  if (e->pins > 0) return;
  if (!e->cached) {
    destroy(e);
  } else if (by_start_.size() > cfg_.max_entries || bytes_ > cfg_.max_bytes) {
    evict();
  }
}

void RegCache::deregister(const void* p) noexcept {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = by_start_.upper_bound(a);
  if (it == by_start_.begin()) return;
  Entry* e = std::prev(it)->second;
  if (a < e->end) uncache(e);
}

void RegCache::apply_log() noexcept {
  const uint64_t h = rd::g_log.head.load(std::memory_order_acquire);
  if (h - log_next_ > rd::kRing) {
    ++stats_.log_overflows;
    drop_all(stats_.invalidations);
    log_next_ = h;
    return;
  }
  for (uint64_t s = log_next_; s < h; ++s) {
    uintptr_t a = 0, n = 0;
    if (!rd::read_record(s, a, n)) {
      ++stats_.log_overflows;
      drop_all(stats_.invalidations);
      break;
    }
    drop_range(a, a + n < a ? UINTPTR_MAX : a + n, stats_.invalidations);
  }
  log_next_ = h;
}

void RegCache::drop_range(uintptr_t a, uintptr_t b, uint64_t& counter) noexcept {
  if (by_start_.empty() || a >= b) return;
  auto it = by_start_.upper_bound(a);
  if (it != by_start_.begin() && std::prev(it)->second->end > a) --it;
  while (it != by_start_.end() && it->first < b) {
    Entry* e = it->second;
    ++it;  // uncache erases e's node
    ++counter;
    uncache(e);
  }
}

void RegCache::drop_all(uint64_t& counter) noexcept {
  while (!by_start_.empty()) {
    ++counter;
    uncache(by_start_.begin()->second);
  }
}

void RegCache::uncache(Entry* e) noexcept {
  if (!e->cached) return;
  by_start_.erase(e->start);
  lru_.erase(e->lru);
  e->cached = false;
  bytes_ -= e->end - e->start;
  if (last_ == e) last_ = nullptr;
  if (e->pins == 0) destroy(e);
}

void RegCache::destroy(Entry* e) noexcept {
  // Erasing the owner deregisters (the region's destructor never throws: transport contract).
  const transport::MemoryRegion* key = e->mr.get();
  all_.erase(key);
}

void RegCache::evict() noexcept {
  auto it = lru_.end();
  while ((by_start_.size() > cfg_.max_entries || bytes_ > cfg_.max_bytes) && it != lru_.begin()) {
    --it;
    Entry* e = *it;
    if (e->pins > 0) continue;
    it = std::next(it);  // stays valid: only e's node is erased
    ++stats_.evictions;
    uncache(e);
  }
}

}  // namespace rwin
