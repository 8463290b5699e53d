// BATON_CHECK is for broken invariants only: a failed check is a bug in Baton, never a
// consequence of bad input. Input errors are absl::Status.
#pragma once

#include <cstdio>
#include <cstdlib>

#define BATON_CHECK(cond)                                                           \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (false)
