// The registration cache (core/src/reg_cache.h): its bookkeeping against a fake registrar that
// records every register and deregister, and its staleness guarantee against real memory
// unmapped and mapped again (libucm's VM_UNMAPPED hooks), also from another thread.
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "reg_cache.h"
#include "rwin/rwin.h"

namespace rt = rwin::transport;
using rwin::RegCache;
namespace rd = rwin::reg_cache_detail;

namespace {

const uintptr_t kPage = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));

// What the fake registrar saw, in order.
struct Calls {
  struct Reg {
    uintptr_t addr;
    size_t bytes;
    uint64_t word;  // the first 8 bytes of the memory at registration (real-memory tests)
    int id;
  };
  std::vector<Reg> regs;
  std::vector<int> deregs;  // ids
  bool read_memory = false;
  bool deregistered(int id) const { return std::find(deregs.begin(), deregs.end(), id) != deregs.end(); }
};

class FakeRegion final : public rt::MemoryRegion {
 public:
  FakeRegion(Calls* c, void* a, size_t n, int id, uint64_t word) : calls_(c), id_(id), word_(word) {
    addr_ = a;
    bytes_ = n;
  }
  ~FakeRegion() override { calls_->deregs.push_back(id_); }
  std::vector<uint8_t> packed_key() const override { throw rt::TransportError("local only"); }
  int id() const { return id_; }
  uint64_t word() const { return word_; }

 private:
  Calls* calls_;
  int id_;
  uint64_t word_;
};

RegCache::Registrar fake(Calls& c) {
  return [&c](void* a, size_t n) -> std::unique_ptr<rt::MemoryRegion> {
    const uint64_t w = c.read_memory ? *static_cast<volatile uint64_t*>(a) : 0;
    const int id = static_cast<int>(c.regs.size());
    c.regs.push_back({reinterpret_cast<uintptr_t>(a), n, w, id});
    return std::make_unique<FakeRegion>(&c, a, n, id, w);
  };
}

int id_of(const rt::MemoryRegion* r) { return static_cast<const FakeRegion*>(r)->id(); }

// Addresses for the bookkeeping tests: a reserved, inaccessible range of our own, so no unmap
// elsewhere in the process can overlap it (the fake registrar never touches it).
struct Arena {
  static constexpr size_t kPages = 256;
  char* base = nullptr;
  Arena() {
    void* p = mmap(nullptr, kPages * kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap arena");
    base = static_cast<char*>(p);
  }
  ~Arena() { munmap(base, kPages * kPage); }
  char* page(size_t i) const { return base + i * kPage; }
};

// Bookkeeping tests cache even where the hooks are missing (tests/sanitizers.sh's TSan run turns
// them off): they exercise the logic, not the staleness guarantee.
RegCache::Config logic_config() {
  RegCache::Config c;
  c.cache = 1;
  c.trust_without_hooks = true;
  return c;
}

// Real-memory tests: the cache only as the core gets it, caching because the hooks are there.
RegCache::Config hooked_config(size_t max_entries = 1024) {
  RegCache::Config c;
  c.cache = 1;
  c.max_entries = max_entries;
  return c;
}

#define REQUIRE_HOOKS()                                                                          \
  do {                                                                                           \
    if (!rd::hooks_installed()) GTEST_SKIP() << "libucm memory hooks unavailable in this process"; \
  } while (0)

TEST(RegCache, HitCostsNoRegistration) {
  Arena ar;
  Calls c;
  RegCache rc(fake(c), logic_config());
  ASSERT_TRUE(rc.caching());
  const auto* r1 = rc.acquire(ar.page(3) + 10, 100);
  ASSERT_EQ(c.regs.size(), 1u);
  // The page-rounded range.
  EXPECT_EQ(c.regs[0].addr, reinterpret_cast<uintptr_t>(ar.page(3)));
  EXPECT_EQ(c.regs[0].bytes, kPage);
  EXPECT_EQ(r1->addr(), ar.page(3));
  EXPECT_EQ(r1->bytes(), kPage);
  const auto* r2 = rc.acquire(ar.page(3) + 10, 100);   // last hit
  const auto* r3 = rc.acquire(ar.page(3), kPage);      // same page
  EXPECT_EQ(r1, r2);
  EXPECT_EQ(r1, r3);
  EXPECT_EQ(c.regs.size(), 1u);
  rc.release(r1);
  rc.release(r2);
  rc.release(r3);
  EXPECT_TRUE(c.deregs.empty()) << "an idle entry stays cached";
  // A map hit (not the last one).
  const auto* other = rc.acquire(ar.page(10), 3 * kPage);
  rc.release(other);
  const auto* again = rc.acquire(ar.page(3) + 100, 8);
  EXPECT_EQ(again, r1);
  rc.release(again);
  EXPECT_EQ(c.regs.size(), 2u);
  EXPECT_EQ(rc.stats().hits, 3u);
  EXPECT_EQ(rc.stats().misses, 2u);
  EXPECT_EQ(rc.entries(), 2u);
  EXPECT_EQ(rc.pinned_bytes(), 4 * kPage);
}

TEST(RegCache, HitsCostNanoseconds) {
  Arena ar;
  Calls c;
  RegCache rc(fake(c), logic_config());
  for (size_t i = 0; i < 64; ++i) rc.release(rc.acquire(ar.page(i * 2), 100));
  constexpr int kIters = 1000000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) rc.release(rc.acquire(ar.page(8) + (i & 1023), 64));  // last hit
  auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) rc.release(rc.acquire(ar.page((static_cast<size_t>(i) * 7 % 64) * 2), 64));  // map hits
  auto t2 = std::chrono::steady_clock::now();
  const double last_ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / kIters;
  const double map_ns = std::chrono::duration<double, std::nano>(t2 - t1).count() / kIters;
  std::printf("[ info ] acquire+release: last hit %.1f ns, map hit among 64 entries %.1f ns\n", last_ns, map_ns);
  EXPECT_EQ(c.regs.size(), 64u);
  EXPECT_LT(map_ns, 2000.0);  // loose: sanitizer builds and a busy host
}

