// The verbs connection, endpoint (run-time peers) and memory-key blobs (transport/verbs/verbs_blob.h).
// Properties: unpack either returns a blob that packs back to exactly the input or throws
// TransportError (never anything else, never reads past the input); a key never wraps the
// address space.
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_check.h"
#include "transport/verbs/verbs_blob.h"

namespace v = rwin::transport::verbs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  const std::vector<uint8_t> input(data, data + size);
  try {
    const auto c = v::ConnBlob::unpack(in);
    FUZZ_CHECK(c.pack() == input);
  } catch (const rwin::transport::TransportError&) {
  }
  try {
    const auto e = v::EndpointBlob::unpack(in);
    FUZZ_CHECK(e.pack() == input);
  } catch (const rwin::transport::TransportError&) {
  }
  try {
    const auto k = v::KeyBlob::unpack(in);
    FUZZ_CHECK(k.pack() == input);
    FUZZ_CHECK(k.bytes <= UINT64_MAX - k.addr);
    FUZZ_CHECK(k.rails >= 1 && k.rails <= v::KeyBlob::kMaxRails);
  } catch (const rwin::transport::TransportError&) {
  }
  return 0;
}
