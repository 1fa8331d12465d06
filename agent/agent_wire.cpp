// Encoders and bounds-checked decoders of the descriptor and control frames (agent_wire.h).
#include "agent/agent_wire.h"

#include "common/blob.h"

namespace rwin::agent {

namespace {

void put_str(blob::Writer& w, const std::string& s) {
  w.u16(static_cast<uint16_t>(s.size()));
  w.bytes(s.data(), s.size());
}
bool get_str(blob::Reader& r, std::string& out) {
  uint16_t n = 0;
  std::span<const uint8_t> s;
  if (!r.u16(n) || n > kMaxText || !r.take(n, s)) return false;
  out.assign(s.begin(), s.end());
  return true;
}
void put_blob(blob::Writer& w, std::span<const uint8_t> b) {
  w.u32(static_cast<uint32_t>(b.size()));
  w.bytes(b);
}
bool get_blob(blob::Reader& r, std::vector<uint8_t>& out) {
  uint32_t n = 0;
  std::span<const uint8_t> s;
  if (!r.u32(n) || n > kMaxBlob || !r.take(n, s)) return false;
  out.assign(s.begin(), s.end());
  return true;
}

}  // namespace

const char* msg_name(MsgType t) noexcept {
  switch (t) {
    case MsgType::Hello: return "hello";
    case MsgType::Welcome: return "welcome";
    case MsgType::Ready: return "ready";
    case MsgType::Ping: return "ping";
    case MsgType::Import: return "import";
    case MsgType::ImportReply: return "import-reply";
    case MsgType::Revoke: return "revoke";
    case MsgType::RevokeAck: return "revoke-ack";
    case MsgType::Refuse: return "refuse";
    case MsgType::Bye: return "bye";
  }
  return "?";
}

std::vector<uint8_t> encode(const Descriptor& d) {
  blob::Writer w(96 + d.key.size());
  w.u32(kDescMagic);
  w.u16(kDescVersion);
  put_str(w, d.transport);
  put_str(w, d.address);
  w.bytes(d.token.data(), d.token.size());
  w.u64(d.region_id);
  w.u64(d.generation);
  w.u64(d.base);
  w.u64(d.bytes);
  put_blob(w, d.key);
  return w.take();
}

std::optional<Descriptor> decode_descriptor(std::span<const uint8_t> b, std::string& why) {
  blob::Reader r(b);
  uint32_t magic = 0;
  uint16_t version = 0;
  if (!r.u32(magic) || magic != kDescMagic) {
    why = "not an rwin agent descriptor (" + std::to_string(b.size()) + " bytes, no 'RWAG' magic)";
    return std::nullopt;
  }
  if (!r.u16(version) || version != kDescVersion) {
    why = "descriptor version " + std::to_string(version) + ", this build reads version " + std::to_string(kDescVersion);
    return std::nullopt;
  }
  Descriptor d;
  if (!get_str(r, d.transport) || !get_str(r, d.address) || !r.bytes(d.token) || !r.u64(d.region_id) ||
      !r.u64(d.generation) || !r.u64(d.base) || !r.u64(d.bytes) || !get_blob(r, d.key)) {
    why = "truncated or oversized field in a " + std::to_string(b.size()) + "-byte descriptor";
    return std::nullopt;
  }
  if (!r.done()) {
    why = std::to_string(r.remaining()) + " bytes after the end of the descriptor";
    return std::nullopt;
  }
  if (d.bytes == 0 || d.base + d.bytes < d.base || d.address.empty() || d.transport.empty()) {
    why = "descriptor names an empty or wrapping region or no address";
    return std::nullopt;
  }
  return d;
}

std::vector<uint8_t> encode(const Msg& m) {
  blob::Writer w(64 + m.endpoint.size() + m.text.size());
  w.u32(0);  // length, patched below
  w.u32(kFrameMagic);
  w.u8(kFrameVersion);
  w.u8(static_cast<uint8_t>(m.type));
  switch (m.type) {
    case MsgType::Hello:
      w.bytes(m.token.data(), m.token.size());
      put_str(w, m.text);
      put_blob(w, m.endpoint);
      break;
    case MsgType::Welcome: put_blob(w, m.endpoint); break;
    case MsgType::Ready:
    case MsgType::Ping:
    case MsgType::Bye: break;
    case MsgType::Import:
      w.u64(m.req);
      w.u64(m.region_id);
      w.u64(m.generation);
      break;
    case MsgType::ImportReply:
      w.u64(m.req);
      w.u8(m.status);
      break;
    case MsgType::Revoke:
    case MsgType::RevokeAck:
      w.u64(m.region_id);
      w.u64(m.generation);
      break;
    case MsgType::Refuse: put_str(w, m.text.substr(0, kMaxText)); break;
  }
  w.patch_u32(0, static_cast<uint32_t>(w.size() - 4));
  return w.take();
}

std::optional<Msg> decode_body(std::span<const uint8_t> body, std::string& why) {
  blob::Reader r(body);
  uint32_t magic = 0;
  uint8_t version = 0, type = 0;
  if (!r.u32(magic) || magic != kFrameMagic) {
    why = "not an rwin agent frame (no 'RWCT' magic)";
    return std::nullopt;
  }
  if (!r.u8(version) || version != kFrameVersion) {
    why = "frame version " + std::to_string(version) + ", this build speaks " + std::to_string(kFrameVersion);
    return std::nullopt;
  }
  if (!r.u8(type) || type < 1 || type > static_cast<uint8_t>(MsgType::Bye)) {
    why = "unknown frame type " + std::to_string(type);
    return std::nullopt;
  }
  Msg m;
  m.type = static_cast<MsgType>(type);
  bool ok = true;
  switch (m.type) {
    case MsgType::Hello: ok = r.bytes(m.token) && get_str(r, m.text) && get_blob(r, m.endpoint); break;
    case MsgType::Welcome: ok = get_blob(r, m.endpoint); break;
    case MsgType::Ready:
    case MsgType::Ping:
    case MsgType::Bye: break;
    case MsgType::Import: ok = r.u64(m.req) && r.u64(m.region_id) && r.u64(m.generation); break;
    case MsgType::ImportReply: ok = r.u64(m.req) && r.u8(m.status) && m.status <= 1; break;
    case MsgType::Revoke:
    case MsgType::RevokeAck: ok = r.u64(m.region_id) && r.u64(m.generation); break;
    case MsgType::Refuse: ok = get_str(r, m.text); break;
  }
  if (!ok || !r.done()) {
    why = std::string("malformed ") + msg_name(m.type) + " frame (" + std::to_string(body.size()) + " bytes)";
    return std::nullopt;
  }
  return m;
}

}  // namespace rwin::agent
