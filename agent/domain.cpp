// rwin::Domain (rwin/domain.h): a prepare / import / commit domain over one Agent. The descriptor:
//   magic "RWDM" u32 | version u16 | flags u16 (0) | domain id u64 | incarnation u64 | rank u32 |
//   nranks u32 | window bytes u64 | signals u32 | agent descriptor (u16 length + bytes) |
//   checksum u32 (FNV-1a of everything before it)
// little endian. The checksum catches a record the caller's framing cut or mangled (the agent's token
// and its live-region check catch the forged and the stale); the incarnation (random per prepare)
// tells this rank's own entry from one of an earlier prepare.
#include "rwin/domain.h"

#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

namespace rwin {

namespace {

constexpr uint32_t kMagic = 0x4d445752;  // "RWDM"
constexpr size_t kSignalAlign = 64;  // the signal words start on their own cache line
constexpr std::chrono::milliseconds kWaitSlice{5};  // how soon a blocked wait sees fail_peer

using Clock = std::chrono::steady_clock;

uint32_t fnv1a(const uint8_t* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

struct Writer {
  std::vector<uint8_t> b;
  template <class T>
  void put(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) b.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
  }
};

struct Reader {
  std::span<const uint8_t> b;
  size_t at = 0;
  template <class T>
  bool get(T& v) {
    if (b.size() - at < sizeof(T)) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < sizeof(T); ++i) x |= static_cast<uint64_t>(b[at + i]) << (8 * i);
    v = static_cast<T>(x);
    at += sizeof(T);
    return true;
  }
};

struct Desc {
  uint64_t id = 0, incarnation = 0, window = 0;
  uint32_t rank = 0, nranks = 0, signals = 0;
  std::vector<uint8_t> agent;
};

std::vector<uint8_t> encode(const Desc& d) {
  Writer w;
  w.put<uint32_t>(kMagic);
  w.put<uint16_t>(Domain::kDescriptorVersion);
  w.put<uint16_t>(0);
  w.put<uint64_t>(d.id);
  w.put<uint64_t>(d.incarnation);
  w.put<uint32_t>(d.rank);
  w.put<uint32_t>(d.nranks);
  w.put<uint64_t>(d.window);
  w.put<uint32_t>(d.signals);
  w.put<uint16_t>(static_cast<uint16_t>(d.agent.size()));
  w.b.insert(w.b.end(), d.agent.begin(), d.agent.end());
  w.put<uint32_t>(fnv1a(w.b.data(), w.b.size()));
  return w.b;
}

std::optional<Desc> decode(std::span<const uint8_t> b, std::string& why) {
  const std::string size = std::to_string(b.size()) + " bytes";
  if (b.size() > Domain::kMaxDescriptorBytes) {
    why = size + ", more than a domain descriptor's " + std::to_string(Domain::kMaxDescriptorBytes);
    return std::nullopt;
  }
  Reader r{b};
  uint32_t magic = 0;
  uint16_t version = 0, flags = 0, alen = 0;
  if (!r.get(magic) || magic != kMagic) {
    why = "not an rwin domain descriptor (" + size + ", no 'RWDM' magic)";
    return std::nullopt;
  }
  if (!r.get(version) || version != Domain::kDescriptorVersion) {
    why = "domain descriptor version " + std::to_string(version) + ", this build reads version " +
          std::to_string(Domain::kDescriptorVersion);
    return std::nullopt;
  }
  Desc d;
  if (!r.get(flags) || !r.get(d.id) || !r.get(d.incarnation) || !r.get(d.rank) || !r.get(d.nranks) || !r.get(d.window) ||
      !r.get(d.signals) || !r.get(alen) || b.size() - r.at < size_t(alen) + 4) {
    why = "a domain descriptor cut short (" + size + ")";
    return std::nullopt;
  }
  d.agent.assign(b.begin() + r.at, b.begin() + r.at + alen);
  r.at += alen;
  const size_t summed = r.at;
  uint32_t sum = 0;
  (void)r.get(sum);
  if (r.at != b.size()) {
    why = "a domain descriptor with " + std::to_string(b.size() - r.at) + " bytes after its end (" + size + ")";
    return std::nullopt;
  }
  if (sum != fnv1a(b.data(), summed)) {
    why = "a domain descriptor whose checksum does not match (" + size + ": changed or mangled in transit)";
    return std::nullopt;
  }
  if (flags != 0) {
    why = "a domain descriptor with unknown flags 0x" + std::to_string(flags);
    return std::nullopt;
  }
  return d;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

const char* state_name(Domain::State s) {
  switch (s) {
    case Domain::State::Prepared: return "prepared";
    case Domain::State::Imported: return "imported";
    case Domain::State::Committed: return "committed";
    case Domain::State::Released: return "released";
  }
  return "?";
}

}  // namespace

struct DomainState {
  uint64_t id = 0, incarnation = 0;
  int rank = 0, nranks = 0;
  size_t window = 0, signals = 0, sig_off = 0, map_bytes = 0;
  void* mem = nullptr;  // mmap'd window + signals: freed only after the region is deregistered
  std::unique_ptr<Agent> agent;
  Region region;
  std::vector<uint8_t> desc;
  std::vector<RemoteRegion> peers;  // by rank, once imported
  std::atomic<Domain::State> state{Domain::State::Prepared};  // read without `mu` by base(), state()
  std::chrono::milliseconds op_timeout{0};
  std::string name;

