// Registration cache for caller memory used as the local side of put/get (rwin::Local): one per
// Context, used by its thread only. A hit is a last-hit check or an ordered-map lookup; a miss
// registers the page-rounded range through the transport (Transport::register_memory).
//
// Staleness (docs/ARCHITECTURE.md, "Registration cache"): a registration pins the pages it saw, so
// memory unmapped and mapped again at the same address must never be served by the old entry.
// libucm's VM_UNMAPPED event (munmap, mremap, shmdt, brk/sbrk shrinking, madvise DONTNEED/FREE/
// REMOVE, the same hooks UCX's own rcache uses) appends each range to a process-wide lock-free log
// (reg_cache.cpp) from whatever thread unmaps; every acquire() first drops the entries that
// overlap new log records. Where the hooks cannot be installed, or RWIN_REG_CACHE=0, the cache
// caches nothing: acquire() registers, release() deregisters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <unordered_map>

#include "transport/transport.h"

namespace rwin {

class RegCache {
 public:
  // Registers [addr, addr + bytes) (Transport::register_memory); throws TransportError.
  using Registrar = std::function<std::unique_ptr<transport::MemoryRegion>(void* addr, size_t bytes)>;

  struct Config {
    // 1: cache (when the unmap hooks are available); 0: register per operation. -1: RWIN_REG_CACHE
    // (options.cpp; unset = 1).
    int cache = -1;
    size_t max_entries = 1024;        // idle entries beyond this are evicted, least recently used first
    size_t max_bytes = size_t{1} << 32;  // likewise for the registered (pinned) bytes of all entries
    // Tests of the bookkeeping only: cache even without the hooks (no staleness guarantee).
    bool trust_without_hooks = false;
  };

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;         // registrations made by acquire()
    uint64_t evictions = 0;      // entries dropped for max_entries / max_bytes
    uint64_t invalidations = 0;  // entries dropped because their memory was unmapped
    uint64_t log_overflows = 0;  // times the unmap log outran this cache (every entry dropped)
  };

  explicit RegCache(Registrar registrar);
  RegCache(Registrar registrar, Config cfg);
  ~RegCache();  // deregisters everything; call it with no acquire() unreleased
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  // A region covering [p, p + n) (n == 0 counts as 1), pinned: it is neither evicted nor
  // deregistered until the matching release(), even if its memory is unmapped or deregister()ed
  // meanwhile (it is then dropped at release). Throws what the registrar throws.
  const transport::MemoryRegion* acquire(const void* p, size_t n);
  // Ends one acquire() of `r` (the op that used it completed, or was abandoned).
  void release(const transport::MemoryRegion* r) noexcept;
  // Drops every cached entry containing `p` (Context::deregister): the caller is about to free or
  // remap that memory by means the hooks may not see. Pinned entries go at their release().
  void deregister(const void* p) noexcept;

  // True when entries are kept between operations (hooks installed and RWIN_REG_CACHE != 0).
  bool caching() const noexcept { return caching_; }
  size_t entries() const noexcept { return by_start_.size(); }  // cached entries, valid ones
  size_t pinned_bytes() const noexcept { return bytes_; }      // registered bytes of cached entries
  const Stats& stats() const noexcept { return stats_; }

 private:
  struct Entry {
    uintptr_t start = 0, end = 0;  // registered [start, end), page aligned
    std::unique_ptr<transport::MemoryRegion> mr;
    uint32_t pins = 0;
    bool cached = false;  // in by_start_ and lru_ (else retired: destroyed at its last release)
    std::list<Entry*>::iterator lru;
  };

  void apply_log() noexcept;
  void drop_range(uintptr_t a, uintptr_t b, uint64_t& counter) noexcept;  // entries overlapping [a, b)
  void drop_all(uint64_t& counter) noexcept;
  void uncache(Entry* e) noexcept;  // out of the map/LRU; destroyed now if idle, else at release
  void destroy(Entry* e) noexcept;
  void evict() noexcept;
  const transport::MemoryRegion* pin(Entry* e) noexcept;

  Registrar registrar_;
  Config cfg_;
  bool caching_ = false;
  uintptr_t page_ = 4096;
  uint64_t log_next_ = 0;  // next unmap-log sequence number to apply
  std::map<uintptr_t, Entry*> by_start_;  // cached entries, non-overlapping
  std::list<Entry*> lru_;                 // cached entries, most recently used first
  std::unordered_map<const transport::MemoryRegion*, std::unique_ptr<Entry>> all_;  // cached + retired
  Entry* last_ = nullptr;                 // last hit or miss (cached), checked first
  size_t bytes_ = 0;
  Stats stats_;
};

// RWIN_REG_CACHE: 1 (default) or 0; throws rwin::Error(InvalidArgument) for anything else
// (options.cpp, with every other RWIN_* variable).
int reg_cache_from_env();

namespace reg_cache_detail {
// The process-wide unmap log, for tests: whether the hooks are installed (installs them on first
// call), and the number of records appended so far.
bool hooks_installed();
uint64_t log_head();
// Appends [p, p + n) as if unmapped (what the hook does). For tests of the log's overflow.
void log_unmapped(const void* p, size_t n) noexcept;
}  // namespace reg_cache_detail

}  // namespace rwin
