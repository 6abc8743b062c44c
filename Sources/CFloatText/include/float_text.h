#ifndef CACHED_FLOAT_TEXT_H
#define CACHED_FLOAT_TEXT_H

#include <stddef.h>

/// INCRBYFLOAT's arithmetic, in C because it is done in `long double` (80-bit on x86-64, 128-bit on arm64),
/// which Swift cannot name on every platform, and Redis's results depend on that precision.
///
/// Adds the float in `increment` to the float in `current` (nil: a missing key, 0), both read as Redis reads
/// floats (`strtold` on the whole text, which must all be the number: no leading space, no zero byte, no NaN,
/// no overflow), and writes the sum to `out` as
/// Redis writes it (`%.17Lf`, trailing zeros and a trailing point removed, -0 as 0).
///
/// Returns the length written; 0 when either text is not such a float; -1 when the sum is NaN or infinite;
/// -2 when `out` (at least 5,120 bytes) is too small.
int cached_incrbyfloat(const char *current, size_t current_length, const char *increment, size_t increment_length,
                       char *out, size_t out_capacity);

#endif