  std::mutex mu;  // serialises calls
  // fail_peer's record: written from any thread; `any_failed` lets the hot path skip the lock.
  mutable std::mutex fmu;
  std::map<int, std::string> failed;
  std::atomic<bool> any_failed{false};

  [[noreturn]] void fail(ErrorCode code, const std::string& msg) const { throw Error(code, name + ": " + msg); }

  void need(Domain::State want, const char* op) const {
    if (state == want) return;
    if (state == Domain::State::Released) fail(ErrorCode::UseAfterFree, std::string(op) + ": the domain was released");
    fail(ErrorCode::InvalidArgument, std::string(op) + ": the domain is " + state_name(state.load()) + ", it must be " +
                                         state_name(want) +
                                         (want == Domain::State::Committed ? " (prepare -> import_table -> commit)" : ""));
  }

  void check_peer(int peer, const char* op) const {
    if (peer < 0 || peer >= nranks) {
      fail(ErrorCode::PeerOutOfRange, std::string(op) + ": peer " + std::to_string(peer) + " is outside 0.." +
                                          std::to_string(nranks - 1));
    }
  }

  std::string failure_of(int peer) const {
    if (!any_failed.load(std::memory_order_acquire)) return {};
    std::lock_guard lk(fmu);
    auto it = failed.find(peer);
    return it == failed.end() ? std::string() : it->second;
  }

  void record_failure(int peer, const std::string& why) {
    std::lock_guard lk(fmu);
    failed.emplace(peer, why);  // the first reason sticks
    any_failed.store(true, std::memory_order_release);
  }

  // The agent learns of broken connections on its own (socket closed, keepalive silence, a failed
  // completion): the ranks whose regions it can no longer reach count as failed.
  void learn_from_agent() {
    if (peers.empty()) return;
    for (int p = 0; p < nranks; ++p) {
      if (p == rank || !failure_of(p).empty() || !peers[p].bytes()) continue;
      const std::string e = agent->peer_error(peers[p]);
      if (!e.empty()) record_failure(p, "found by the transport: " + e);
    }
  }

  // Failures the agent does not know yet (fail_peer) cut its connections with that rank: a
  // deregister then waits for no acknowledgement from it, and nothing of it lands here. On the
  // owning thread (the agent's calls are serialised; fail_peer must not wait for them).
  std::set<int> told_agent;
  void tell_agent() {
    if (!any_failed.load(std::memory_order_acquire) || peers.empty()) return;
    std::vector<std::pair<int, std::string>> news;
    {
      std::lock_guard lk(fmu);
      for (const auto& [p, why] : failed) {
        if (!told_agent.count(p)) news.emplace_back(p, why);
      }
    }
    for (const auto& [p, why] : news) {
      told_agent.insert(p);
      if (p != rank && peers[p].bytes()) agent->fail_peer(peers[p], "rank " + std::to_string(p) + " failed: " + why);
    }
  }

