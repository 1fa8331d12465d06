// The window descriptor every rank allgathers (core/src/window_blob.h).
// Properties: a descriptor that parses re-encodes to exactly the input; its key lies inside the
// input; describing it (done for a peer's mismatching descriptor) never overflows.
#include <cstdint>
#include <cstring>
#include <span>

#include "fuzz_check.h"
#include "window_blob.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  const auto d = rwin::detail::parse_window_blob(in);
  if (!d) return 0;
  FUZZ_CHECK(d->key.data() >= data && d->key.data() + d->key.size() == data + size);
  FUZZ_CHECK(d->name.size() <= size);
  const auto again = rwin::detail::window_blob(d->name, d->dtype, d->shape, d->kind, d->key);
  FUZZ_CHECK(again.size() == size);
  FUZZ_CHECK(std::memcmp(again.data(), data, size) == 0);
  const std::string text = rwin::detail::describe_window_desc(*d);
  FUZZ_CHECK(!text.empty());
  return 0;
}
