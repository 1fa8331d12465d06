// What the verbs transport tests share (test_verbs_transport.cpp: forked ranks over the collective
// connect; test_verbs_dynamic.cpp: run-time peers in one process): the device gate and Work builders.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

#include "transport/transport.h"
#include "transport/verbs/verbs_transport.h"

namespace rwin::test::verbs {

inline constexpr const char* kSkip =
    "skipped: no RDMA device (ibv_get_device_list found none); run under tests/rxe/run-in-guest.sh";

}  // namespace rwin::test::verbs

// Skips the calling test, with the one-line reason, when there is no RDMA device.
#define VERBS_REQUIRE_DEVICE()                                                               \
  do {                                                                                       \
    if (rwin::transport::verbs_device_count() == 0) GTEST_SKIP() << rwin::test::verbs::kSkip; \
  } while (0)

namespace {

using rwin::transport::MemoryRegion;
using rwin::transport::Op;
using rwin::transport::RemoteKey;
using rwin::transport::Work;

inline Work write_work(int peer, void* local, const MemoryRegion* mr, uint64_t remote, const RemoteKey* key, size_t n) {
  Work w;
  w.op = Op::Write;
  w.peer = peer;
  w.local = local;
  w.local_mr = mr;
  w.remote_addr = remote;
  w.rkey = key;
  w.bytes = n;
  return w;
}
inline Work read_work(int peer, void* local, const MemoryRegion* mr, uint64_t remote, const RemoteKey* key, size_t n) {
  Work w = write_work(peer, local, mr, remote, key, n);
  w.op = Op::Read;
  return w;
}
inline Work atomic_work(Op op, int peer, void* local, const MemoryRegion* mr, uint64_t remote, const RemoteKey* key,
                 uint64_t operand, uint64_t compare = 0) {
  Work w = write_work(peer, local, mr, remote, key, 8);
  w.op = op;
  w.operand = operand;
  w.compare = compare;
  return w;
}
inline Work flush_work(int peer) {
  Work w;
  w.op = Op::Flush;
  w.peer = peer;
  return w;
}

inline uint8_t pattern(int rank, size_t i) {
  return static_cast<uint8_t>(static_cast<size_t>(rank) * 37 + i * 7 + (i >> 12));
}

}  // namespace