  std::string failed_summary() const {
    std::lock_guard lk(fmu);
    std::string s;
    for (const auto& [p, why] : failed) s += (s.empty() ? "" : "; ") + std::string("rank ") + std::to_string(p) + " failed: " + why;
    return s;
  }

  // The peer's region, checked: committed, in range, not failed.
  const RemoteRegion& target(int peer, const std::string& what) {
    need(Domain::State::Committed, what.c_str());
    check_peer(peer, what.c_str());
    const std::string f = failure_of(peer);
    if (!f.empty()) tell_agent();
    if (!f.empty()) fail(ErrorCode::PeerFailed, what + " to rank " + std::to_string(peer) + ": rank " + std::to_string(peer) + " failed: " + f);
    return peers[peer];
  }

  void check_window(uint64_t off, size_t n, const std::string& what) const {
    if (off > window || n > window - off) {
      fail(ErrorCode::OutOfBounds, what + ": bytes [" + std::to_string(off) + ", " + std::to_string(off) + "+" +
                                       std::to_string(n) + ") reach outside the window of " + std::to_string(window) +
                                       " bytes");
    }
  }

  int64_t word(uint64_t off) const {
    return std::atomic_ref<int64_t>(*reinterpret_cast<int64_t*>(static_cast<char*>(mem) + off)).load(std::memory_order_acquire);
  }

  uint64_t signal_offset(size_t s, const std::string& what) const {
    if (s >= signals) {
      fail(ErrorCode::OutOfBounds, what + ": signal " + std::to_string(s) + " is outside 0.." +
                                       std::to_string(signals - 1) + " (" + std::to_string(signals) + " signal words)");
    }
    return sig_off + 8 * s;
  }

  // Runs an agent call for an operation on `peer` (-1: several), naming the domain; a PeerFailed from
  // the agent marks the peer(s) failed.
  template <class F>
  void run(int peer, const std::string& what, F&& f) {
    try {
      f();
    } catch (const Error& e) {
      if (e.code() == ErrorCode::PeerFailed) {
        if (peer >= 0) record_failure(peer, std::string("found by the transport: ") + e.what());
        learn_from_agent();
      }
      throw Error(e.code(), name + ": " + what + (peer >= 0 ? " (rank " + std::to_string(peer) + ")" : "") + ": " + e.what());
    }
  }

  void release() noexcept {
    if (state == Domain::State::Released) return;
    state = Domain::State::Released;
    try {
      tell_agent();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rwin: %s: release: %s\n", name.c_str(), e.what());
    }
    peers.clear();
    try {
      region.deregister();  // no peer operation reaches the memory after this
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rwin: %s: release: deregistering the window: %s\n", name.c_str(), e.what());
    }
    region = Region();
    agent.reset();  // closes every connection and the transport: nothing can write after this either
  }

