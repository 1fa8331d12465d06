// Who serves a rank's arrivals, and when: its receiver thread (receiver_main: asleep in epoll_wait
// with no timeout unless a handshake is pending, so an idle rank costs no CPU; after serving a passive
// target it polls for receiver_spin_ns_ first, so a closely following request costs no wake-up), or
// its owner while that waits inside rwin (serve_direct: the owner's polls recv() its few sockets
// directly; idle_wait: its sleeps end at an arrival). serve() handles what the epoll set reports.
// What serving does with a socket's bytes: tcp_target.cpp.
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "transport/tcp/owner_nap.h"
#include "transport/tcp/tcp_transport_impl.h"

namespace rwin::transport::tcp {

using Clock = std::chrono::steady_clock;

void TcpTransport::receiver_main() noexcept {
  // While the owner is inside rwin (it polled, or slept in idle_wait, within kOwnerWindow, or
  // kOversubscribedOwnerWindow on a host with more ranks than CPUs: owner_window_ns_) it
  // serves its own arrivals with no thread switch; this thread then stays out of its way: it
  // neither serves nor sits in epoll_wait (whose level-triggered wake-ups would only find the work
  // done, and cost two context switches per message on the owner's CPU), but naps until the owner
  // has been away for kOwnerWindow (longer naps while it polls on: owner_nap.h), taking rx_mu_ once a
  // nap only to park the owner's sockets (tcp_duplex.cpp). Then it puts them back, sleeps in
  // epoll_wait and serves each arrival.
  const auto owner_here = [this] {
    if (!owner_serves_) return int64_t{0};
    const int64_t window = owner_window_ns_.load(std::memory_order_relaxed);
    const int64_t away = now_ns() - owner_seen_ns_.load(std::memory_order_seq_cst);
    return away < window ? window - away : int64_t{0};
  };
  int64_t spin_until = 0;  // polling (not sleeping) until then: see receiver_spin_ns_
  uint32_t spin_rounds = 0;  // serve_direct's count of them (its epoll rounds)
  OwnerNap nap;              // longer naps while the owner polls on (owner_nap.h)
  while (!stop_.load(std::memory_order_acquire)) {
    napping_.store(true, std::memory_order_seq_cst);  // before the look: owner_away() ends what follows
    const int64_t nap_ns = nap.next(owner_here(), owner_window_ns_.load(std::memory_order_relaxed));
    if (nap_ns <= 0) napping_.store(false, std::memory_order_relaxed);
    if (nap_ns > 0) {
      // The owner serves: its sockets leave the epoll set (a lock every nap: the owner holds the
      // receive side for one round of its poll at a time, and skips a round it finds taken).
      if (park_ && peer_count() <= kDirectPeers) {
        std::lock_guard<std::mutex> g(rx_mu_);
        park_sockets();
      }
      // A nap that arm() ends early (nap_fd_): the owner is about to sleep, so this thread serves.
      pollfd pfd{nap_fd_, POLLIN, 0};
      const timespec ts{nap_ns / 1000000000, static_cast<long>(nap_ns % 1000000000)};
      if (::ppoll(&pfd, 1, &ts, nullptr) > 0) {
        uint64_t x;
        while (::read(nap_fd_, &x, sizeof x) > 0) {
        }
      }
      napping_.store(false, std::memory_order_relaxed);
      receiver_wakes_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (spin_until > 0 && now_ns() < spin_until && !oversubscribed()) {
      // Served a moment ago: poll, so the next request costs no wake-up; its sockets directly, as
      // the owner does (serve_direct: an arrival costs one recv() instead of epoll_wait and a recv();
      // the passive agent's 4 KiB get: bench/RESULTS.md). A pending handshake ends the spin (its
      // deadline is kept by epoll_wait's timeout below).
      int served = -1;
      {
        std::lock_guard<std::mutex> g(rx_mu_);
        if (pending_.empty()) served = serve_direct(spin_rounds) ? 1 : 0;
      }
      receiver_spins_.fetch_add(1, std::memory_order_relaxed);
      if (served > 0) {
        notify_owner();
        spin_until = now_ns() + receiver_spin_ns_;
      }
      if (served >= 0) continue;
    }
    spin_until = 0;
    int timeout = -1;
    {
      std::lock_guard<std::mutex> g(rx_mu_);
      unpark_sockets();  // this thread serves from here: epoll must see every socket
      if (!pending_.empty()) {
        auto first = pending_.front().deadline;
        for (const auto& pc : pending_) first = std::min(first, pc.deadline);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(first - Clock::now()).count();
        timeout = static_cast<int>(std::clamp<long long>(ms + 1, 1, 1000));
      }
    }
    epoll_event ev;
    const int n = ::epoll_wait(epoll_fd_, &ev, 1, timeout);
    receiver_wakes_.fetch_add(1, std::memory_order_relaxed);
    if (n < 0 && errno != EINTR) {
      const std::string why = "epoll_wait failed: " + errno_text(errno);
      for (int p = 0; p < peer_count(); ++p) fail(p, why);
      return;
    }
    if (owner_here() > 0) continue;  // it came back meanwhile: its poll() serves
    int served;
    {
      std::lock_guard<std::mutex> g(rx_mu_);
      served = serve();  // takes the events again: the owner may have served them meanwhile
    }
    if (served > 0) {
      notify_owner();
      // Only while the owner is away (owner_serves_): with RWIN_TCP_OWNER_SERVES=0 this thread serves
      // a rank that waits inside rwin too, and a spin beside that rank's own wait took its CPU
      // (put+notify+wait 25 -> 79 us with 2 ranks on 2 CPUs).
      if (receiver_spin_ns_ > 0 && owner_serves_) spin_until = now_ns() + receiver_spin_ns_;
    }
  }
}

bool TcpTransport::idle_wait(std::chrono::microseconds max) noexcept {
  if (!owner_serves_ || epoll_fd_ < 0) return false;
  owner_seen_ns_.store(now_ns(), std::memory_order_relaxed);
  // The epoll set is readable while any of its sockets is: an arrival ends the sleep at once. The
  // sockets the thread may park are watched beside it, parked now or not (it may park one while we
  // sleep). If the thread holds the receive side now, the set alone: it parks nothing while it
  // serves, and what it parks meanwhile wakes us once it takes over (after owner_window()).
  pollfd pfd[1 + kDirectPeers];
  nfds_t n = 0;
  pfd[n++] = {epoll_fd_, POLLIN, 0};
  if (park_ && peer_count() <= kDirectPeers && rx_mu_.try_lock()) {
    for (int p = 0; p < peer_count(); ++p) {
      const Peer& P = *peers_[static_cast<size_t>(p)];
      if (duplex(p) && P.in_fd >= 0 && !P.failed.load(std::memory_order_relaxed)) pfd[n++] = {P.in_fd, POLLIN, 0};
    }
    rx_mu_.unlock();
  }
  const timespec ts{0, static_cast<long>(std::chrono::nanoseconds(max).count())};
  (void)::ppoll(pfd, n, &ts, nullptr);
  owner_seen_ns_.store(now_ns(), std::memory_order_relaxed);
  return true;
}

// An arrival found by epoll costs two syscalls (epoll_wait, then recv); with one or two sockets to
// watch, a recv on each finds it with one, which is what a busy-polling TCP ping-pong pays. What
// only the epoll set reports (the listener, handshakes, wake-ups, replies waiting for room, a close
// on a socket nobody reads now, frames on this rank's connection to itself, which the core does not
// use: rma_mode "direct"; a peer's connection that has carried nothing yet, Peer::in_heard) waits
// at most kEpollEvery rounds; a pending handshake or more sockets take serve() every round (three
// recv()s a round cost more than they save: 4 ranks on 2 cores ran collectives 1.14x slower). The
// replies the owner awaits are read first, and a round ends at the first socket that held
// something, so an arrival is not followed by a miss before the caller sees it.
bool TcpTransport::serve_direct(uint32_t& rounds) noexcept {
  const int n = peer_count();
  if ((++rounds % kEpollEvery) == 0 || !pending_.empty() || n > kDirectPeers) return serve() > 0;
  int replies[kDirectSockets], requests[kDirectSockets];  // peers whose out/in socket to read
  int nr = 0, nq = 0;
  for (int p = 0; p < n; ++p) {
    const Peer& P = *peers_[static_cast<size_t>(p)];
    if (P.failed.load(std::memory_order_relaxed) || (!run_time_ && p == rank_)) continue;
    if (P.has_lanes_in) return serve() > 0;  // striping: only the epoll set sees the lanes
    // A duplex connection brings the replies with the requests (on_in reads both).
    const bool awaits = P.awaiting_n.load(std::memory_order_relaxed) > 0;
    const bool in = P.in_fd >= 0 && (P.in_heard || (duplex(p) && awaits));
    const bool out = !duplex(p) && P.out_fd >= 0 && (awaits || P.out_land.left > 0);
    if (P.want_out || nr + nq + in + out > kDirectSockets) return serve() > 0;
    if (out) replies[nr++] = p;
    if (in) requests[nq++] = p;
  }
  const uint64_t before = received_.load(std::memory_order_relaxed);
  const auto more = [&](int p) {  // nothing arrived yet this round, and p can still be read
    return received_.load(std::memory_order_relaxed) == before &&
           !peers_[static_cast<size_t>(p)]->failed.load(std::memory_order_relaxed);
  };
  for (int i = 0; i < nr; ++i) {  // awaited replies first
    if (more(replies[i])) on_out(replies[i]);
  }
  for (int i = 0; i < nq; ++i) {
    if (more(requests[i])) on_in(requests[i]);
  }
  return received_.load(std::memory_order_relaxed) != before;
}

int TcpTransport::serve() noexcept {
  epoll_event evs[64];
  const int n = ::epoll_wait(epoll_fd_, evs, 64, 0);
  for (int i = 0; i < n; ++i) {
    const auto kind = static_cast<Tag>(evs[i].data.u64 >> 32);
    const auto v = static_cast<uint32_t>(evs[i].data.u64);
    switch (kind) {
      case kWake: {
        uint64_t x;
        while (::read(wake_fd_, &x, sizeof x) > 0) {
        }
        if (close_listener_.load() && listen_fd_ >= 0) {
          ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
          ::close(listen_fd_);
          listen_fd_ = -1;
        }
        break;
      }
      case kListen:
        on_accept();
        break;
      case kPending:
        for (size_t k = 0; k < pending_.size(); ++k) {
          if (pending_[k].fd == static_cast<int>(v)) {
            on_pending(k);
            break;
          }
        }
        break;
      case kIn:
        if (evs[i].events & EPOLLOUT) on_in_writable(static_cast<int>(v));
        if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_in(static_cast<int>(v));
        break;
      case kOut:
        on_out(static_cast<int>(v));
        break;
      case kLane: {
        const int p = static_cast<int>(v & 0xffffff);
        on_lane(p, static_cast<int>(v >> 24));
        if (!peers_[static_cast<size_t>(p)]->failed) (void)send_replies(p);  // refusals of lane writes
        break;
      }
    }
  }
  int served = n < 0 ? 0 : n;
  for (int p = 0; parked_ > 0 && p < peer_count(); ++p) {  // epoll does not see these (park_sockets)
    Peer& P = *peers_[static_cast<size_t>(p)];
    if (!P.parked || P.failed) continue;
    const uint64_t before = received_.load(std::memory_order_relaxed);
    on_in(p);
    served += received_.load(std::memory_order_relaxed) != before;
  }
  if (pending_.empty()) return served;
  const auto now = Clock::now();
  for (size_t k = pending_.size(); k-- > 0;) {
    if (pending_[k].deadline <= now) drop_pending(k, "not authenticated within " + std::to_string(kAuthDeadline.count()) + " s");
  }
  return served;
}

}  // namespace rwin::transport::tcp
