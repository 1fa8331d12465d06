// One RAII owner per ibv_* handle. Deleters never throw: a failed destroy is logged to stderr
// (it means a leak or a teardown-order bug, never something a caller could handle).
#pragma once

#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/log.h"

namespace rwin::transport::verbs {

// rdma-core's destroy calls return 0 or an errno value; a few older providers return -1 and set
// errno, so both are handled.
inline void report_destroy(const char* what, int rc) noexcept {
  if (rc != 0) {
    const int err = rc > 0 ? rc : errno;
    RWIN_LOG(Warn, Verbs, "rwin verbs: %s failed during teardown: %s", what, std::strerror(err));
  }
}

// After fork() a child holds the parent's device file (the same open file, so the same verbs
// objects): a destroy call from the child destroys the parent's QP, MR or PD. Each owner remembers
// the process that made it, and its deleter does nothing in any other process (a forked child
// running destructors on its way out): the child's reference to the file goes at its exit, the
// parent's objects stay. One getpid() per destroy.
struct OwnerProcess {
  pid_t pid = ::getpid();
  bool here() const noexcept { return ::getpid() == pid; }
};

struct DeviceListDeleter {
  void operator()(ibv_device** l) const noexcept { ibv_free_device_list(l); }
};
struct ContextDeleter : OwnerProcess {
  void operator()(ibv_context* c) const noexcept {
    if (here()) report_destroy("ibv_close_device", ibv_close_device(c));
  }
};
struct PdDeleter : OwnerProcess {
  void operator()(ibv_pd* p) const noexcept {
    if (here()) report_destroy("ibv_dealloc_pd", ibv_dealloc_pd(p));
  }
};
struct CqDeleter : OwnerProcess {
  void operator()(ibv_cq* c) const noexcept {
    if (here()) report_destroy("ibv_destroy_cq", ibv_destroy_cq(c));
  }
};
struct QpDeleter : OwnerProcess {
  void operator()(ibv_qp* q) const noexcept {
    if (here()) report_destroy("ibv_destroy_qp", ibv_destroy_qp(q));
  }
};
struct MrDeleter : OwnerProcess {
  void operator()(ibv_mr* m) const noexcept {
    if (here()) report_destroy("ibv_dereg_mr", ibv_dereg_mr(m));
  }
};
struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};

using DeviceListPtr = std::unique_ptr<ibv_device*, DeviceListDeleter>;
using ContextPtr = std::unique_ptr<ibv_context, ContextDeleter>;
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;
using QpPtr = std::unique_ptr<ibv_qp, QpDeleter>;
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;
using HostBufferPtr = std::unique_ptr<void, FreeDeleter>;

// The device context and protection domain, shared by the transport and every MemoryRegion it
// hands out: a region the caller destroys after the transport still deregisters against a live PD
// and context (members destroyed in reverse order: PD, then context).
struct DeviceHandles {
  ContextPtr ctx;
  PdPtr pd;
};

}  // namespace rwin::transport::verbs
