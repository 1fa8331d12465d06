// Caller memory (Transport::register_memory) as the local side of Write, Read and a fetching
// atomic over UCX, in each RMA mode (native, am, auto: direct where UCX maps the window), from
// heap, stack and mmap memory, one rank talking to itself.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/transport.h"
#include "ucx_self_rank.h"

namespace rb = rwin::bootstrap;
namespace rt = rwin::transport;

namespace {

// Each work must complete successfully.
struct Rank : rwin_test::UcxSelfRank {
  using UcxSelfRank::UcxSelfRank;
  void run(rt::Work w) {
    const rt::Completion c = UcxSelfRank::run(w);
    EXPECT_TRUE(c.ok) << c.error;
  }
};

using rwin_test::self_work;

uint8_t pat(size_t i, int salt) { return static_cast<uint8_t>(i * 13 + static_cast<size_t>(salt) * 71 + (i >> 10)); }

class UcxCallerMemory : public ::testing::TestWithParam<const char*> {};

TEST_P(UcxCallerMemory, WriteFromAndReadIntoHeapStackAndMmap) {
  Rank r(GetParam());
  EXPECT_FALSE(r.tp->capabilities().local_needs_registration);
  std::printf("[ info ] %s\n", r.tp->describe().c_str());
  constexpr size_t kWin = 1 << 20;
  auto win = r.tp->allocate(kWin);
  auto key = r.tp->unpack_key(0, win->packed_key());
  auto* w = static_cast<uint8_t*>(win->addr());

  std::vector<uint8_t> heap(kWin);
  uint8_t stack[6000];
  void* m = mmap(nullptr, kWin, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  struct Kind {
    const char* name;
    uint8_t* p;
    size_t cap;
  } kinds[] = {{"heap", heap.data(), heap.size()}, {"stack", stack, sizeof stack}, {"mmap", static_cast<uint8_t*>(m), kWin}};
  int salt = 0;
  for (const Kind& k : kinds) {
    // 8 B (am: staged in a batch), 5000 B (eager), up to ~1 MiB (am: rendezvous; native: zcopy or bcopy).
    for (size_t n : {size_t{8}, size_t{5000}, k.cap - 3}) {
      if (n > k.cap - 3) continue;
      SCOPED_TRACE(std::string(GetParam()) + " " + k.name + " " + std::to_string(n) + " bytes");
      ++salt;
      uint8_t* src = k.p + 3;  // not aligned
      for (size_t i = 0; i < n; ++i) src[i] = pat(i, salt);
      auto reg = r.tp->register_memory(src, n);
      EXPECT_EQ(reg->addr(), src);
      EXPECT_EQ(reg->bytes(), n);
      EXPECT_THROW(reg->packed_key(), rt::TransportError);
      std::memset(w, 0, kWin);
      r.run(self_work(rt::Op::Write, src, reg.get(), key->base() + 1, key.get(), n));
      r.run(self_work(rt::Op::Flush, nullptr, nullptr, 0, nullptr, 0));
      ASSERT_EQ(w[0], 0);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(w[1 + i], pat(i, salt)) << "byte " << i;
      std::memset(src, 0, n);
      r.run(self_work(rt::Op::Read, src, reg.get(), key->base() + 1, key.get(), n));
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(src[i], pat(i, salt)) << "read byte " << i;
    }
  }
  // A fetching atomic's result slot in caller memory.
  uint64_t slot = 0;
  auto reg = r.tp->register_memory(&slot, 8);
  auto* word = reinterpret_cast<uint64_t*>(w + 64);
  *word = 41;
  rt::Work fadd = self_work(rt::Op::FetchAdd, &slot, reg.get(), key->base() + 64, key.get(), 8);
  fadd.operand = 1;
  r.run(fadd);
  EXPECT_EQ(slot, 41u);
  EXPECT_EQ(*word, 42u);
  EXPECT_THROW(r.tp->register_memory(nullptr, 0), rt::TransportError);
  munmap(m, kWin);
}

INSTANTIATE_TEST_SUITE_P(Modes, UcxCallerMemory, ::testing::Values("native", "am", "auto"),
                         [](const auto& p) { return std::string(p.param); });

}  // namespace
