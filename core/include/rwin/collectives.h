// Collectives built on put / notify / wait and local compute only (no MPI underneath), over the
// whole job or over a Team (a subset of ranks with its own windows: the runtime's comm domain).
//
// Shapes are the runtime's (pypto `pld`): allgather(stage [1, S] -> data [NR, S]),
// reduce_scatter(data [NR, S]: afterwards row my_rank holds the reduced row), all_to_all(stage
// [NR, S], data [NR, S]: afterwards data[src] holds stage[my_rank] of src), all_to_all_v (per-member
// counts and offsets in elements), allreduce / broadcast in
// place on a view. NR is the team's size, rows are indexed by team rank. Every member calls the same
// collective in the same order with matching arguments; a mismatch (sizes, dtype, root, op, mode)
// ends in Error(CollectiveMismatch) on every member, never in a hang (in that call, or in a member's
// next call on the team when that member waited for nothing the mismatch touched), and every call
// has a deadline (Options::op_timeout). docs/CONTRACT.md ("Collectives") has the semantics, the
// algorithms, and how the internal scratch and signal windows are sized and reused.
//
// Thread safety: a Team belongs to its Context and is used from the thread that uses the Context.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rwin/rwin.h"

namespace rwin {

namespace detail {
struct TeamState;
struct CollHandle;
}

// A collective started with one of Team's start_* forms (nonblocking): it runs on the context's
// collective worker thread, in start order, while the caller computes. Until it has finished (test()
// returned true or wait() returned), the context belongs to that worker: any other call on the
// context, its windows or its teams from the caller's thread throws Error(InvalidArgument) naming the
// collective in flight, and the collective's windows must not be read or written by the caller
// (MPI's rule for its I-collectives). Local work, and start_* of more collectives (queued in order),
// are fine. The collective keeps its deadline (Options::op_timeout) and its errors: they are thrown
// by test() or wait() (every time either is called after it failed). A request destroyed before it
// finished waits for it (bounded by that deadline), then drops its error; so does ~Context for every
// collective still started. Handles are cheap to copy (shared state).
class CollectiveRequest {
 public:
  CollectiveRequest() = default;
  bool valid() const noexcept { return static_cast<bool>(h_); }
  // True once the collective has finished (then throws its error, if it failed); never blocks.
  bool test();
  // Blocks until it finished (throws its error, if it failed). Bounded: the collective's own deadline.
  void wait();
  // "allreduce on world", for messages.
  std::string what() const;

  explicit CollectiveRequest(std::shared_ptr<detail::CollHandle> h) : h_(std::move(h)) {}

 private:
  std::shared_ptr<detail::CollHandle> h_;
};

// Reductions, on every numeric dtype. Integers wrap (Sum, Prod); f16 and bf16 accumulate in f32
// and round once (to nearest even) per output element; floating Max/Min follow fmax/fmin (a NaN
// loses against a number).
enum class ReduceOp : uint8_t { Sum, Max, Min, Prod };
const char* reduce_op_name(ReduceOp op) noexcept;  // "sum", "max", "min", "prod"
ReduceOp parse_reduce_op(const std::string& name);  // throws Error(InvalidArgument)

// allreduce algorithm: Mesh (every member sends its whole input to every other member; each reduces
// all inputs locally in team-rank order: one round of messages, (NR-1) x the data per member: for
// small payloads) or Ring (reduce-scatter then all-gather of NR blocks, in pipelined chunks:
// 2 (NR-1)/NR x the data per member, like a ring, but each phase pairwise in one step: for large
// ones) or Bruck (every member gathers all inputs in ceil(log2 NR) rounds of one message each and
// reduces them as Mesh does: for the smallest payloads on 3+ members not all in shared memory). All reduce every element in
// team-rank order, so they give the same bits. Auto follows the collectives' tuning table (by size,
// team size, path and transport: the rules of the RWIN_COLL_TUNING file, then the built-in ones from
// RWIN_COLL_BRUCK_MAX and RWIN_ALLREDUCE_MESH_MAX; docs/CONFIG.md "Collective tuning");
// RWIN_ALLREDUCE=mesh|ring|bruck forces one for Auto calls.
enum class AllreduceMode : uint8_t { Auto, Mesh, Ring, Bruck };
AllreduceMode parse_allreduce_mode(const std::string& name);  // "auto" | "mesh" | "ring" | "bruck"

// A subset of the job's ranks. Member functions are collective over the team's members only.
// Handles are cheap to copy (shared state); the state goes with the Context.
class Team {
 public:
  Team() = default;
  bool valid() const noexcept;
  int rank() const;                      // this rank's index in the team
  int size() const;
  const std::vector<int>& ranks() const;  // the members' job ranks, in team-rank order
  int global_rank(int team_rank) const;   // InvalidArgument outside [0, size())

  // Windows of the team alone: collective over the members (same rules as Context's: same name
  // and size on every member, else WindowMismatch). Non-members hold no copy; a put/get/notify from
  // or to a non-member on such a window is InvalidArgument. Free them with Context::free (which,
  // for a team window, synchronises the team, not the job).
  WindowBuffer alloc_window_buffer(const std::string& name, size_t bytes);
  Window alloc_window(const std::string& name, DType dtype, Shape2 shape);

