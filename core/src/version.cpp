// rwin::version(): the version this library was built as (rwin/version.h).
#include "rwin/version.h"

namespace rwin {
const char* version() noexcept { return RWIN_VERSION_STRING; }
}  // namespace rwin
