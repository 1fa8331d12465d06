// Page-backed buffers for registered windows, with huge pages for large ones (RWIN_HUGEPAGES,
// docs/CONFIG.md): fewer pages to pin at registration and fewer translations for the NIC to cache.
#pragma once

#include <cstddef>
#include <string>

namespace rwin::pages {

enum class HugeMode { Off, Thp, Hugetlbfs, Auto };
constexpr size_t kHugePage = size_t{2} << 20;

// RWIN_HUGEPAGES (default auto); throws std::invalid_argument naming the variable.
HugeMode huge_mode_from_env();
const char* huge_mode_name(HugeMode m) noexcept;

// Anonymous, zeroed, page-aligned memory, unmapped by the destructor.
//   off: 4 KiB pages from the heap (MADV_NOHUGEPAGE from 2 MiB: a THP "always" system mixes none in);
//   thp: 2 MiB aligned and rounded, MADV_HUGEPAGE (4 KiB pages where THP is "never" or missing);
//   hugetlbfs: MAP_HUGETLB 2 MiB pages, falling back to thp when none are reserved;
//   auto: thp for buffers of at least 2 MiB, else off.
class PageBuffer {
 public:
  PageBuffer() = default;
  // Throws std::system_error (mmap failed even with 4 KiB pages).
  PageBuffer(size_t bytes, HugeMode mode);
  ~PageBuffer();
  PageBuffer(PageBuffer&& o) noexcept;
  PageBuffer& operator=(PageBuffer&& o) noexcept;
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  void* data() const noexcept { return addr_; }
  size_t mapped_bytes() const noexcept { return len_; }
  // "4k", "thp", "hugetlbfs", with why a fallback happened ("thp (no hugetlbfs pages reserved)").
  const std::string& kind() const noexcept { return kind_; }

 private:
  void release() noexcept;
  void* addr_ = nullptr;
  size_t len_ = 0;
  bool heap_ = false;  // off: posix_memalign'd (free), else mmap'd (munmap)
  std::string kind_;
};

// The system's side, for rwin-info: "THP enabled [madvise] ...; hugetlbfs 2 MiB pages: 0 free of 0".
std::string system_text();

}  // namespace rwin::pages
