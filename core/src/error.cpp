#include <string>

#include "rwin/rwin.h"

namespace rwin {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::PeerOutOfRange: return "PeerOutOfRange";
    case ErrorCode::OutOfBounds: return "OutOfBounds";
    case ErrorCode::ShapeMismatch: return "ShapeMismatch";
    case ErrorCode::DtypeMismatch: return "DtypeMismatch";
    case ErrorCode::Misaligned: return "Misaligned";
    case ErrorCode::WindowMismatch: return "WindowMismatch";
    case ErrorCode::UseAfterFree: return "UseAfterFree";
    case ErrorCode::Timeout: return "Timeout";
    case ErrorCode::PeerFailed: return "PeerFailed";
    case ErrorCode::Transport: return "Transport";
    case ErrorCode::Bootstrap: return "Bootstrap";
    case ErrorCode::Unsupported: return "Unsupported";
    case ErrorCode::CollectiveMismatch: return "CollectiveMismatch";
  }
  return "Unknown";
}

namespace {
// The words an Error's message starts with ("rwin: out of bounds: ..."): prose, not the code name.
const char* prose(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::PeerOutOfRange: return "peer out of range";
    case ErrorCode::OutOfBounds: return "out of bounds";
    case ErrorCode::ShapeMismatch: return "shape mismatch";
    case ErrorCode::DtypeMismatch: return "dtype mismatch";
    case ErrorCode::Misaligned: return "misaligned";
    case ErrorCode::WindowMismatch: return "window mismatch";
    case ErrorCode::UseAfterFree: return "use after free";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::PeerFailed: return "peer failed";
    case ErrorCode::Transport: return "transport";
    case ErrorCode::Bootstrap: return "bootstrap";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::CollectiveMismatch: return "collective mismatch";
  }
  return "error";
}
}  // namespace

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error("rwin: " + std::string(prose(code)) + ": " + message), code_(code) {}

const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U32: return "u32";
    case DType::U64: return "u64";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I8: return "i8";
    case DType::I16: return "i16";
    case DType::U8: return "u8";
    case DType::U16: return "u16";
  }
  return "?";
}

DType parse_dtype(const std::string& name) {
  std::string names;
  for (DType t : all_dtypes) {
    if (name == dtype_name(t)) return t;
    names += (names.empty() ? "" : ", ") + std::string(dtype_name(t));
  }
  throw Error(ErrorCode::InvalidArgument, "unknown dtype '" + name + "' (expected one of " + names + ")");
}

const char* to_string(WaitCmp cmp) noexcept {
  switch (cmp) {
    case WaitCmp::EQ: return "==";
    case WaitCmp::NE: return "!=";
    case WaitCmp::GT: return ">";
    case WaitCmp::GE: return ">=";
    case WaitCmp::LT: return "<";
    case WaitCmp::LE: return "<=";
  }
  return "?";
}

}  // namespace rwin
