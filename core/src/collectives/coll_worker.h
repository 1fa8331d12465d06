// The nonblocking collectives' worker (Team::start_*, rwin/collectives.h "CollectiveRequest"): one
// thread per context, made at the first start, that runs the started collectives in start order with
// the blocking code, while the context is lent to it (ContextImpl::lent).
//
// Why a thread and not a schedule progressed by test() (libnbc's way): a started collective then
// moves while its caller computes without calling rwin at all, which is the point for the runtime
// (its host thread waits on a device kernel), and every algorithm, deadline and mismatch check stays
// the one the blocking call runs. The cost is a thread hand-off per start (a condition variable) and
// the rule that the caller leaves the context alone until the collective finished.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace rwin::detail {

struct ContextImpl;

struct CollJob {
  std::string what;             // "allreduce on world"
  std::function<void()> body;   // the blocking collective (holds its Team and Window handles)
  std::atomic<bool> done{false};
  std::exception_ptr error;     // written before `done` is set (release), read after (acquire)
  class CollWorker* worker = nullptr;
};

// What a CollectiveRequest holds: when the last copy goes before its collective finished, it waits
// for it (a started collective cannot be withdrawn: the other members count on it), dropping its error.
struct CollHandle {
  std::shared_ptr<CollJob> job;
  ~CollHandle();
};

class CollWorker {
 public:
  explicit CollWorker(ContextImpl& c) : c_(c) {}
  ~CollWorker() { stop(); }
  CollWorker(const CollWorker&) = delete;
  CollWorker& operator=(const CollWorker&) = delete;

  // Queues `job` and lends the context to the worker (made at the first call). Caller thread.
  void start(const std::shared_ptr<CollJob>& job);
  // Blocks until `job` finished.
  void wait(CollJob& job);
  // Waits for every queued job, then ends the thread. Never throws.
  void stop() noexcept;
  std::thread::id id() const noexcept { return id_.load(std::memory_order_acquire); }
  // The job running now or next ("allreduce on world"), for the message of a refused call.
  std::string current() const;

 private:
  void main() noexcept;

  ContextImpl& c_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::shared_ptr<CollJob>> queue_;  // the front one runs
  bool stopping_ = false;
  std::thread thread_;
  std::atomic<std::thread::id> id_{};
};

}  // namespace rwin::detail
