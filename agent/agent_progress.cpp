// The agent's progress: transport completions, the control listener and connections (handshake,
// strangers and garbage, keepalive, imports, revocation), and the progress thread.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/agent_impl.h"
#include "bootstrap/auth.h"
#include "common/blob.h"
#include "common/log.h"

namespace rwin {

namespace tp = transport;
using agent::Msg;
using agent::MsgType;

namespace {
constexpr size_t kMaxHandshaking = 64;         // strangers that may hold a socket at once
constexpr size_t kMaxWbuf = 4 << 20;           // a peer that reads none of its control messages
constexpr auto kControlEvery = std::chrono::microseconds(100);  // between control polls in hot loops
constexpr int kIdleSpins = 16;  // timer schedule: idle rounds the thread yields before it sleeps
constexpr auto kSpinWindow = std::chrono::microseconds(50);  // spinning after work before a sleep
constexpr auto kSleepCap = std::chrono::milliseconds(200);  // longest sleep: a missed wake-up costs this

long long ms_since(AgentClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(AgentClock::now() - t).count();
}
}  // namespace

bool AgentImpl::progress_once(bool control_now) {
  if (closed) return false;
  comps.clear();
  tr->poll(comps);
  const bool any = !comps.empty();
  for (const auto& c : comps) on_completion(c);
  comps.clear();
  if (!revoke_retry.empty()) {
    auto retry = std::move(revoke_retry);
    revoke_retry.clear();
    for (const auto& r : retry) revoke_flush(r.conn, r.id, r.gen);
  }
  const auto now = AgentClock::now();
  if (control_now || now - last_control >= kControlEvery) {
    last_control = now;
    control_step();
  }
  return any;
}

void AgentImpl::on_completion(const tp::Completion& comp) {
  if (auto it = tracks.find(comp.cookie); it != tracks.end()) {
    Track* t = it->second;
    tracks.erase(it);
    --t->inflight;
    if (!comp.ok && t->error.empty()) t->error = comp.error;
    return;
  }
  if (auto it = revoke_flushes.find(comp.cookie); it != revoke_flushes.end()) {
    const RevokeFlush r = it->second;
    revoke_flushes.erase(it);
    auto c = conns.find(r.conn);
    if (c != conns.end() && c->second->state == Conn::State::Ready) {
      Msg m;
      m.type = MsgType::RevokeAck;
      m.region_id = r.id;
      m.generation = r.gen;
      send(*c->second, m);
    }
    return;
  }
  if (auto it = handshake_flushes.find(comp.cookie); it != handshake_flushes.end()) {
    const uint64_t cid = it->second;
    handshake_flushes.erase(it);
    auto c = conns.find(cid);
    if (c == conns.end() || c->second->state != Conn::State::AwaitWireup) return;
    if (!comp.ok) {
      fail_conn(*c->second, "transport wire-up failed: " + comp.error);
      return;
    }
    Msg m;
    m.type = MsgType::Ready;
    send(*c->second, m);
    if (c->second->state == Conn::State::AwaitWireup) mark_ready(*c->second);
  }
  // Anything else belongs to a call that gave up (peer failed, deadline): nobody waits for it.
}

// The importer's side of a revocation: once a Flush to the owner completed, every write we
// issued before it has landed or been refused there; then the acknowledgement may go.
void AgentImpl::revoke_flush(uint64_t cid, uint64_t id, uint64_t gen) {
  auto it = conns.find(cid);
  if (it == conns.end() || it->second->state != Conn::State::Ready) return;
  Conn& c = *it->second;
  tp::Work w;
  w.op = tp::Op::Flush;
  w.peer = c.tpeer;
  w.cookie = next_cookie++;
  const tp::PostResult r = tr->post(w);
  if (r == tp::PostResult::Ok) {
    revoke_flushes[w.cookie] = RevokeFlush{cid, id, gen};
  } else if (r == tp::PostResult::Busy) {
    revoke_retry.push_back(RevokeFlush{cid, id, gen});
  } else {
    // Done inside post(), or the peer failed (nothing more of ours reaches it): ack now.
    Msg m;
    m.type = MsgType::RevokeAck;
    m.region_id = id;
    m.generation = gen;
    send(c, m);
  }
}

void AgentImpl::send(Conn& c, const Msg& m) {
  if (c.state == Conn::State::Failed || !c.fd) return;
  const auto f = agent::encode(m);
  c.wbuf.insert(c.wbuf.end(), f.begin(), f.end());
  c.last_tx = AgentClock::now();
  flush_wbuf(c);
}

void AgentImpl::flush_wbuf(Conn& c) {
  while (!c.wbuf.empty() && c.fd) {
    const ssize_t n = ::send(c.fd.get(), c.wbuf.data(), c.wbuf.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.wbuf.erase(c.wbuf.begin(), c.wbuf.begin() + n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    fail_conn(c, std::string("control connection send failed: ") + std::strerror(errno));
    return;
  }
  if (c.wbuf.size() > kMaxWbuf) {
    fail_conn(c, "does not read its control connection (" + std::to_string(c.wbuf.size()) + " bytes queued)");
  } else if (!c.wbuf.empty()) {
    nudge();  // a sleeping progress thread must watch the socket for room
  }
}

void AgentImpl::mark_ready(Conn& c) {
  c.state = Conn::State::Ready;
  const size_t dir = c.outbound ? 0 : 1;
  AgentCounters::add(counters.connected[dir]);
  counters.peers[dir].fetch_add(1, std::memory_order_relaxed);
}

void AgentImpl::fail_conn(Conn& c, const std::string& why, bool orderly) {
  if (c.state == Conn::State::Failed) return;
  const bool established = c.state == Conn::State::Ready;
  // Counted as the log below names it: an orderly close, a peer's failure, or a refused stranger.
  const size_t dir = c.outbound ? 0 : 1;
  if (established) counters.peers[dir].fetch_sub(1, std::memory_order_relaxed);
  if (orderly) {
    AgentCounters::add(counters.closes[dir]);
  } else if (established || c.outbound) {
    AgentCounters::add(counters.failures[dir]);
  } else {
    AgentCounters::add(counters.refused);
  }
  c.state = Conn::State::Failed;
  c.error = why;
  c.fd.reset();
  c.wbuf.clear();
  c.rbuf.clear();
  if (c.tpeer >= 0 && tr) tr->fail_peer(c.tpeer, describe + ": peer agent " + c.label + " failed: " + why);
  if (trace && (established || c.outbound)) {  // strangers refused before a handshake are not peers
    trace->instant(orderly ? "peer closed" : "peer failed", "failure", -1,
                   "peer agent " + c.label + " (" + (c.outbound ? "outbound" : "inbound") + " connection): " + why);
  }
  for (PendingRevoke* p : revokes) p->conns.erase(c.id);
  if (orderly) {
    RWIN_LOG(Info, Core, "rwin: %s: peer agent %s (%s connection) %s", describe.c_str(), c.label.c_str(),
             c.outbound ? "outbound" : "inbound", why.c_str());
  } else if (established || c.outbound) {
    RWIN_LOG(Warn, Core, "rwin: %s: peer agent %s (%s connection) failed: %s", describe.c_str(), c.label.c_str(),
             c.outbound ? "outbound" : "inbound", why.c_str());
  } else {
    RWIN_LOG(Warn, Core, "rwin: %s: refused a control connection from %s: %s", describe.c_str(), c.sock.c_str(),
             why.c_str());
  }
}

void AgentImpl::drop_stranger(Conn& c, const std::string& why) {
  Msg m;
  m.type = MsgType::Refuse;
  m.text = why;
  send(c, m);  // best effort: the socket closes right after
  fail_conn(c, why);
}

void AgentImpl::accept_all() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t sl = sizeof ss;
    const int fd = ::accept4(listen_fd.get(), reinterpret_cast<sockaddr*>(&ss), &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        RWIN_LOG(Warn, Core, "rwin: %s: accept failed: %s", describe.c_str(), std::strerror(errno));
      }
      return;
    }
    bootstrap::detail::Fd owned(fd);
    const std::string from = bootstrap::detail::sockaddr_text(reinterpret_cast<sockaddr*>(&ss));
    size_t handshaking = 0;
    for (const auto& [id, c] : conns) handshaking += c->state == Conn::State::AwaitHello ? 1 : 0;
    if (handshaking >= kMaxHandshaking) {
      RWIN_LOG(Warn, Core, "rwin: %s: refused a control connection from %s: %zu handshakes already pending",
               describe.c_str(), from.c_str(), handshaking);
      AgentCounters::add(counters.refused);
      continue;
    }
    bootstrap::detail::set_nodelay(fd);
    auto c = std::make_unique<Conn>();
    c->id = next_conn++;
    c->fd = std::move(owned);
    c->label = from;
    c->sock = from;
    c->state = Conn::State::AwaitHello;
    c->deadline = AgentClock::now() + opt.connect_timeout;
    c->last_rx = c->last_tx = AgentClock::now();
    conns.emplace(c->id, std::move(c));
    nudge();  // a sleeping progress thread must watch the new socket
  }
}