  // Dissemination barrier on notify/wait (ceil(log2 NR) rounds), self-resetting (counters only
  // grow; nothing to clear between calls). Implies that every put/notify a member issued before it
  // is visible (it quiets first).
  void barrier();
  // In place: afterwards every member's `x` holds the root's. `root` is a team rank.
  void broadcast(const Window& x, int root);
  // stage [1, S] (or any view of S elements) -> data [NR, S]; data row r = member r's stage.
  void allgather(const Window& stage, const Window& data);
  // In place: data [NR, S]; afterwards data row rank() holds op over every member's data row rank().
  // Other rows are left as scratch-free input (unchanged).
  void reduce_scatter(const Window& data, ReduceOp op = ReduceOp::Sum);
  // Not in place: out (S elements) = op over every member's data row rank().
  void reduce_scatter(const Window& data, const Window& out, ReduceOp op = ReduceOp::Sum);
  // In place on x: afterwards every member's x holds op over all members' x (bitwise identical on
  // every member: the same reduction order everywhere).
  void allreduce(const Window& x, ReduceOp op = ReduceOp::Sum, AllreduceMode mode = AllreduceMode::Auto);
  // Not in place: dst = op over all members' src (src unchanged; src and dst may be the same view).
  void allreduce(const Window& src, const Window& dst, ReduceOp op = ReduceOp::Sum,
                 AllreduceMode mode = AllreduceMode::Auto);
  // stage [NR, S], data [NR, S]: afterwards data row s holds member s's stage row rank().
  void all_to_all(const Window& stage, const Window& data);
  // Variable all-to-all (the runtime's all_to_all_v, MPI_Alltoallv's shape): this member sends
  // send_counts[q] elements of `send`, from element send_offsets[q] on, to member q, which stores them
  // at element recv_offsets[rank()] of its `recv`; recv_counts[p] is what this member expects from
  // member p and must equal p's send_counts[rank()] (else CollectiveMismatch on the members involved,
  // naming both counts). Elements are counted in the views' row-major order, each vector holds one
  // entry per member; without offsets the blocks are packed (each offset the sum of the counts before
  // it). send and recv must not overlap, nor the recv blocks of different members; a count of 0 sends
  // nothing. The first call sizes the team's scratch for whole chunks (RWIN_COLL_CHUNK_BYTES per slot):
  // the members' flows differ, so no one member's size can stand for all.
  void all_to_all_v(const Window& send, const std::vector<int64_t>& send_counts, const std::vector<int64_t>& send_offsets,
                    const Window& recv, const std::vector<int64_t>& recv_counts, const std::vector<int64_t>& recv_offsets);
  void all_to_all_v(const Window& send, const std::vector<int64_t>& send_counts, const Window& recv,
                    const std::vector<int64_t>& recv_counts);

  // Nonblocking forms (CollectiveRequest above): each starts the collective of the same name with
  // the same arguments and returns at once; the same rules, mismatches and results as the blocking
  // call, errors at test()/wait(). Every member starts (or calls) the team's collectives in the same
  // order; one member may call the blocking form where another starts the nonblocking one.
  CollectiveRequest start_barrier();
  CollectiveRequest start_broadcast(const Window& x, int root);
  CollectiveRequest start_allgather(const Window& stage, const Window& data);
  CollectiveRequest start_reduce_scatter(const Window& data, ReduceOp op = ReduceOp::Sum);
  CollectiveRequest start_reduce_scatter(const Window& data, const Window& out, ReduceOp op = ReduceOp::Sum);
  CollectiveRequest start_allreduce(const Window& x, ReduceOp op = ReduceOp::Sum, AllreduceMode mode = AllreduceMode::Auto);
  CollectiveRequest start_allreduce(const Window& src, const Window& dst, ReduceOp op = ReduceOp::Sum,
                                    AllreduceMode mode = AllreduceMode::Auto);
  CollectiveRequest start_all_to_all(const Window& stage, const Window& data);
  CollectiveRequest start_all_to_all_v(const Window& send, const std::vector<int64_t>& send_counts,
                                       const std::vector<int64_t>& send_offsets, const Window& recv,
                                       const std::vector<int64_t>& recv_counts, const std::vector<int64_t>& recv_offsets);
  CollectiveRequest start_all_to_all_v(const Window& send, const std::vector<int64_t>& send_counts, const Window& recv,
                                       const std::vector<int64_t>& recv_counts);

  // Implementation handle (used by the Python binding and tests).
  explicit Team(std::shared_ptr<detail::TeamState> s) : s_(std::move(s)) {}

 private:
  std::shared_ptr<detail::TeamState> s_;
};

// The whole job as a team (one per Context, made on first use; its internal scratch is shared by
// every call of the free functions below).
Team world(Context& ctx);
// Collective over `ranks` (job ranks, distinct, any order: the order is the team-rank order): every
// member passes the same list, non-members do not call. A member passing a different list gets
// Error(CollectiveMismatch) naming both lists; a list without the caller, a duplicate or a rank
// outside the job is InvalidArgument.
Team make_team(Context& ctx, const std::vector<int>& ranks);

// The same collectives over the whole job (world(ctx)).
void barrier_collective(Context& ctx);
void broadcast(Context& ctx, const Window& x, int root);
void allgather(Context& ctx, const Window& stage, const Window& data);
void reduce_scatter(Context& ctx, const Window& data, ReduceOp op = ReduceOp::Sum);
void allreduce(Context& ctx, const Window& x, ReduceOp op = ReduceOp::Sum, AllreduceMode mode = AllreduceMode::Auto);
void all_to_all(Context& ctx, const Window& stage, const Window& data);
void all_to_all_v(Context& ctx, const Window& send, const std::vector<int64_t>& send_counts,
                  const std::vector<int64_t>& send_offsets, const Window& recv, const std::vector<int64_t>& recv_counts,
                  const std::vector<int64_t>& recv_offsets);

}  // namespace rwin
