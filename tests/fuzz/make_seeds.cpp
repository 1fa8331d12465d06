// Writes the seed corpus of every harness from the real encoders: make_seeds OUT_DIR writes
// OUT_DIR/<target>/<name>. The checked-in tests/fuzz/corpus was made with
//   ninja -C build-fuzz rwin_fuzz_seeds && build-fuzz/bin/rwin_fuzz_seeds tests/fuzz/corpus
// Valid inputs matter: they let the fuzzer start past the magic and length checks.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bootstrap/wire.h"
#include "transport/ucx/ucx_am_wire.h"
#include "transport/ucx/ucx_blob.h"
#include "transport/verbs/verbs_blob.h"
#include "staging.h"
#include "window_blob.h"

namespace fs = std::filesystem;

namespace {

fs::path out_dir;

void emit(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
  const fs::path dir = out_dir / target;
  fs::create_directories(dir);
  FILE* f = std::fopen((dir / name).c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
    std::perror((dir / name).c_str());
    std::exit(1);
  }
}

std::vector<uint8_t> filler(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

template <class T>
std::vector<uint8_t> bytes_of(const T& v) {
  std::vector<uint8_t> b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

void window_seeds() {
  using rwin::DType;
  const std::vector<uint8_t> ucx_key = filler(120, 3), verbs_key = filler(28, 9);
  emit("window_blob", "f64_window", rwin::detail::window_blob("x", DType::F64, {4, 1024}, rwin::detail::BlobKind::Window, ucx_key));
  emit("window_blob", "i64_signals", rwin::detail::window_blob("ring_signals", DType::I64, {1, 8}, rwin::detail::BlobKind::Signals, verbs_key));
  using rwin::detail::BlobKind;
  emit("window_blob", "empty_name_key", rwin::detail::window_blob("", DType::I32, {1, 1}, BlobKind::Window, {}));
  emit("window_blob", "huge_shape", rwin::detail::window_blob("h", DType::U64, {int64_t{1} << 40, int64_t{1} << 40}, BlobKind::Window, {}));
  emit("window_blob", "buffer", rwin::detail::window_blob("pool", DType::I32, {1, 65536}, BlobKind::Buffer, ucx_key));
}

void verbs_seeds() {
  namespace v = rwin::transport::verbs;
  v::ConnBlob c;
  c.rank = 1;
  c.peer = 0;
  c.qpn = 0x1234;
  c.psn = 0xabcdef;
  c.mtu = 3;
  c.link_layer = 2;
  for (size_t i = 0; i < c.gid.size(); ++i) c.gid[i] = static_cast<uint8_t>(i);
  c.flush_addr = 0x7f0000002000;
  c.flush_rkey = 0x43;
  c.lanes = 2;
  c.lane = 1;
  c.rail = 1;
  emit("verbs_blob", "conn", c.pack());
  v::EndpointBlob e;
  static_cast<v::QpAddress&>(e) = c;
  e.instance = 0x0123456789abcdef;
  e.slot = 2;
  emit("verbs_blob", "endpoint", e.pack());
  v::KeyBlob k;
  k.addr = 0x7f0000001000;
  k.bytes = 1 << 20;
  k.rails = 2;
  k.rkeys = {0x42, 0x44, 0, 0};
  emit("verbs_blob", "key", k.pack());
}

void ucx_blob_seeds() {
  namespace ub = rwin::transport::ucx_blob;
  const std::vector<uint8_t> raw = filler(96, 1), address = filler(180, 5), probe = filler(64, 11);
  emit("ucx_key_blob", "key", ub::pack_key(0x7f0000002000, 4096, raw));
  emit("ucx_key_blob", "empty_raw", ub::pack_key(0, 0, {}));
  emit("ucx_addr_blob", "with_probe", ub::pack_addr(address, 0x7f0000003000, probe));
  emit("ucx_addr_blob", "no_probe", ub::pack_addr(address, 0, {}));
}

// Harness input: kind byte, header length byte, header, data.
std::vector<uint8_t> am_input(uint8_t kind, const std::vector<uint8_t>& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b{kind, static_cast<uint8_t>(header.size())};
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

void am_seeds() {
  namespace am = rwin::transport::ucx_am;
  using rwin::transport::Op;
  am::AmRequest w;
  w.op = static_cast<uint8_t>(Op::Write);
  w.sender = 1;
  w.seq = 7;
  w.addr = 0x7f0000004000;
  w.len = 16;
  emit("ucx_am", "request_write", am_input(0, bytes_of(w), filler(16, 2)));
  am::AmRequest f = w;
  f.op = static_cast<uint8_t>(Op::FetchAdd);
  f.len = 8;
  f.operand = 1;
  f.token = 99;
  emit("ucx_am", "request_fetch_add", am_input(0, bytes_of(f), {}));
  // A batch as the initiator stages it: small writes, then the notify's atomic.
  std::vector<uint8_t> data;
  am::AmBatch b;
  b.sender = 1;
  for (int i = 0; i < 3; ++i) {
    am::AmRequest r = w;
    r.seq = static_cast<uint64_t>(i);
    r.len = static_cast<uint64_t>(8 * (i + 1));
    const auto payload = filler(static_cast<size_t>(r.len), static_cast<uint8_t>(i));
    am::append_request(data, r, payload.data(), payload.size());
    b.count++;
  }
  am::AmRequest add = w;
  add.op = static_cast<uint8_t>(Op::AtomicAdd);
  add.seq = 3;
  add.len = 8;
  add.operand = 1;
  am::append_request(data, add, nullptr, 0);
  b.count++;
  b.bytes = data.size();
  emit("ucx_am", "batch_put_notify", am_input(1, bytes_of(b), data));
  am::AmReply r;
  r.op = static_cast<uint8_t>(Op::FetchAdd);
  r.sender = 2;
  r.token = 99;
  r.value = 41;
  emit("ucx_am", "reply", am_input(2, bytes_of(r), {}));
}

void store_seeds() {
  namespace w = rwin::bootstrap::wire;
  // The first byte picks the connection state (store_wire_fuzz.cpp): 2 = data, 3 = lease.
  auto in_state = [](uint8_t st, const std::vector<uint8_t>& frames) {
    std::vector<uint8_t> v{st};
    v.insert(v.end(), frames.begin(), frames.end());
    return v;
  };
  w::Request set;
  set.op = w::Op::Set;
  set.key = "ag/0/1";
  set.value = filler(200, 4);
  w::Request get;
  get.op = w::Op::Get;
  get.key = "ag/0/0";
  w::Request add;
  add.op = w::Op::Add;
  add.key = "cnt";
  add.delta = static_cast<uint64_t>(-1);
  w::Request check;
  check.op = w::Op::Check;
  check.keys = {"a", "bb", "arrive/2"};
  w::Request wait = check;
  wait.op = w::Op::Wait;
  w::Request bye;
  bye.op = w::Op::Goodbye;
  bye.reason = "peer 3 failed (its bootstrap connection closed)";
  emit("store_wire", "set", in_state(2, w::encode_request(set)));
  emit("store_wire", "get", in_state(2, w::encode_request(get)));
  emit("store_wire", "add", in_state(2, w::encode_request(add)));
  emit("store_wire", "check", in_state(2, w::encode_request(check)));
  emit("store_wire", "wait", in_state(2, w::encode_request(wait)));
  emit("store_wire", "goodbye", in_state(3, w::encode_request(bye)));
  emit("store_wire", "set-before-hello", in_state(0, w::encode_request(set)));
  // A connection's stream: several pipelined requests, as Bootstrap sends them.
  std::vector<uint8_t> stream;
  for (const w::Request* r : {&set, &add, &wait, &get}) {
    const auto f = w::encode_request(*r);
    stream.insert(stream.end(), f.begin(), f.end());
  }
  emit("store_wire", "pipelined", in_state(2, stream));
}

}  // namespace

// staging_header_fuzz.cpp reads [64-byte header | expected seq | payload]: headers that pass.
void staging_seeds() {
  using rwin::detail::SlotHeader;
  auto slot = [](uint8_t dtype, uint32_t src, uint64_t seq, uint64_t addr, uint64_t bytes) {
    SlotHeader h;
    h.dtype = dtype;
    h.src = src;
    h.seq = seq;
    h.addr = addr;
    h.bytes = bytes;
    std::vector<uint8_t> b(rwin::detail::kSlotHeaderBytes + 16, 0);
    std::memcpy(b.data(), &h, sizeof h);
    const uint64_t payload = 16320;
    std::memcpy(b.data() + rwin::detail::kSlotHeaderBytes, &seq, 8);
    std::memcpy(b.data() + rwin::detail::kSlotHeaderBytes + 8, &payload, 8);
    return b;
  };
  emit("staging_header", "f32_in_second", slot(static_cast<uint8_t>(rwin::DType::F32), 1, 5, 0x7f0000000040, 400));
  emit("staging_header", "u8_whole_first", slot(static_cast<uint8_t>(rwin::DType::U8), 0, 0, 0x10000, 4096));
  emit("staging_header", "f64_at_top", slot(static_cast<uint8_t>(rwin::DType::F64), 3, 9, UINT64_MAX - 4095, 4096));
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  out_dir = argv[1];
  window_seeds();
  verbs_seeds();
  ucx_blob_seeds();
  am_seeds();
  store_seeds();
  staging_seeds();
  return 0;
}