void AgentImpl::read_conn(Conn& c) {
  uint8_t buf[64 << 10];
  for (;;) {
    const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      c.rbuf.insert(c.rbuf.end(), buf, buf + n);
      c.last_rx = AgentClock::now();
      if (static_cast<size_t>(n) < sizeof buf) break;
      continue;
    }
    if (n == 0) {
      fail_conn(c, c.state == Conn::State::Ready ? "closed its control connection (the process ended or closed its agent)"
                                                 : "closed the connection during the handshake");
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    fail_conn(c, std::string("control connection: ") + std::strerror(errno));
    return;
  }
  size_t at = 0;
  while (c.state != Conn::State::Failed && c.rbuf.size() - at >= 4) {
    const uint32_t len = blob::load_u32(c.rbuf.data() + at);
    if (len < 6 || len > agent::kMaxFrame) {
      drop_stranger(c, "sent a " + std::to_string(len) + "-byte frame (a frame holds 6 to " +
                           std::to_string(agent::kMaxFrame) + " bytes): not an rwin agent");
      return;
    }
    if (c.rbuf.size() - at - 4 < len) break;
    std::string why;
    auto m = agent::decode_body(std::span(c.rbuf.data() + at + 4, len), why);
    at += 4 + len;
    if (!m) {
      drop_stranger(c, why);
      return;
    }
    handle(c, *m);
  }
  if (c.state != Conn::State::Failed) c.rbuf.erase(c.rbuf.begin(), c.rbuf.begin() + static_cast<std::ptrdiff_t>(at));
}

