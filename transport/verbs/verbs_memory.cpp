// Memory registration and the packed key (KeyBlob) peers use to address it.
//
// expose_memory() (caller memory peers may write, read and update atomically), as measured on
// rdma_rxe in the guest (Linux 6.1, tests/mp/test_verbs_dynamic.cpp):
//  * No alignment is required. The MR covers exactly [addr, addr + bytes): rxe pins the whole pages
//    around it (ib_umem_get) but checks every remote access against the MR's bounds, so a key
//    forged 8 bytes longer is refused by the device (remote access error) and the neighbouring
//    bytes of the same page are never written. Atomics need 8-byte aligned words (IB rule).
//  * No ODP: rxe on 6.1 reports no on-demand-paging capabilities (ibv_devinfo -v: empty
//    *_odp_caps), and none is asked for. Registering pins the pages: the memory must be mapped
//    readable and writable (else EFAULT), counts against `ulimit -l` (ENOMEM/EPERM), and must
//    stay mapped while the region lives.
//  * Destroying the region deregisters the MR (never frees): a peer's later use of the old rkey
//    completes at that peer with IBV_WC_REM_ACCESS_ERR and the memory is not touched.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "common/log.h"
#include "common/page_alloc.h"
#include "transport/verbs/verbs_blob.h"
#include "transport/verbs/verbs_transport_impl.h"

namespace rwin::transport::verbs {

template <class Fail>
void VerbsMemoryRegion::register_all(void* p, size_t n, int access, const Fail& fail) {
  for (const auto& d : devs_) {
    MrPtr mr(ibv_reg_mr(d->pd.get(), p, n, access));
    if (!mr) throw fail(errno);
    mrs_.push_back(std::move(mr));
  }
}

VerbsMemoryRegion::VerbsMemoryRegion(Devices devs, size_t bytes, const std::string& who) : devs_(std::move(devs)) {
  // Whole pages: registration pins pages anyway, and a region never shares a page with unrelated
  // heap data that a later fork() could copy-on-write away from the pinned frame. Large windows on
  // 2 MiB pages (RWIN_HUGEPAGES): ibv_reg_mr pins 512x fewer pages (bench/RESULTS.md).
  try {
    buf_ = pages::PageBuffer(bytes, pages::huge_mode_from_env());
  } catch (const std::invalid_argument& e) {
    throw TransportError(who + ": " + e.what());
  } catch (const std::system_error& e) {
    throw TransportError(who + ": allocating " + std::to_string(bytes) + " bytes failed: " + e.what());
  }
  void* p = buf_.data();
  const size_t alloc = buf_.mapped_bytes();
  if (bytes >= pages::kHugePage) {
    RWIN_LOG(Debug, Verbs, "%s: window buffer of %zu bytes on %s pages", who.c_str(), bytes, buf_.kind().c_str());
  }
  // Remote peers write, read and update it atomically; LOCAL_WRITE is required by REMOTE_WRITE
  // and lets the device write Read and atomic results into it.
  const int access =
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  register_all(p, alloc, access, [&](int err) {
    return TransportError(
        who + ": ibv_reg_mr of " + std::to_string(alloc) + " bytes failed: " + std::strerror(err) +
        (err == ENOMEM || err == EPERM || err == EFAULT ? " (locked-memory limit? check `ulimit -l`)" : ""));
  });
  addr_ = p;
  bytes_ = bytes;
}

VerbsMemoryRegion::VerbsMemoryRegion(CallerMemory kind, Devices devs, void* addr, size_t bytes, const std::string& who)
    : devs_(std::move(devs)), who_(who), remote_(kind.remote) {
  char where[64];
  std::snprintf(where, sizeof where, "%p", addr);
  const std::string range = std::string("caller memory at ") + where + ", " + std::to_string(bytes) + " bytes";
  if (addr == nullptr || bytes == 0) throw TransportError(who + ": cannot register " + range + ": empty range");
  // LOCAL_WRITE: a Read (and a fetching atomic) lands in it. Local only (register_memory): no
  // remote access, it is never shared. Exposed (expose_memory): what allocate()'s regions allow.
  // No alignment is needed: the MR's iova is `addr` and the device (rxe: ib_umem_get) pins the
  // whole pages around [addr, addr + bytes) but checks each remote access against exactly that
  // range, so the neighbours sharing its first and last page stay out of reach.
  const int access = kind.remote ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                       IBV_ACCESS_REMOTE_ATOMIC
                                 : IBV_ACCESS_LOCAL_WRITE;
  register_all(addr, bytes, access, [&](int err) {
    return TransportError(who + ": ibv_reg_mr of " + range + " failed: " + std::strerror(err) + " (errno " +
                          std::to_string(err) + ")" +
                          (err == ENOMEM || err == EPERM ? " (locked-memory limit? check `ulimit -l`)"
                           : err == EFAULT           ? " (not mapped, or not readable and writable?)"
                                                     : ""));
  });
  addr_ = addr;
  bytes_ = bytes;
}

std::vector<uint8_t> VerbsMemoryRegion::packed_key() const {
  if (!remote_) {
    throw TransportError(who_ + ": caller memory registered with register_memory() is local only: it has no key "
                                "for peers (expose_memory() makes one)");
  }
  KeyBlob k;
  k.addr = reinterpret_cast<uint64_t>(addr_);
  k.bytes = bytes_;
  k.rails = static_cast<uint32_t>(mrs_.size());
  for (size_t r = 0; r < mrs_.size(); ++r) k.rkeys[r] = mrs_[r]->rkey;
  return k.pack();
}

bool VerbsMemoryRegion::contains(const void* p, size_t n) const noexcept {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const auto base = reinterpret_cast<uintptr_t>(addr_);
  return a >= base && n <= bytes_ && a - base <= bytes_ - n;
}

std::unique_ptr<MemoryRegion> VerbsTransport::allocate(size_t bytes) {
  return std::make_unique<VerbsMemoryRegion>(devices_, bytes, self_ + ": " + describe_);
}

std::unique_ptr<MemoryRegion> VerbsTransport::register_memory(void* addr, size_t bytes) {
  return std::make_unique<VerbsMemoryRegion>(VerbsMemoryRegion::CallerMemory{}, devices_, addr, bytes,
                                             self_ + ": " + describe_);
}

std::unique_ptr<MemoryRegion> VerbsTransport::expose_memory(void* addr, size_t bytes) {
  // Destroying the region deregisters the MR: the rkey is invalid from then on, so a peer's
  // later access with it fails at the peer (IBV_WC_REM_ACCESS_ERR) and never reaches the memory.
  return std::make_unique<VerbsMemoryRegion>(VerbsMemoryRegion::CallerMemory{.remote = true}, devices_, addr, bytes,
                                             self_ + ": " + describe_);
}

std::unique_ptr<RemoteKey> VerbsTransport::unpack_key(int peer, std::span<const uint8_t> packed) {
  const std::string who = self_ + ": " + describe_;
  if (peer < 0 || peer >= npeers()) {
    throw TransportError(who + ": unpack_key for peer " + std::to_string(peer) + ", " +
                         (cfg_.dynamic_peers ? std::to_string(npeers()) + " run-time peers added"
                                             : "job has " + std::to_string(cfg_.nranks) + " ranks"));
  }
  try {
    const KeyBlob k = KeyBlob::unpack(packed);
    return std::make_unique<VerbsRemoteKey>(peer, k.addr, k.bytes, k);
  } catch (const TransportError& e) {
    throw TransportError(who + ": key from peer " + std::to_string(peer) + ": " + e.what());
  }
}

}  // namespace rwin::transport::verbs
