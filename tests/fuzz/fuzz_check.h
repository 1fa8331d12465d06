// Shared by the harnesses: a failed property aborts with a message, which libFuzzer reports as
// a crash and saves the input (a plain assert would vanish under NDEBUG).
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                        \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #cond);         \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)