void AgentImpl::handle(Conn& c, const Msg& m) {
  const auto unexpected = [&] {
    drop_stranger(c, std::string("sent an unexpected ") + agent::msg_name(m.type) + " frame");
  };
  if (m.type == MsgType::Ping) {
    if (c.state != Conn::State::Ready) unexpected();
    return;
  }
  if (m.type == MsgType::Refuse) {
    fail_conn(c, "refused the connection: " + m.text);
    return;
  }
  if (m.type == MsgType::Bye) {  // an orderly close: the same end for its regions, logged as news
    if (c.state != Conn::State::Ready) return unexpected();
    fail_conn(c, "closed its agent (an orderly close)", true);
    return;
  }
  switch (c.state) {
    case Conn::State::AwaitHello: {
      if (m.type != MsgType::Hello) return unexpected();
      if (!bootstrap::auth::equal(m.token.data(), token.data(), token.size())) {
        return drop_stranger(c, "presented a wrong token (a descriptor of this agent is needed to connect)");
      }
      if (m.text.empty()) return drop_stranger(c, "hello names no control address");
      try {
        c.tpeer = tr->add_peer();
        tr->connect_peer(c.tpeer, m.endpoint);
        Msg w;
        w.type = MsgType::Welcome;
        w.endpoint = tr->local_endpoint(c.tpeer);
        c.label = m.text;
        c.state = Conn::State::AwaitReady;
        send(c, w);
      } catch (const tp::TransportError& e) {
        drop_stranger(c, std::string("transport endpoint refused: ") + e.what());
      }
      return;
    }
    case Conn::State::AwaitWelcome: {
      if (m.type != MsgType::Welcome) return unexpected();
      try {
        tr->connect_peer(c.tpeer, m.endpoint);
      } catch (const tp::TransportError& e) {
        return fail_conn(c, std::string("transport endpoint refused: ") + e.what());
      }
      // A Flush completes the transport's wire-up both ways before either side posts data.
      tp::Work w;
      w.op = tp::Op::Flush;
      w.peer = c.tpeer;
      w.cookie = next_cookie++;
      c.state = Conn::State::AwaitWireup;
      const tp::PostResult r = tr->post(w);
      if (r == tp::PostResult::Ok) {
        handshake_flushes[w.cookie] = c.id;
      } else if (r == tp::PostResult::PeerFailed) {
        fail_conn(c, "transport wire-up failed: " + tr->peer_error(c.tpeer));
      } else {  // Busy at the first op of a fresh peer, or done inside post(): no wire-up wait
        Msg rd;
        rd.type = MsgType::Ready;
        send(c, rd);
        if (c.state == Conn::State::AwaitWireup) mark_ready(c);
      }
      return;
    }
    case Conn::State::AwaitReady:
      if (m.type != MsgType::Ready) return unexpected();
      mark_ready(c);
      return;
    case Conn::State::AwaitWireup:
    case Conn::State::Ready:
      break;
    case Conn::State::Failed: return;
  }
  if (c.outbound) {
    if (m.type == MsgType::ImportReply) {
      if (auto it = import_replies.find(m.req); it != import_replies.end()) it->second = m.status;
      return;
    }
    if (m.type == MsgType::Revoke) {
      for (auto& w : imports) {
        auto r = w.lock();
        if (r && r->conn == c.id && r->id == m.region_id && r->gen == m.generation) r->stale = true;
      }
      revoke_flush(c.id, m.region_id, m.generation);
      return;
    }
    return unexpected();
  }
  if (m.type == MsgType::Import) {
    Msg rep;
    rep.type = MsgType::ImportReply;
    rep.req = m.req;
    rep.status = 1;
    if (m.region_id < slots.size()) {
      const auto& s = slots[static_cast<size_t>(m.region_id)];
      if (s.live && s.live->gen == m.generation) {
        s.live->importers.insert(c.id);
        rep.status = 0;
      }
    }
    send(c, rep);
    return;
  }
  if (m.type == MsgType::RevokeAck) {
    for (PendingRevoke* p : revokes) {
      if (p->id == m.region_id && p->gen == m.generation) p->conns.erase(c.id);
    }
    return;
  }
  unexpected();
}

