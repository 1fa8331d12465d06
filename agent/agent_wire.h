// The agent's two wire formats (docs/AGENT.md), pure and free of sockets and UCX so unit tests and
// fuzzers run the real decoders:
//   descriptor (Region::descriptor, carried by the user):
//     magic "RWAG" u32 | version u16 | transport str | control address str | token 16 bytes |
//     region id u64 | generation u64 | base address u64 | bytes u64 | key (u32 length + bytes)
//     (str = u16 length + bytes), little endian, nothing after the key.
//   control frame (the agent's TCP connection): length u32 (of what follows, <= kMaxFrame) |
//     magic "RWCT" u32 | version u8 | type u8 | body by type (see Msg).
// Decoders return nullopt for anything that is not exactly one well-formed item of this version.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rwin::agent {

inline constexpr uint32_t kDescMagic = 0x52574147;   // "RWAG"
inline constexpr uint16_t kDescVersion = 1;
inline constexpr uint32_t kFrameMagic = 0x52574354;  // "RWCT"
inline constexpr uint8_t kFrameVersion = 1;
inline constexpr size_t kTokenBytes = 16;
inline constexpr size_t kMaxFrame = 64 << 10;     // a control frame's body, at most
inline constexpr size_t kMaxText = 256;           // transport name, control address, refusal text
inline constexpr size_t kMaxBlob = 16 << 10;      // a transport endpoint or packed key, at most
using Token = std::array<uint8_t, kTokenBytes>;

struct Descriptor {
  std::string transport;  // "ucx", "verbs": an importer of another transport refuses it
  std::string address;    // the owner's control address, host:port
  Token token{};          // the owner's secret: a connecting peer presents it
  uint64_t region_id = 0;
  uint64_t generation = 0;
  uint64_t base = 0;      // the owner's address of byte 0
  uint64_t bytes = 0;
  std::vector<uint8_t> key;  // the transport's packed key
};

std::vector<uint8_t> encode(const Descriptor& d);
// nullopt with `why` set (e.g. "version 7, this build reads 1") for anything else.
std::optional<Descriptor> decode_descriptor(std::span<const uint8_t> b, std::string& why);

enum class MsgType : uint8_t {
  Hello = 1,        // token, the sender's control address, its transport endpoint for us
  Welcome = 2,      // the acceptor's transport endpoint
  Ready = 3,        // the connecting side may be posted to
  Ping = 4,         // keepalive
  Import = 5,       // req, region id, generation: is it live? (the owner records the importer)
  ImportReply = 6,  // req, status (0 live, 1 gone)
  Revoke = 7,       // region id, generation: deregistered
  RevokeAck = 8,    // region id, generation: no write of ours can still reach it
  Refuse = 9,       // text: why the connection is refused (then closed)
  Bye = 10,         // the sender closes its agent (then the socket): an orderly end, not a failure
};
const char* msg_name(MsgType t) noexcept;

struct Msg {
  MsgType type = MsgType::Ping;
  Token token{};                  // Hello
  std::string text;               // Hello: the sender's control address; Refuse: the reason
  std::vector<uint8_t> endpoint;  // Hello, Welcome
  uint64_t req = 0;               // Import, ImportReply
  uint64_t region_id = 0;         // Import, Revoke, RevokeAck
  uint64_t generation = 0;        // Import, Revoke, RevokeAck
  uint8_t status = 0;             // ImportReply
};

// The whole frame, length prefix included.
std::vector<uint8_t> encode(const Msg& m);
// The body of one frame (after the length prefix); nullopt with `why` set for anything else.
std::optional<Msg> decode_body(std::span<const uint8_t> body, std::string& why);

}  // namespace rwin::agent
