// A caller's rwin::Store adapted to the bootstrap layer's Store (caller_store.cpp).
#pragma once

#include <memory>

#include "bootstrap/bootstrap.h"
#include "rwin/rwin.h"

namespace rwin::detail {

std::shared_ptr<bootstrap::Store> adapt_store(std::shared_ptr<rwin::Store> store);

}  // namespace rwin::detail
