#include "common/page_alloc.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "common/knobs.h"

#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << 26)  // MAP_HUGE_SHIFT 26, log2(2 MiB)
#endif

namespace rwin::pages {

HugeMode huge_mode_from_env() {
  const char* v = knobs::env("RWIN_HUGEPAGES");
  if (v == nullptr) return HugeMode::Auto;
  const std::string s = v;
  if (s == "off") return HugeMode::Off;
  if (s == "thp") return HugeMode::Thp;
  if (s == "hugetlbfs") return HugeMode::Hugetlbfs;
  if (s == "auto") return HugeMode::Auto;
  throw std::invalid_argument("RWIN_HUGEPAGES='" + s + "' is not one of off, thp, hugetlbfs, auto");
}

const char* huge_mode_name(HugeMode m) noexcept {
  switch (m) {
    case HugeMode::Off: return "off";
    case HugeMode::Thp: return "thp";
    case HugeMode::Hugetlbfs: return "hugetlbfs";
    case HugeMode::Auto: return "auto";
  }
  return "?";
}

namespace {
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
// Faults every page in (and zeroes heap memory) before it is registered, as the transport always did.
void populate(void* p, size_t n) { std::memset(p, 0, n); }
}  // namespace

PageBuffer::PageBuffer(size_t bytes, HugeMode mode) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes == 0) bytes = 1;
  if (mode == HugeMode::Auto) mode = bytes >= kHugePage ? HugeMode::Thp : HugeMode::Off;
  std::string why;
  if (mode == HugeMode::Hugetlbfs) {
    const size_t len = round_up(bytes, kHugePage);
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);
    if (p != MAP_FAILED) {
      addr_ = p;
      len_ = len;
      kind_ = "hugetlbfs";
      populate(addr_, len_);
      return;
    }
    why = errno == ENOMEM ? " (no hugetlbfs 2 MiB pages reserved: vm.nr_hugepages)" : " (MAP_HUGETLB failed)";
    mode = HugeMode::Thp;
  }
  if (mode == HugeMode::Thp) {
    // Over-map by one huge page and trim both ends so the buffer starts on a 2 MiB boundary: only
    // whole, aligned 2 MiB ranges can be backed by a huge page.
    const size_t len = round_up(bytes, kHugePage);
    void* raw = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap of " + std::to_string(len) + " bytes");
    const auto a = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t start = round_up(a, kHugePage);
    if (start > a) munmap(raw, start - a);
    if (a + len + kHugePage > start + len) munmap(reinterpret_cast<void*>(start + len), a + len + kHugePage - start - len);
    addr_ = reinterpret_cast<void*>(start);
    len_ = len;
    kind_ = madvise(addr_, len_, MADV_HUGEPAGE) == 0 ? "thp" + why : "4k (madvise(MADV_HUGEPAGE) refused: no THP)" + why;
    populate(addr_, len_);
    return;
  }
  const size_t len = round_up(bytes, page);
  void* p = nullptr;
  if (int rc = posix_memalign(&p, page, len); rc != 0) {
    throw std::system_error(rc, std::generic_category(), "allocating " + std::to_string(len) + " bytes");
  }
  // The heap, as before this knob: small regions on their own 4 KiB mmap made rxe (Linux 6.1, guest)
  // fail loopback atomics and writes with local protection / local QP operation errors (cause not
  // found; the same regions from posix_memalign, or 2 MiB mmap'd ones, pass).
  heap_ = true;
  if (len >= kHugePage) (void)madvise(p, len, MADV_NOHUGEPAGE);  // best effort: 4 KiB pages where THP is "always"
  addr_ = p;
  len_ = len;
  kind_ = "4k";
  populate(addr_, len_);
}

void PageBuffer::release() noexcept {
  if (addr_ == nullptr) return;
  if (heap_) {
    std::free(addr_);
  } else {
    munmap(addr_, len_);
  }
  addr_ = nullptr;
}

PageBuffer::~PageBuffer() { release(); }

PageBuffer::PageBuffer(PageBuffer&& o) noexcept
    : addr_(std::exchange(o.addr_, nullptr)), len_(std::exchange(o.len_, 0)), heap_(o.heap_), kind_(std::move(o.kind_)) {}

PageBuffer& PageBuffer::operator=(PageBuffer&& o) noexcept {
  if (this != &o) {
    release();
    addr_ = std::exchange(o.addr_, nullptr);
    len_ = std::exchange(o.len_, 0);
    heap_ = o.heap_;
    kind_ = std::move(o.kind_);
  }
  return *this;
}

std::string system_text() {
  std::ostringstream out;
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  out << "THP " << (std::getline(thp, line) ? line : std::string("not available"));
  std::ifstream mi("/proc/meminfo");
  std::string total = "?", free = "?", size = "?";
  while (std::getline(mi, line)) {
    std::istringstream ls(line);
    std::string k, v;
    ls >> k >> v;
    if (k == "HugePages_Total:") total = v;
    if (k == "HugePages_Free:") free = v;
    if (k == "Hugepagesize:") size = v + " kB";
  }
  out << "; hugetlbfs pages (" << size << "): " << free << " free of " << total;
  return out.str();
}

}  // namespace rwin::pages
