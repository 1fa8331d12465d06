// Window buffers on huge pages (common/page_alloc.h, RWIN_HUGEPAGES): alignment, rounding, the
// fallbacks, zeroed memory, and the knob's parsing.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

#include "common/page_alloc.h"

using rwin::pages::HugeMode;
using rwin::pages::kHugePage;
using rwin::pages::PageBuffer;

namespace {
bool zero_and_writable(const PageBuffer& b) {
  auto* p = static_cast<unsigned char*>(b.data());
  for (size_t i = 0; i < b.mapped_bytes(); i += 4096) {
    if (p[i] != 0) return false;
    p[i] = 1;
  }
  return true;
}
long hugetlb_free() {
  std::ifstream mi("/proc/meminfo");
  std::string k;
  long v = 0;
  while (mi >> k) {
    if (k == "HugePages_Free:") {
      mi >> v;
      return v;
    }
  }
  return 0;
}
}  // namespace

TEST(PageAlloc, SmallBuffersAndOffUseBasePages) {
  PageBuffer a(100, HugeMode::Auto);
  EXPECT_EQ(a.kind(), "4k");
  EXPECT_EQ(a.mapped_bytes(), 4096u);
  PageBuffer b(3 << 20, HugeMode::Off);
  EXPECT_EQ(b.kind(), "4k");
  EXPECT_EQ(b.mapped_bytes(), size_t{3} << 20);
  EXPECT_TRUE(zero_and_writable(b));
}

TEST(PageAlloc, ThpIsTwoMiBAlignedAndRounded) {
  for (HugeMode m : {HugeMode::Thp, HugeMode::Auto}) {
    PageBuffer b((3 << 20) + 5, m);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kHugePage, 0u);
    EXPECT_EQ(b.mapped_bytes(), size_t{4} << 20);
    const bool thp = std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good();
    EXPECT_EQ(b.kind(), thp ? "thp" : "4k (madvise(MADV_HUGEPAGE) refused: no THP)");
    EXPECT_TRUE(zero_and_writable(b));
  }
}

TEST(PageAlloc, HugetlbfsFallsBackToThpWithoutReservedPages) {
  PageBuffer b(kHugePage + 1, HugeMode::Hugetlbfs);
  EXPECT_EQ(b.mapped_bytes(), 2 * kHugePage);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kHugePage, 0u);
  if (hugetlb_free() >= 2) {
    EXPECT_EQ(b.kind(), "hugetlbfs");
  } else {
    EXPECT_NE(b.kind().find("no hugetlbfs 2 MiB pages reserved"), std::string::npos) << b.kind();
  }
  EXPECT_TRUE(zero_and_writable(b));
  PageBuffer moved(std::move(b));
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_NE(moved.data(), nullptr);
}

TEST(PageAlloc, KnobParsesItsFourValuesAndNamesItselfOtherwise) {
  const char* old = std::getenv("RWIN_HUGEPAGES");
  const std::string saved = old ? old : "";
  unsetenv("RWIN_HUGEPAGES");
  EXPECT_EQ(rwin::pages::huge_mode_from_env(), HugeMode::Auto);
  for (auto [t, m] : {std::pair{"off", HugeMode::Off}, {"thp", HugeMode::Thp}, {"hugetlbfs", HugeMode::Hugetlbfs}}) {
    setenv("RWIN_HUGEPAGES", t, 1);
    EXPECT_EQ(rwin::pages::huge_mode_from_env(), m);
  }
  setenv("RWIN_HUGEPAGES", "on", 1);
  try {
    rwin::pages::huge_mode_from_env();
    ADD_FAILURE() << "accepted 'on'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("RWIN_HUGEPAGES='on'"), std::string::npos) << e.what();
  }
  if (old) setenv("RWIN_HUGEPAGES", saved.c_str(), 1); else unsetenv("RWIN_HUGEPAGES");
}