TEST(RegCache, RangeStraddlingPagesAndZeroLength) {
  Arena ar;
  Calls c;
  RegCache rc(fake(c), logic_config());
  const auto* r = rc.acquire(ar.page(5) - 1, 2);  // last byte of page 4, first of page 5
  EXPECT_EQ(c.regs[0].addr, reinterpret_cast<uintptr_t>(ar.page(4)));
  EXPECT_EQ(c.regs[0].bytes, 2 * kPage);
  rc.release(r);
  const auto* z = rc.acquire(ar.page(20), 0);  // counts as one byte
  EXPECT_EQ(c.regs[1].bytes, kPage);
  rc.release(z);
}

TEST(RegCache, OverlapMergesIntoOneEntry) {
  Arena ar;
  Calls c;
  RegCache rc(fake(c), logic_config());
  rc.release(rc.acquire(ar.page(10), 2 * kPage));  // [10, 12)
  rc.release(rc.acquire(ar.page(14), 2 * kPage));  // [14, 16)
  ASSERT_EQ(rc.entries(), 2u);
  // [11, 15) overlaps both: one registration of [10, 16) replaces them.
  const auto* m = rc.acquire(ar.page(11), 4 * kPage);
  ASSERT_EQ(c.regs.size(), 3u);
  EXPECT_EQ(c.regs[2].addr, reinterpret_cast<uintptr_t>(ar.page(10)));
  EXPECT_EQ(c.regs[2].bytes, 6 * kPage);
  EXPECT_TRUE(c.deregistered(0));
  EXPECT_TRUE(c.deregistered(1));
  EXPECT_EQ(rc.entries(), 1u);
  EXPECT_EQ(rc.pinned_bytes(), 6 * kPage);
  // Everything inside is a hit now.
  EXPECT_EQ(rc.acquire(ar.page(15) + 7, 100), m);
  rc.release(m);
  rc.release(m);
  // Adjacent (not overlapping) ranges stay separate entries.
  rc.release(rc.acquire(ar.page(16), kPage));
  EXPECT_EQ(rc.entries(), 2u);
}

