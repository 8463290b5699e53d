// <immintrin.h> for the per-ISA kernel files. GCC 12's AVX-512 headers trip
// -Wuninitialized on their own _mm*_undefined_*() (GCC PR 105593, fixed in 12.3), so the
// warning is silenced for the header alone.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>  // IWYU pragma: export
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
