// Nonblocking collectives: Team::start_* and CollectiveRequest (rwin/collectives.h), run by the
// context's CollWorker (coll_worker.h).
#include "collectives/coll_worker.h"

#include "collectives/call.h"
#include "collectives/team_state.h"

namespace rwin {

using namespace detail;

namespace detail {

void CollWorker::start(const std::shared_ptr<CollJob>& job) {
  job->worker = this;
  std::lock_guard<std::mutex> g(mu_);
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { main(); });
  }
  // Lent from here on: the caller thread's next call on the context is refused until the queue is
  // empty again (the worker clears it under mu_ before it marks the last job done).
  c_.lent.store(true, std::memory_order_relaxed);
  queue_.push_back(job);
  work_cv_.notify_one();
}

void CollWorker::wait(CollJob& job) {
  if (job.done.load(std::memory_order_acquire)) return;
  std::unique_lock<std::mutex> g(mu_);
  done_cv_.wait(g, [&job] { return job.done.load(std::memory_order_acquire); });
}

std::string CollWorker::current() const {
  std::lock_guard<std::mutex> g(mu_);
  return queue_.empty() ? std::string("none") : queue_.front()->what;
}

void CollWorker::main() noexcept {
  id_.store(std::this_thread::get_id(), std::memory_order_release);
  std::unique_lock<std::mutex> g(mu_);
  for (;;) {
    work_cv_.wait(g, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::shared_ptr<CollJob> job = queue_.front();
    g.unlock();
    try {
      job->body();
    } catch (...) {
      job->error = std::current_exception();
    }
    job->body = nullptr;  // its handles go now, on the thread that owns the context
    g.lock();
    queue_.pop_front();
    if (queue_.empty()) c_.lent.store(false, std::memory_order_relaxed);
    job->done.store(true, std::memory_order_release);
    done_cv_.notify_all();
  }
}

void CollWorker::stop() noexcept {
  {
    std::unique_lock<std::mutex> g(mu_);
    stopping_ = true;
    work_cv_.notify_one();
    // Every queued job ends by its deadline; a started collective the caller never waited for still
    // has peers that count on this member.
    done_cv_.wait(g, [this] { return queue_.empty(); });
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace detail

void ContextImpl::owner_check(const char* op) const {
  if (coll_worker && std::this_thread::get_id() == coll_worker->id()) return;
  throw Error(ErrorCode::InvalidArgument,
              who() + ": " + op + ": the context is lent to a nonblocking collective (" +
                  (coll_worker ? coll_worker->current() : std::string("none")) +
                  ", started with a Team::start_* call): wait() for it, or test() it until it returns true, "
                  "before using the context, its windows or teams from this thread again");
}

void ContextImpl::stop_coll_worker() noexcept {
  if (coll_worker) coll_worker->stop();
}

CollHandle::~CollHandle() {
  // A job not done has a live worker (~Context waits for every job before the worker goes).
  if (job && !job->done.load(std::memory_order_acquire)) job->worker->wait(*job);
}

// ---------------------------------------------------------------------------------------------
// CollectiveRequest

bool CollectiveRequest::test() {
  if (!h_) throw Error(ErrorCode::InvalidArgument, "CollectiveRequest::test: an empty request (never started)");
  CollJob& j = *h_->job;
  if (!j.done.load(std::memory_order_acquire)) return false;
  if (j.error) std::rethrow_exception(j.error);
  return true;
}

void CollectiveRequest::wait() {
  if (!h_) throw Error(ErrorCode::InvalidArgument, "CollectiveRequest::wait: an empty request (never started)");
  CollJob& j = *h_->job;
  if (!j.done.load(std::memory_order_acquire)) j.worker->wait(j);
  if (j.error) std::rethrow_exception(j.error);
}

std::string CollectiveRequest::what() const { return h_ ? h_->job->what : std::string(); }

// ---------------------------------------------------------------------------------------------
// Team::start_*

namespace {

// What the caller's thread may check at once without touching state the worker uses: the team is
// live and the handles are this context's live windows (the rest is checked by the collective
// itself, on the worker, and thrown by test()/wait()).
void precheck(TeamState& t, const char* what, std::initializer_list<std::pair<const Window*, const char*>> windows) {
  Call call{t, what};
  for (const auto& [w, arg] : windows) call.window(*w, arg);
}

CollectiveRequest launch(TeamState& t, const char* what, std::function<void()> body) {
  ContextImpl& c = t.live(what);
  auto job = std::make_shared<CollJob>();
  job->what = std::string(what) + " on " + t.describe();
  job->body = std::move(body);
  if (!c.coll_worker) c.coll_worker = std::make_unique<CollWorker>(c);
  c.coll_worker->start(job);
  auto h = std::make_shared<CollHandle>();
  h->job = std::move(job);
  return CollectiveRequest(std::move(h));
}

}  // namespace

CollectiveRequest Team::start_barrier() {
  TeamState& t = team_of(s_, "start_barrier");
  Team team = *this;
  return launch(t, "barrier", [team]() mutable { team.barrier(); });
}

CollectiveRequest Team::start_broadcast(const Window& x, int root) {
  TeamState& t = team_of(s_, "start_broadcast");
  precheck(t, "broadcast", {{&x, "x"}});
  Team team = *this;
  return launch(t, "broadcast", [team, x, root]() mutable { team.broadcast(x, root); });
}

CollectiveRequest Team::start_allgather(const Window& stage, const Window& data) {
  TeamState& t = team_of(s_, "start_allgather");
  precheck(t, "allgather", {{&stage, "stage"}, {&data, "data"}});
  Team team = *this;
  return launch(t, "allgather", [team, stage, data]() mutable { team.allgather(stage, data); });
}

CollectiveRequest Team::start_reduce_scatter(const Window& data, ReduceOp op) {
  TeamState& t = team_of(s_, "start_reduce_scatter");
  precheck(t, "reduce_scatter", {{&data, "data"}});
  Team team = *this;
  return launch(t, "reduce_scatter", [team, data, op]() mutable { team.reduce_scatter(data, op); });
}

CollectiveRequest Team::start_reduce_scatter(const Window& data, const Window& out, ReduceOp op) {
  TeamState& t = team_of(s_, "start_reduce_scatter");
  precheck(t, "reduce_scatter", {{&data, "data"}, {&out, "out"}});
  Team team = *this;
  return launch(t, "reduce_scatter", [team, data, out, op]() mutable { team.reduce_scatter(data, out, op); });
}

CollectiveRequest Team::start_allreduce(const Window& x, ReduceOp op, AllreduceMode mode) {
  return start_allreduce(x, x, op, mode);
}

CollectiveRequest Team::start_allreduce(const Window& src, const Window& dst, ReduceOp op, AllreduceMode mode) {
  TeamState& t = team_of(s_, "start_allreduce");
  precheck(t, "allreduce", {{&src, "src"}, {&dst, "dst"}});
  Team team = *this;
  return launch(t, "allreduce", [team, src, dst, op, mode]() mutable { team.allreduce(src, dst, op, mode); });
}

CollectiveRequest Team::start_all_to_all(const Window& stage, const Window& data) {
  TeamState& t = team_of(s_, "start_all_to_all");
  precheck(t, "all_to_all", {{&stage, "stage"}, {&data, "data"}});
  Team team = *this;
  return launch(t, "all_to_all", [team, stage, data]() mutable { team.all_to_all(stage, data); });
}

CollectiveRequest Team::start_all_to_all_v(const Window& send, const std::vector<int64_t>& send_counts,
                                           const std::vector<int64_t>& send_offsets, const Window& recv,
                                           const std::vector<int64_t>& recv_counts,
                                           const std::vector<int64_t>& recv_offsets) {
  TeamState& t = team_of(s_, "start_all_to_all_v");
  precheck(t, "all_to_all_v", {{&send, "send"}, {&recv, "recv"}});
  Team team = *this;
  return launch(t, "all_to_all_v", [team, send, send_counts, send_offsets, recv, recv_counts, recv_offsets]() mutable {
    team.all_to_all_v(send, send_counts, send_offsets, recv, recv_counts, recv_offsets);
  });
}

CollectiveRequest Team::start_all_to_all_v(const Window& send, const std::vector<int64_t>& send_counts,
                                           const Window& recv, const std::vector<int64_t>& recv_counts) {
  TeamState& t = team_of(s_, "start_all_to_all_v");
  precheck(t, "all_to_all_v", {{&send, "send"}, {&recv, "recv"}});
  Team team = *this;
  return launch(t, "all_to_all_v", [team, send, send_counts, recv, recv_counts]() mutable {
    team.all_to_all_v(send, send_counts, recv, recv_counts);
  });
}

}  // namespace rwin
