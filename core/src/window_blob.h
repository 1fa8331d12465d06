// The window descriptor every rank allgathers when a window or signal array is allocated:
// magic u32 | version u32 | dtype u8 | kind u8 | shape[0] i64 | shape[1] i64 |
// name_len u32 | name | key_len u64 | key (the transport's packed key), host byte order (all ranks
// of a job run one build on one architecture). Pure functions, so the fuzzer (tests/fuzz) runs
// the real decoder. kind: 0 a window (alloc_window), 1 a signal array, 2 a window buffer (its
// dtype is written as 0 and ignored, its shape is [1, bytes]).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rwin/rwin.h"

namespace rwin::detail {

inline constexpr uint32_t kWindowMagic = 0x52574e57;  // "RWNW": window descriptor blob
inline constexpr uint32_t kWindowVersion = 2;  // 2: kind (was is_signal) may be 2 = buffer

enum class BlobKind : uint8_t { Window = 0, Signals = 1, Buffer = 2 };

struct WindowDesc {
  DType dtype;
  BlobKind kind;
  Shape2 shape;
  std::string name;
  std::span<const uint8_t> key;  // inside the parsed blob
};

std::vector<uint8_t> window_blob(const std::string& name, DType dtype, Shape2 shape, BlobKind kind,
                                 std::span<const uint8_t> key);

// nullopt unless `b` is exactly one well-formed descriptor of this version (the shape is not
// checked: the caller compares it with its own).
std::optional<WindowDesc> parse_window_blob(std::span<const uint8_t> b);

// "'y' f32[4x1024] (16384 bytes)" (a buffer: "buffer 'b' (65536 bytes)") for a peer's descriptor, whatever its shape: a hostile or
// corrupted shape whose byte count does not fit in 64 bits says so instead of overflowing.
std::string describe_window_desc(const WindowDesc& d);

}  // namespace rwin::detail