  // The memory outlives release(): views of it (numpy arrays in Python) stay readable until the
  // Domain object itself goes.
  ~DomainState() {
    if (mem) ::munmap(mem, map_bytes);
  }
};

Domain::Domain(uint64_t id, int rank, int nranks, size_t window_bytes, const DomainOptions& opt)
    : s_(std::make_shared<DomainState>()) {
  DomainState& s = *s_;
  s.id = id;
  s.rank = rank;
  s.nranks = nranks;
  s.window = window_bytes;
  s.signals = opt.signals;
  s.op_timeout = opt.agent.op_timeout;
  s.name = "domain " + hex(id) + " rank " + std::to_string(rank) + " of " + std::to_string(nranks);
  if (nranks < 1) s.fail(ErrorCode::InvalidArgument, "prepare: nranks " + std::to_string(nranks) + " must be >= 1");
  if (rank < 0 || rank >= nranks) {
    s.fail(ErrorCode::PeerOutOfRange, "prepare: rank " + std::to_string(rank) + " is outside 0.." + std::to_string(nranks - 1));
  }
  if (opt.signals < 1 || opt.signals > (1u << 20)) {
    s.fail(ErrorCode::InvalidArgument, "prepare: signals " + std::to_string(opt.signals) + " must be in 1..1048576");
  }
  constexpr size_t kMaxWindow = size_t(1) << 46;
  if (window_bytes > kMaxWindow) {
    s.fail(ErrorCode::InvalidArgument, "prepare: window of " + std::to_string(window_bytes) + " bytes is more than 2^46");
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  s.sig_off = (window_bytes + kSignalAlign - 1) / kSignalAlign * kSignalAlign;
  const size_t region_bytes = s.sig_off + 8 * opt.signals;
  s.map_bytes = (region_bytes + page - 1) / page * page;
  s.mem = ::mmap(nullptr, s.map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (s.mem == MAP_FAILED) {
    s.mem = nullptr;
    s.fail(ErrorCode::InvalidArgument, "prepare: mmap of " + std::to_string(s.map_bytes) + " bytes: " + std::strerror(errno));
  }
  try {
    if (::getrandom(&s.incarnation, sizeof s.incarnation, 0) != sizeof s.incarnation) {
      s.incarnation = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^ (uint64_t(::getpid()) << 32);
    }
    s.agent = std::make_unique<Agent>(opt.agent);
    s.name += " (" + s.agent->describe() + ")";
    s.region = s.agent->register_memory(s.mem, region_bytes);
    Desc d;
    d.id = id;
    d.incarnation = s.incarnation;
    d.rank = static_cast<uint32_t>(rank);
    d.nranks = static_cast<uint32_t>(nranks);
    d.window = window_bytes;
    d.signals = static_cast<uint32_t>(opt.signals);
    d.agent = s.region.descriptor();
    s.desc = encode(d);
    if (s.desc.size() > kMaxDescriptorBytes) {
      s.fail(ErrorCode::Unsupported, "prepare: the descriptor would be " + std::to_string(s.desc.size()) +
                                         " bytes, more than " + std::to_string(kMaxDescriptorBytes) +
                                         " (a long control address? listen on a numeric address)");
    }
  } catch (...) {
    s.release();
    throw;
  }
}

Domain::~Domain() {
  if (!s_) return;
  std::lock_guard lk(s_->mu);
  s_->release();
}

std::vector<uint8_t> Domain::descriptor() const {
  std::lock_guard lk(s_->mu);
  if (s_->state == State::Released) s_->fail(ErrorCode::UseAfterFree, "descriptor: the domain was released");
  return s_->desc;
}
void* Domain::base() const { return s_->mem; }
int64_t* Domain::signals() const { return reinterpret_cast<int64_t*>(static_cast<char*>(s_->mem) + s_->sig_off); }
size_t Domain::window_bytes() const { return s_->window; }
size_t Domain::signal_count() const { return s_->signals; }
int Domain::rank() const { return s_->rank; }
int Domain::nranks() const { return s_->nranks; }
uint64_t Domain::id() const { return s_->id; }
Domain::State Domain::state() const { return s_->state.load(); }
std::string Domain::describe() const { return s_->name; }

void Domain::import_table(std::span<const std::vector<uint8_t>> table) {
  DomainState& s = *s_;
  std::lock_guard lk(s.mu);
  s.need(State::Prepared, "import_table");
  if (table.size() != size_t(s.nranks)) {
    s.fail(ErrorCode::InvalidArgument, "import_table: " + std::to_string(table.size()) + " descriptors for a domain of " +
                                           std::to_string(s.nranks) + " ranks (one per rank, in rank order)");
  }
  // The whole table first: nothing is connected for a table that is wrong anywhere.
  std::vector<Desc> ds;
  for (size_t i = 0; i < table.size(); ++i) {
    const std::string entry = "import_table: entry " + std::to_string(i);
    std::string why;
    auto d = decode(table[i], why);
    if (!d) s.fail(ErrorCode::InvalidArgument, entry + ": " + why);
    if (d->id != s.id) {
      s.fail(ErrorCode::InvalidArgument, entry + " is of domain " + hex(d->id) + ", not " + hex(s.id) + " (a foreign descriptor)");
    }
    if (d->rank != i) {
      s.fail(ErrorCode::InvalidArgument, entry + " is rank " + std::to_string(d->rank) +
                                             "'s descriptor: the table must hold rank i's at index i");
    }
    if (d->nranks != uint32_t(s.nranks)) {
      s.fail(ErrorCode::InvalidArgument, entry + " was prepared for " + std::to_string(d->nranks) + " ranks, this rank for " +
                                             std::to_string(s.nranks));
    }
    if (d->window != s.window || d->signals != s.signals) {
      s.fail(ErrorCode::WindowMismatch, entry + " has a window of " + std::to_string(d->window) + " bytes and " +
                                            std::to_string(d->signals) + " signals, this rank " + std::to_string(s.window) +
                                            " bytes and " + std::to_string(s.signals) +
                                            " (every rank must prepare the same sizes)");
    }
    if (i == size_t(s.rank) && table[i] != s.desc) {
      s.fail(ErrorCode::InvalidArgument, entry + " is not this rank's own descriptor (incarnation " + hex(d->incarnation) +
                                             ", this one is " + hex(s.incarnation) +
                                             "): stale, from an earlier prepare of this rank?");
    }
    ds.push_back(std::move(*d));
  }
  std::vector<RemoteRegion> peers(s.nranks);
  for (int p = 0; p < s.nranks; ++p) {
    const std::string f = s.failure_of(p);
    if (!f.empty()) s.fail(ErrorCode::PeerFailed, "import_table: rank " + std::to_string(p) + " failed: " + f);
    try {
      peers[p] = s.agent->import_region(ds[p].agent);
    } catch (const Error& e) {
      // `peers` goes out of scope: the domain stays prepared with no import kept.
      s.fail(e.code(), "import_table: entry " + std::to_string(p) + " (rank " + std::to_string(p) + ", incarnation " +
                           hex(ds[p].incarnation) + "): " + e.what());
    }
  }
  s.peers = std::move(peers);
  s.told_agent.clear();  // new connections: a failed rank's are cut again at the next call
  s.state = State::Imported;
}

void Domain::commit() {
  std::lock_guard lk(s_->mu);
  s_->need(State::Imported, "commit");
  s_->state = State::Committed;
}

void Domain::abort() {
  DomainState& s = *s_;
  std::lock_guard lk(s.mu);
  if (s.state == State::Released) s.fail(ErrorCode::UseAfterFree, "abort: the domain was released");
  if (s.state == State::Committed) s.fail(ErrorCode::InvalidArgument, "abort: the domain is committed (release it instead)");
  s.peers.clear();
  s.state = State::Prepared;
}

void Domain::release() noexcept {
  if (!s_) return;
  std::lock_guard lk(s_->mu);
  s_->release();
}

void Domain::put(int peer, uint64_t offset, const void* src, size_t bytes) {
  DomainState& s = *s_;
  std::lock_guard lk(s.mu);
  const std::string what = "put of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset);
  const RemoteRegion& r = s.target(peer, what);
  s.check_window(offset, bytes, what);
  s.run(peer, what, [&] { s.agent->put(r, offset, src, bytes); });
}

void Domain::get(void* dst, int peer, uint64_t offset, size_t bytes) {
  DomainState& s = *s_;
  std::lock_guard lk(s.mu);
  const std::string what = "get of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset);
  const RemoteRegion& r = s.target(peer, what);
  s.check_window(offset, bytes, what);
  s.run(peer, what, [&] { s.agent->get(dst, r, offset, bytes); });
}

void Domain::put_notify(int peer, uint64_t offset, const void* src, size_t bytes, size_t signal, int64_t value,
                        NotifyOp op) {
  DomainState& s = *s_;
  std::lock_guard lk(s.mu);
  const std::string what = "put_notify of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                           ", signal " + std::to_string(signal);
  const RemoteRegion& r = s.target(peer, what);
  s.check_window(offset, bytes, what);
  const uint64_t so = s.signal_offset(signal, what);
  s.run(peer, what, [&] { s.agent->put_notify(r, offset, src, bytes, r, so, value, op); });
}

void Domain::notify(int peer, size_t signal, int64_t value, NotifyOp op) {
  DomainState& s = *s_;
  std::lock_guard lk(s.mu);
  const std::string what = "notify of signal " + std::to_string(signal);
  const RemoteRegion& r = s.target(peer, what);
  const uint64_t so = s.signal_offset(signal, what);
  s.run(peer, what, [&] { s.agent->notify(r, so, value, op); });
}

void Domain::flush() {
  DomainState& s = *s_;
  std::lock_guard lk(s.mu);
  s.need(State::Committed, "flush");
  s.run(-1, "flush", [&] { s.agent->flush(); });
}

bool Domain::test(size_t signal, int64_t expected, WaitCmp cmp) {
  DomainState& s = *s_;
  std::lock_guard lk(s.mu);
  s.need(State::Committed, "test");
  const uint64_t so = s.signal_offset(signal, "test");
  bool ok = false;
  s.run(-1, "test", [&] { ok = s.agent->test(s.region, so, expected, cmp); });
  return ok;
}

int64_t Domain::signal(size_t signal) const {
  DomainState& s = *s_;
  std::lock_guard lk(s.mu);
  return s.word(s.signal_offset(signal, "signal"));
}

void Domain::wait(size_t signal, int64_t expected, WaitCmp cmp, std::optional<std::chrono::milliseconds> timeout) {
  DomainState& s = *s_;
  std::lock_guard lk(s.mu);
  const std::string what = "wait for signal " + std::to_string(signal) + " " + to_string(cmp) + " " + std::to_string(expected);
  s.need(State::Committed, what.c_str());
  const uint64_t so = s.signal_offset(signal, what);
  const auto limit = timeout.value_or(s.op_timeout);
  const auto deadline = Clock::now() + limit;
  // The agent's wait (spin, then sleep on its sockets) in slices, so that a failure reported
  // meanwhile (fail_peer from another thread, a connection the agent saw break) ends it.
  for (;;) {
    const auto slice = std::max<Clock::duration>(std::min<Clock::duration>(kWaitSlice, deadline - Clock::now()),
                                                 std::chrono::milliseconds(1));
    try {
      s.agent->wait(s.region, so, expected, cmp, std::chrono::ceil<std::chrono::milliseconds>(slice));
      return;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Timeout) throw Error(e.code(), s.name + ": " + what + ": " + e.what());
    }
    s.learn_from_agent();
    if (s.any_failed.load(std::memory_order_acquire)) {
      s.tell_agent();
      s.fail(ErrorCode::PeerFailed, what + ": not satisfied (value " + std::to_string(s.word(so)) +
                                        ") and a rank of the domain failed: " + s.failed_summary());
    }
    if (Clock::now() >= deadline) {
      s.fail(ErrorCode::Timeout, what + ": value " + std::to_string(s.word(so)) + ", not satisfied within " +
                                     std::to_string(limit.count()) + " ms");
    }
  }
}

void Domain::fail_peer(int peer, const std::string& reason) {
  DomainState& s = *s_;  // no s.mu: callable while the owner is blocked in a call
  s.check_peer(peer, "fail_peer");
  if (peer == s.rank) s.fail(ErrorCode::InvalidArgument, "fail_peer: rank " + std::to_string(peer) + " is this rank");
  s.record_failure(peer, reason.empty() ? "reported by the caller (fail_peer)" : reason + " (fail_peer)");
}

std::vector<int> Domain::failed_peers() const {
  std::lock_guard lk(s_->fmu);
  std::vector<int> v;
  for (const auto& [p, why] : s_->failed) v.push_back(p);
  return v;
}

}  // namespace rwin