void AgentImpl::control_step() {
  std::vector<pollfd> pf;
  std::vector<Conn*> who;
  pf.reserve(conns.size() + 1);
  pf.push_back(pollfd{listen_fd.get(), POLLIN, 0});
  who.push_back(nullptr);
  for (auto& [id, c] : conns) {
    if (!c->fd) continue;
    pf.push_back(pollfd{c->fd.get(), static_cast<short>(POLLIN | (c->wbuf.empty() ? 0 : POLLOUT)), 0});
    who.push_back(c.get());
  }
  const int n = ::poll(pf.data(), pf.size(), 0);
  if (n > 0) {
    for (size_t i = 1; i < pf.size(); ++i) {
      Conn& c = *who[i];
      if (pf[i].revents & POLLOUT) flush_wbuf(c);
      if (c.fd && (pf[i].revents & (POLLIN | POLLHUP | POLLERR))) read_conn(c);
    }
    if (pf[0].revents & POLLIN) accept_all();
  }
  // Deadlines: handshakes, keepalives.
  const auto now = AgentClock::now();
  for (auto& [id, cp] : conns) {
    Conn& c = *cp;
    switch (c.state) {
      case Conn::State::Failed: break;
      case Conn::State::Ready:
        if (now - c.last_rx > opt.keepalive_timeout) {
          fail_conn(c, "silent for " + std::to_string(ms_since(c.last_rx)) + " ms (keepalive_timeout " +
                           std::to_string(opt.keepalive_timeout.count()) + " ms)");
        } else if (now - c.last_tx >= opt.keepalive_interval) {
          Msg p;
          p.type = MsgType::Ping;
          send(c, p);
        }
        break;
      default:
        if (now > c.deadline) {
          if (c.outbound) {
            fail_conn(c, "handshake did not finish within " + std::to_string(opt.connect_timeout.count()) +
                             " ms (connect_timeout)");
          } else {
            drop_stranger(c, "no complete handshake within " + std::to_string(opt.connect_timeout.count()) +
                                 " ms (connect_timeout)");
          }
        }
    }
  }
  // Failed inbound connections are forgotten (nothing refers to them); failed outbound ones stay
  // so the remote regions they served keep naming the failure.
  std::erase_if(conns, [](const auto& kv) { return kv.second->state == Conn::State::Failed && !kv.second->outbound; });
}