TEST(RegCache, OverlappingABusyEntryKeepsItUntilReleased) {
  Arena ar;
  Calls c;
  RegCache rc(fake(c), logic_config());
  const auto* busy = rc.acquire(ar.page(10), 2 * kPage);
  const auto* wide = rc.acquire(ar.page(11), 4 * kPage);  // [10, 15)
  EXPECT_NE(busy, wide);
  EXPECT_FALSE(c.deregistered(id_of(busy))) << "in use by an op in flight";
  EXPECT_EQ(rc.entries(), 1u);
  EXPECT_EQ(rc.acquire(ar.page(10), 8), wide) << "lookups find the new entry";
  const int busy_id = id_of(busy);
  rc.release(wide);
  rc.release(busy);
  EXPECT_TRUE(c.deregistered(busy_id));
  EXPECT_FALSE(c.deregistered(id_of(wide)));
  rc.release(wide);
}

TEST(RegCache, DeregisterDropsTheEntryContainingThePointer) {
  Arena ar;
  Calls c;
  RegCache rc(fake(c), logic_config());
  rc.release(rc.acquire(ar.page(10), 3 * kPage));
  rc.release(rc.acquire(ar.page(20), kPage));
  rc.deregister(ar.page(9));          // outside: nothing
  rc.deregister(ar.page(13));         // just past the end: nothing
  EXPECT_TRUE(c.deregs.empty());
  rc.deregister(ar.page(12) + 5);     // inside the first
  EXPECT_EQ(c.deregs, std::vector<int>{0});
  EXPECT_EQ(rc.entries(), 1u);
  rc.release(rc.acquire(ar.page(10), 8));
  EXPECT_EQ(c.regs.size(), 3u) << "registered again after deregister";
  // A pinned entry is dropped from the cache now and deregistered at its release.
  const auto* busy = rc.acquire(ar.page(20), 8);
  rc.deregister(ar.page(20));
  EXPECT_FALSE(c.deregistered(id_of(busy)));
  EXPECT_EQ(rc.entries(), 1u);
  const int busy_id = id_of(busy);
  rc.release(busy);
  EXPECT_TRUE(c.deregistered(busy_id));
}

TEST(RegCache, EvictsLeastRecentlyUsedAndSkipsBusyEntries) {
  Arena ar;
  Calls c;
  auto cfg = logic_config();
  cfg.max_entries = 2;
  RegCache rc(fake(c), cfg);
  rc.release(rc.acquire(ar.page(0), 8));  // id 0
  rc.release(rc.acquire(ar.page(2), 8));  // id 1
  rc.release(rc.acquire(ar.page(0), 8));  // hit: 0 is the most recent now
  rc.release(rc.acquire(ar.page(4), 8));  // id 2: evicts 1
  EXPECT_EQ(c.deregs, std::vector<int>{1});
  EXPECT_EQ(rc.stats().evictions, 1u);
  // Both cached entries busy: a third entry exceeds the bound until they are released.
  const auto* a = rc.acquire(ar.page(0), 8);
  const auto* b = rc.acquire(ar.page(4), 8);
  const auto* d = rc.acquire(ar.page(6), 8);  // id 3
  EXPECT_EQ(rc.entries(), 3u);
  EXPECT_EQ(c.deregs.size(), 1u) << "nothing idle to evict";
  rc.release(d);  // 3 is idle but the most recent; 0 and 4 are busy: 3 goes
  EXPECT_EQ(rc.entries(), 2u);
  EXPECT_TRUE(c.deregistered(3));
  rc.release(a);
  rc.release(b);
  EXPECT_EQ(rc.entries(), 2u);
}

TEST(RegCache, EvictsForTheByteBound) {
  Arena ar;
  Calls c;
  auto cfg = logic_config();
  cfg.max_bytes = 4 * kPage;
  RegCache rc(fake(c), cfg);
  rc.release(rc.acquire(ar.page(0), 2 * kPage));   // id 0
  rc.release(rc.acquire(ar.page(10), 2 * kPage));  // id 1
  EXPECT_TRUE(c.deregs.empty());
  rc.release(rc.acquire(ar.page(20), kPage));      // id 2: 5 pages > 4: 0 goes
  EXPECT_EQ(c.deregs, std::vector<int>{0});
  EXPECT_EQ(rc.pinned_bytes(), 3 * kPage);
}

