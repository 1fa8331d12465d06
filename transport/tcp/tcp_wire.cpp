#include "transport/tcp/tcp_wire.h"

namespace rwin::transport::tcpw {

const char* req_name(uint8_t type) noexcept {
  switch (static_cast<Req>(type)) {
    case Req::Write: return "write";
    case Req::Read: return "read";
    case Req::AtomicAdd: return "atomic_add";
    case Req::FetchAdd: return "fetch_add";
    case Req::CompareSwap: return "compare_swap";
    case Req::Swap: return "swap";
    case Req::Flush: return "flush";
    case Req::Goodbye: return "goodbye";
    case Req::WriteAdd: return "write_add";
    case Req::Fence: return "fence";
  }
  return "unknown";
}

std::string check_hello(const Hello& h, int me, int nranks, bool run_time) {
  if (h.magic != kMagic) return "not an rwin tcp hello (magic " + std::to_string(h.magic) + ")";
  if (h.version != kVersion) {
    return "wire version " + std::to_string(h.version) + " (this rank speaks " + std::to_string(kVersion) + ")";
  }
  const auto want = run_time ? HelloKind::RunTime : HelloKind::Collective;
  const int lane = hello_lane(h.kind);
  if (!run_time && lane != 0 && (h.kind & 0xff) == static_cast<uint16_t>(HelloKind::Lane)) {
    if (lane >= kMaxSockets) return "lane " + std::to_string(lane) + " (at most " + std::to_string(kMaxSockets - 1) + " per rank)";
  } else if (h.kind != static_cast<uint16_t>(want)) {
    return "hello kind " + std::to_string(h.kind) + " (this transport takes " +
           (run_time ? "run-time peers" : "the ranks of a job") + ", kind " + std::to_string(static_cast<uint16_t>(want)) + ")";
  }
  if (run_time) {
    if (h.dst < 0 || h.dst >= nranks) return "no run-time peer " + std::to_string(h.dst) + " here (" + std::to_string(nranks) + " added)";
    if (h.src < 0) return "negative source index " + std::to_string(h.src);
    return {};
  }
  if (h.src < 0 || h.src >= nranks) {
    return "source rank " + std::to_string(h.src) + " outside the job of " + std::to_string(nranks);
  }
  if (h.dst != me) return "meant for rank " + std::to_string(h.dst) + ", this is rank " + std::to_string(me);
  return {};
}

namespace {
bool zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}
}  // namespace

std::string check_request(const ReqHeader& h) {
  if (!zero(h.pad, sizeof h.pad)) return "request padding is not zero";
  const auto t = static_cast<Req>(h.type);
  switch (t) {
    case Req::Write:
    case Req::Read:
      if (h.len == 0 || h.len > kMaxFrameBytes) {
        return std::string(req_name(h.type)) + " of " + std::to_string(h.len) + " bytes (1.." +
               std::to_string(kMaxFrameBytes) + " allowed in one frame)";
      }
      return {};
    case Req::WriteAdd:
      if (h.len == 0 || h.len > kMaxAddFrameBytes) {
        return std::string(req_name(h.type)) + " of " + std::to_string(h.len) + " bytes (1.." +
               std::to_string(kMaxAddFrameBytes) + " allowed in one frame)";
      }
      if (h.operand > 255 || h.compare != 0) return std::string(req_name(h.type)) + " with element type code " + std::to_string(h.operand);
      return {};
    case Req::AtomicAdd:
    case Req::FetchAdd:
    case Req::CompareSwap:
    case Req::Swap:
      if (h.len != 8) return std::string(req_name(h.type)) + " of " + std::to_string(h.len) + " bytes (atomics are 8)";
      if (h.addr % 8 != 0) return std::string(req_name(h.type)) + " at an address that is not 8-byte aligned";
      return {};
    case Req::Flush:
    case Req::Goodbye:
      if (h.len != 0 || h.region != 0 || h.addr != 0) return std::string(req_name(h.type)) + " with a payload";
      return {};
    case Req::Fence:  // addr, operand, compare: the lanes' counts
      if (h.len != 0 || h.region != 0) return std::string(req_name(h.type)) + " with a payload";
      return {};
  }
  return "unknown request type " + std::to_string(h.type);
}

std::string check_reply(const RepHeader& h) {
  if (!zero(h.pad, sizeof h.pad) || h.status != 0) return "reply padding is not zero";
  switch (static_cast<Rep>(h.type)) {
    case Rep::ReadData:
      if (h.len == 0 || h.len > kMaxFrameBytes) return "read data of " + std::to_string(h.len) + " bytes";
      return {};
    case Rep::Value:
    case Rep::FlushAck:
      if (h.len != 0) return "a value or flush reply with a payload";
      return {};
    case Rep::Refused:
      if (h.len == 0 || h.len > kMaxRefusalBytes) return "a refusal of " + std::to_string(h.len) + " bytes";
      return {};
  }
  return "unknown reply type " + std::to_string(h.type);
}

}  // namespace rwin::transport::tcpw