// What an idle sleep watches and for how long: the listener, the control sockets (room to write
// where bytes are queued), the transport's wake-up descriptor (armed last, right before the sleep)
// and the wake descriptor; until the next keepalive or handshake deadline, at most `cap`. -1 when
// it may not sleep: work of ours is pending, a deadline is due, or nothing would wake it for the
// transport's traffic (need_events: the caller waits for transport work; otherwise the transport
// must serve peers without us, as verbs does, and nothing of ours may be in flight). -2 when the
// transport refused to arm because events are pending (the usual answer right after a wake-up,
// as arming drains them): poll again, then arm again.
int AgentImpl::prepare_sleep(std::vector<pollfd>& pf, std::chrono::milliseconds cap, bool need_events) {
  if (closed || !revoke_retry.empty()) return -1;
  // Nothing of ours in flight, nobody waiting for a peer's write, and a transport that serves peers
  // without us: its wake-ups would only report requests it served already (tcp's receiver thread;
  // measured: each woke this thread too, and a sleeping tcp server's 4 KiB gets cost twice a
  // spinning one's). Sleep on the control sockets alone and leave the serving to the transport.
  const bool passive = !need_events && tr->serves_passively() && revoke_flushes.empty() &&
                       handshake_flushes.empty() && tracks.empty();
  const int efd = passive ? -1 : tr->wait_fd();
  if (efd < 0 && !passive) return -1;  // nothing would wake us for the transport's work
  const auto now = AgentClock::now();
  auto until = now + cap;
  for (const auto& [id, c] : conns) {
    if (c->state == Conn::State::Ready) {
      until = std::min({until, c->last_tx + opt.keepalive_interval, c->last_rx + opt.keepalive_timeout});
    } else if (c->state != Conn::State::Failed) {
      until = std::min(until, c->deadline);
    }
  }
  if (until <= now) return -1;
  pf.clear();
  pf.push_back(pollfd{listen_fd.get(), POLLIN, 0});
  for (const auto& [id, c] : conns) {
    if (c->fd) pf.push_back(pollfd{c->fd.get(), static_cast<short>(POLLIN | (c->wbuf.empty() ? 0 : POLLOUT)), 0});
  }
  if (efd >= 0) pf.push_back(pollfd{efd, POLLIN, 0});
  pf.push_back(pollfd{wake_fd.get(), POLLIN, 0});
  if (efd >= 0 && !tr->arm()) return -2;
  if (passive) tr->owner_away();
  // Rounded up: a 0 ms poll before a deadline only spins.
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(until - now).count());
}

