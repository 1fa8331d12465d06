// The UCX memory-key blob (transport/ucx/ucx_blob.h, parse_key).
// Properties: a blob that parses packs back to exactly the input, and its raw key (what goes to
// ucp_ep_rkey_unpack) is the tail of the input.
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_check.h"
#include "transport/ucx/ucx_blob.h"

namespace ub = rwin::transport::ucx_blob;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto k = ub::parse_key(std::span<const uint8_t>(data, size));
  if (!k) return 0;
  FUZZ_CHECK(k->raw.data() >= data && k->raw.data() + k->raw.size() == data + size);
  FUZZ_CHECK(ub::pack_key(k->base, k->bytes, k->raw) == std::vector<uint8_t>(data, data + size));
  return 0;
}