TEST(RegCache, BusyEntriesSurviveInvalidationUntilReleased) {
  Arena ar;
  Calls c;
  RegCache rc(fake(c), logic_config());
  const auto* busy = rc.acquire(ar.page(10), 2 * kPage);
  rc.release(rc.acquire(ar.page(30), kPage));
  rd::log_unmapped(ar.page(11), 10);  // as the hook would: part of the busy entry
  rd::log_unmapped(ar.page(30), kPage);
  const auto* other = rc.acquire(ar.page(50), 8);  // applies the log
  EXPECT_TRUE(c.deregistered(1)) << "idle invalidated entry deregistered at once";
  EXPECT_FALSE(c.deregistered(id_of(busy))) << "busy entry kept for its op";
  EXPECT_EQ(rc.stats().invalidations, 2u);
  const int busy_id = id_of(busy);
  rc.release(busy);  // destroys it: `busy` dangles from here
  EXPECT_TRUE(c.deregistered(busy_id));
  const auto* fresh = rc.acquire(ar.page(10), 8);
  EXPECT_EQ(c.regs.back().addr, reinterpret_cast<uintptr_t>(ar.page(10)));
  EXPECT_NE(id_of(fresh), busy_id);
  rc.release(fresh);
  rc.release(other);
}

TEST(RegCache, FallingARingBehindDropsEverything) {
  Arena ar;
  Calls c;
  RegCache rc(fake(c), logic_config());
  rc.release(rc.acquire(ar.page(10), 8));
  rc.release(rc.acquire(ar.page(20), 8));
  for (int i = 0; i < 5000; ++i) rd::log_unmapped(ar.page(100), 8);  // unrelated, but too many
  rc.release(rc.acquire(ar.page(10), 8));
  EXPECT_EQ(rc.stats().log_overflows, 1u);
  EXPECT_TRUE(c.deregistered(0));
  EXPECT_TRUE(c.deregistered(1));
  EXPECT_EQ(c.regs.size(), 3u);
  EXPECT_EQ(rc.entries(), 1u);
}

TEST(RegCache, RegistrarFailureLeavesTheCacheAsItWas) {
  Arena ar;
  Calls c;
  bool fail = false;
  auto inner = fake(c);
  RegCache rc([&](void* a, size_t n) -> std::unique_ptr<rt::MemoryRegion> {
                if (fail) throw rt::TransportError("no");
                return inner(a, n);
              },
              logic_config());
  rc.release(rc.acquire(ar.page(10), 8));
  fail = true;
  EXPECT_THROW(rc.acquire(ar.page(10), 2 * kPage), rt::TransportError);  // would replace entry 0
  EXPECT_TRUE(c.deregs.empty());
  EXPECT_EQ(rc.entries(), 1u);
  fail = false;
  rc.release(rc.acquire(ar.page(10), 8));
  EXPECT_EQ(c.regs.size(), 1u);
}

TEST(RegCache, ForcedOffRegistersPerOperation) {
  Arena ar;
  Calls c;
  RegCache::Config cfg;
  cfg.cache = 0;
  RegCache rc(fake(c), cfg);
  EXPECT_FALSE(rc.caching());
  const auto* a = rc.acquire(ar.page(10) + 3, 100);
  const auto* b = rc.acquire(ar.page(10) + 3, 100);
  EXPECT_NE(a, b);
  EXPECT_EQ(c.regs.size(), 2u);
  EXPECT_EQ(rc.entries(), 0u);
  rc.release(a);
  EXPECT_EQ(c.deregs, std::vector<int>{0});
  rc.deregister(ar.page(10));  // nothing cached: no effect on b
  EXPECT_EQ(c.deregs.size(), 1u);
  rc.release(b);
  EXPECT_EQ(c.deregs, (std::vector<int>{0, 1}));
}