// A blocking call (wait, completions) sleeps with the lock held: it is the one progressing. The
// transport was armed by us, not by the progress thread, whose own sleep may then miss the
// transport's next event: it is nudged to re-arm after our sleep.
bool AgentImpl::sleep_locked(AgentClock::time_point deadline, bool need_events) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - AgentClock::now());
  if (left.count() <= 0) return false;
  const int ms = prepare_sleep(sleep_fds, std::min<std::chrono::milliseconds>(left, kSleepCap), need_events);
  if (ms < 0) return false;  // the caller polls again either way
  sleep_fds.pop_back();      // the wake descriptor is the thread's (we write it, it drains it)
  ::poll(sleep_fds.data(), sleep_fds.size(), ms);
  nudge();
  return true;
}

void AgentImpl::nudge() noexcept {
  if (!thread.joinable() || !wake_fd || std::this_thread::get_id() == thread.get_id()) return;
  (void)::eventfd_write(wake_fd.get(), 1);
}

// Serves peers while no thread of the process is inside rwin. Idle, it sleeps in poll(2) on the
// sockets and the transport's wake-up descriptor (prepare_sleep), so it costs no CPU and wakes for
// the next request; where the transport has no such descriptor and needs our progress, it polls
// on a timer instead (sleeps of up to 250 us, which a served request may wait).
void AgentImpl::thread_main() {
  int idle = 0;  // timer schedule: rounds without work
  auto active = AgentClock::now();  // the last completion or wake-up
  auto refused = AgentClock::time_point{};  // the first arm() refusal of a row, or none
  bool after_call = false;                  // a user call just ended
  std::vector<pollfd> pf;
  while (!stop.load(std::memory_order_relaxed)) {
    if (const int n = callers.load(std::memory_order_acquire); n > 0) {  // calls progress: out of their way
      callers.wait(n, std::memory_order_acquire);
      after_call = true;
      continue;
    }
    if (after_call) {  // a caller that just left is likely back soon (a loop of calls): leave it the lock
      after_call = false;
      timespec ts{0, 100 * 1000};
      nanosleep(&ts, nullptr);
      active = AgentClock::now();
      continue;
    }
    bool any = false;
    bool spin = false;
    int sleep_ms = -1;
    {
      std::lock_guard lk(mu);
      if (closed) return;
      AgentCounters::add(counters.rounds);
      try {
        any = progress_once(true);
        // Serving a peer's request completes nothing of ours: a short spin after each wake-up
        // catches the requests that follow it (a get's next get) without a sleep in between.
        spin = !any && AgentClock::now() - active < kSpinWindow;
        if (!any && !spin) sleep_ms = prepare_sleep(pf, kSleepCap, false);
      } catch (const std::exception& e) {
        RWIN_LOG(Warn, Core, "rwin: %s: progress thread: %s", describe.c_str(), e.what());
      }
    }
    if (any) {
      idle = 0;
      active = AgentClock::now();
      continue;
    }
    if (spin) continue;  // no sched_yield: on a loaded host one costs a whole time slice
    // Arm refused: events pending (UCX's shared memory drains one wake-up datagram per arm, so a
    // backlog takes as many rounds). Poll again at once; a transport refusing for 10 ms on end
    // gets the timer schedule for a round.
    if (sleep_ms == -2) {
      const auto now = AgentClock::now();
      if (refused == AgentClock::time_point{}) refused = now;
      if (now - refused < std::chrono::milliseconds(10)) continue;
      refused = AgentClock::time_point{};
    } else {
      refused = AgentClock::time_point{};
    }
    if (sleep_ms >= 0) {
      AgentCounters::add(counters.sleeps);
      ::poll(pf.data(), pf.size(), sleep_ms);
      if (pf.back().revents & POLLIN) {
        eventfd_t v;
        (void)::eventfd_read(wake_fd.get(), &v);
      }
      idle = 0;
      active = AgentClock::now();
      continue;
    }
    ++idle;
    if (idle <= kIdleSpins) {
      sched_yield();
      continue;
    }
    AgentCounters::add(counters.timer_sleeps);
    const long us = std::min(250L, 10L * (idle - kIdleSpins));
    timespec ts{0, us * 1000};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace rwin
