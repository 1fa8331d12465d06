// Internal functions the core's files share: argument checks, chunk glue, accumulate.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "bootstrap/bootstrap.h"
#include "chunk_planner.h"
#include "context_impl.h"

namespace rwin::detail {

constexpr size_t kScratchWords = 8192;  // atomic result slots (64 KiB); word 0 is the
                                        // sink for notify(Set), the rest serve put(Add)
constexpr int kAtomicsInFlight = 256;   // element atomics of one put(Add) in flight

// How a bootstrap failure reaches the user: a peer that died is PeerFailed, as on the data path.
ErrorCode error_code(const bootstrap::BootstrapError& e);

std::string shape_str(Shape2 s);  // "[4, 1024]"

// checks.cpp. Each throws Error naming this rank, the operation, the peer and the sizes.
WindowState& live(const std::shared_ptr<WindowState>& s, const char* what);  // not empty, not freed
WindowState& check_slice(ContextImpl& c, const char* op, int peer, const char* side, const Slice& s);
void check_pair(ContextImpl& c, const char* op, int peer, const Slice& dst, const Slice& src, WindowState& d,
                WindowState& s);
// The peer, both slices against their windows, matching shapes and dtypes. Returns {dst, src}.
std::pair<WindowState&, WindowState&> check_transfer(ContextImpl& c, const char* op, int peer, const Slice& dst,
                                                     const Slice& src);
// `peer` < 0: a local operation (wait, test).
WindowState& check_signal(ContextImpl& c, const char* op, int peer, const SignalSlice& sig);

// transfer.cpp: the chunk planner over one transfer between a local and a remote slice of equal
// shape (max_chunk 0: the configured chunk size), and the work request that moves one chunk.
ChunkPlanner plan_chunks(const ContextImpl& c, const WindowState& local, const Slice& local_slice,
                         const WindowState& remote, const Slice& remote_slice, uint64_t max_chunk);
transport::Work chunk_work(transport::Op op, int peer, WindowState& local, const transport::RemoteKey& rkey,
                           const Chunk& ch);

// accumulate.cpp: put(atomic = Add).
void run_accumulate(ContextImpl& c, int peer, WindowState& local, const Slice& src, WindowState& remote,
                    const Slice& dst);

}  // namespace rwin::detail