TEST(RegCache, EnvironmentVariableForcesPerOperation) {
  ASSERT_EQ(setenv("RWIN_REG_CACHE", "0", 1), 0);
  Calls c;
  {
    RegCache rc(fake(c));
    EXPECT_FALSE(rc.caching());
  }
  ASSERT_EQ(setenv("RWIN_REG_CACHE", "2", 1), 0);
  EXPECT_THROW({ RegCache rc(fake(c)); }, rwin::Error);
  ASSERT_EQ(setenv("RWIN_REG_CACHE", "1", 1), 0);
  {
    RegCache rc(fake(c));
    EXPECT_EQ(rc.caching(), rd::hooks_installed());
  }
  unsetenv("RWIN_REG_CACHE");
}

// ---- real memory: the hooks ----

char* map_pages(size_t pages, void* at = nullptr, uint64_t word = 0) {
  void* p = mmap(at, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap");
  for (size_t i = 0; i < pages; ++i) std::memcpy(static_cast<char*>(p) + i * kPage, &word, 8);  // every page
  return static_cast<char*>(p);
}

TEST(RegCacheHooks, MunmapThenMmapAtTheSameAddressRegistersAgain) {
  REQUIRE_HOOKS();
  Calls c;
  c.read_memory = true;
  RegCache rc(fake(c), hooked_config());
  ASSERT_TRUE(rc.caching());
  char* p = map_pages(4, nullptr, 111);
  const auto* r1 = rc.acquire(p + 100, 3 * kPage);
  rc.release(r1);
  rc.release(rc.acquire(p, 8));
  ASSERT_EQ(c.regs.size(), 1u);
  ASSERT_EQ(munmap(p, 4 * kPage), 0);
  char* q = map_pages(4, p, 222);
  ASSERT_EQ(q, p);
  const auto* r2 = rc.acquire(p + 100, 3 * kPage);
  ASSERT_EQ(c.regs.size(), 2u) << "a stale registration was served";
  EXPECT_TRUE(c.deregistered(0));
  EXPECT_EQ(static_cast<const FakeRegion*>(r2)->word(), 222u);
  rc.release(r2);
  EXPECT_GE(rc.stats().invalidations, 1u);
  munmap(q, 4 * kPage);
}

TEST(RegCacheHooks, MapFixedOverAMappingInvalidates) {
  REQUIRE_HOOKS();
  Calls c;
  c.read_memory = true;
  RegCache rc(fake(c), hooked_config());
  char* p = map_pages(2, nullptr, 1);
  rc.release(rc.acquire(p, 2 * kPage));
  map_pages(1, p + kPage, 2);  // replaces the second page without a munmap
  const auto* r = rc.acquire(p, 2 * kPage);
  EXPECT_EQ(c.regs.size(), 2u);
  EXPECT_TRUE(c.deregistered(0));
  rc.release(r);
  munmap(p, 2 * kPage);
}

TEST(RegCacheHooks, PartialMunmapAndMadviseInvalidate) {
  REQUIRE_HOOKS();
  Calls c;
  RegCache rc(fake(c), hooked_config());
  char* p = map_pages(8);
  rc.release(rc.acquire(p, 2 * kPage));             // id 0: pages 0-1
  rc.release(rc.acquire(p + 4 * kPage, 2 * kPage)); // id 1: pages 4-5
  rc.release(rc.acquire(p + 7 * kPage, kPage));     // id 2: page 7
  ASSERT_EQ(munmap(p + kPage, kPage), 0);           // one page of entry 0
  ASSERT_EQ(madvise(p + 5 * kPage, kPage, MADV_DONTNEED), 0);  // the pages are replaced by zero pages
  rc.release(rc.acquire(p + 7 * kPage, 8));         // applies the log
  EXPECT_TRUE(c.deregistered(0)) << "munmap of part of an entry";
  EXPECT_TRUE(c.deregistered(1)) << "madvise(MADV_DONTNEED)";
  EXPECT_FALSE(c.deregistered(2)) << "untouched entry stays";
  munmap(p, 8 * kPage);
}

TEST(RegCacheHooks, MremapAndShmdtInvalidate) {
  REQUIRE_HOOKS();
  Calls c;
  RegCache rc(fake(c), hooked_config());
  char* p = map_pages(2);
  rc.release(rc.acquire(p, 2 * kPage));  // id 0
  // Grown and moved (a reserved hole right after it forces the move): the old range is gone.
  char* hole = static_cast<char*>(mmap(p + 2 * kPage, kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0));
  void* q = mremap(p, 2 * kPage, 8 * kPage, MREMAP_MAYMOVE);
  ASSERT_NE(q, MAP_FAILED);
  const int id = shmget(IPC_PRIVATE, 2 * kPage, IPC_CREAT | 0600);
  ASSERT_GE(id, 0);
  void* sh = shmat(id, nullptr, 0);
  shmctl(id, IPC_RMID, nullptr);
  ASSERT_NE(sh, reinterpret_cast<void*>(-1));
  rc.release(rc.acquire(sh, 2 * kPage));  // id 1; applies the mremap
  EXPECT_TRUE(c.deregistered(0)) << "mremap moved the memory away";
  ASSERT_EQ(shmdt(sh), 0);
  rc.release(rc.acquire(q, 8));
  EXPECT_TRUE(c.deregistered(1)) << "shmdt";
  munmap(q, 8 * kPage);
  if (hole != MAP_FAILED) munmap(hole, kPage);
}

TEST(RegCacheHooks, FreeOfALargeMallocBlockInvalidates) {
  REQUIRE_HOOKS();
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizer runtimes' allocators map and unmap large blocks with raw system calls no hook
  // sees (TSan's gives the same address back at once: this test then finds the stale entry). A
  // documented limit (docs/ARCHITECTURE.md, "Not seen by the hooks"), not a cache bug.
  GTEST_SKIP() << "sanitizer allocator: large blocks are unmapped by raw system calls, unseen by libucm";
#endif
  Calls c;
  RegCache rc(fake(c), hooked_config());
  // Above glibc's largest dynamic mmap threshold (32 MiB): always its own mapping, unmapped by free.
  constexpr size_t kBig = 64u << 20;
  for (int round = 0; round < 3; ++round) {
    void* m = std::malloc(kBig);
    ASSERT_NE(m, nullptr);
    static_cast<char*>(m)[0] = 1;
    const size_t before = c.regs.size();
    const auto* r = rc.acquire(m, kBig);
    ASSERT_EQ(c.regs.size(), before + 1) << "round " << round << ": the previous block's entry was reused";
    rc.release(r);
    std::free(m);
    // The next round's malloc usually returns the same address: a hit there would be stale.
  }
  rc.release(rc.acquire(&c, 1));  // applies the last free
  EXPECT_EQ(c.deregs.size(), 3u) << "glibc's free of an mmapped block is a munmap";
  // A smaller block glibc may serve from the heap: a free that does not unmap leaves the pages
  // mapped (the registration stays correct); whatever free unmapped is invalidated.
  void* s = std::malloc(1 << 20);
  const auto* r = rc.acquire(s, 1 << 20);
  rc.release(r);
  std::free(s);
  malloc_trim(0);
  void* s2 = std::malloc(1 << 20);
  std::memset(s2, 0, 1 << 20);
  rc.release(rc.acquire(s2, 1 << 20));
  std::free(s2);
}

TEST(RegCacheHooks, HeapShrinkInvalidates) {
  REQUIRE_HOOKS();
  // glibc's free trims the top of the main heap with sbrk(-n) (brk): VM_UNMAPPED too.
  Calls c;
  RegCache rc(fake(c), hooked_config());
  std::vector<void*> blocks;
  for (int i = 0; i < 32; ++i) blocks.push_back(std::malloc(100000));  // below the mmap threshold
  char* last = static_cast<char*>(blocks.back());
  if (reinterpret_cast<char*>(sbrk(0)) < last || reinterpret_cast<char*>(sbrk(0)) - last > (1 << 20)) {
    for (void* b : blocks) std::free(b);
    GTEST_SKIP() << "malloc does not serve these blocks from the top of a brk heap (sanitizer allocator?)";
  }
  rc.release(rc.acquire(last, 100000));
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) std::free(*it);
  malloc_trim(0);
  if (reinterpret_cast<char*>(sbrk(0)) > last) GTEST_SKIP() << "the heap did not shrink below the block";
  rc.release(rc.acquire(&c, 1));
  EXPECT_TRUE(c.deregistered(0)) << "heap trimmed below a cached range";
}

// Another thread unmaps and maps again while this one acquires: every acquire must return the
// registration of the memory mapped now (the fake registrar records its first word, a generation
// number written by whoever mapped it). A slot's mutex orders the two threads' use of that slot,
// as a program's own synchronisation would; the cache itself is only used by this thread.
#if defined(__SANITIZE_THREAD__)
// libucm's madvise hook takes a pthread rwlock, and glibc madvises an exiting thread's stack after
// TSan has torn down that thread's state: TSan's rwlock interceptor then crashes (why
// tests/sanitizers.sh runs with UCX_MEM_MMAP_HOOK_MODE=none). Under TSan the unmapper thread parks
// instead of exiting, so this test can run with the hooks on.
constexpr bool kPark = true;
#else
constexpr bool kPark = false;
#endif

TEST(RegCacheHooks, ConcurrentUnmapsNeverLeaveAStaleEntry) {
  REQUIRE_HOOKS();
  constexpr int kSlots = 8;
  constexpr size_t kSlotPages = 4;
  struct Slot {
    std::mutex m;
    char* p = nullptr;
    uint64_t gen = 0;
  };
  std::vector<Slot> slots(kSlots);
  uint64_t next_gen = 1;
  for (auto& s : slots) {
    s.gen = next_gen++;
    s.p = map_pages(kSlotPages, nullptr, s.gen);
  }
  Calls c;
  c.read_memory = true;
  RegCache rc(fake(c), hooked_config(4));  // small: evictions too
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> remaps{0};
  auto finished = std::make_shared<std::atomic<bool>>(false);  // outlives the test (see kPark)
  std::thread unmapper([&, finished] {
    std::mt19937 rng(7);
    uint64_t gen = 1000000;
    while (!stop.load(std::memory_order_relaxed)) {
      Slot& s = slots[rng() % kSlots];
      {
        std::lock_guard<std::mutex> g(s.m);
        if (rng() % 2) {
          munmap(s.p, kSlotPages * kPage);
          map_pages(kSlotPages, s.p, ++gen);  // same address
        } else {
          map_pages(kSlotPages, s.p, ++gen);  // MAP_FIXED over it
        }
        s.gen = gen;
      }
      // Unrelated unmaps too: the log fills with records that concern nobody.
      void* junk = std::malloc(200000 + rng() % 100000);
      std::free(junk);
      remaps.fetch_add(1, std::memory_order_relaxed);
    }
    finished->store(true);  // nothing of the test's frame is touched after this
    if (kPark) {
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }
  });
  std::mt19937 rng(11);
  uint64_t checked = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < until || remaps.load() < 100) {
    Slot& s = slots[rng() % kSlots];
    std::lock_guard<std::mutex> g(s.m);
    const size_t off = (rng() % kSlotPages) * kPage + rng() % 64;
    const auto* r = rc.acquire(s.p + off, 1 + rng() % (kPage / 2));
    const auto* f = static_cast<const FakeRegion*>(r);
    const bool fresh = f->word() == s.gen;
    rc.release(r);
    if (!fresh) {
      ADD_FAILURE() << "stale registration (generation " << f->word() << ", memory holds " << s.gen << ") after "
                    << remaps.load() << " remaps";
      break;
    }
    ++checked;
  }
  stop = true;
  if (kPark) {
    while (!finished->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    unmapper.detach();
  } else {
    unmapper.join();
  }
  EXPECT_GT(checked, 100u);
  EXPECT_GT(rc.stats().hits, 0u);
  EXPECT_GT(rc.stats().invalidations, 0u);
  for (auto& s : slots) munmap(s.p, kSlotPages * kPage);
  std::printf("[ info ] %lu acquires, %lu remaps, %lu hits, %lu invalidations, %lu overflows\n",
              static_cast<unsigned long>(checked), static_cast<unsigned long>(remaps.load()),
              static_cast<unsigned long>(rc.stats().hits), static_cast<unsigned long>(rc.stats().invalidations),
              static_cast<unsigned long>(rc.stats().log_overflows));
}

}  // namespace
