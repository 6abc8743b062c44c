#include "float_text.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/// Redis's MAX_LONG_DOUBLE_CHARS: longer texts are not floats.
#define MAX_TEXT 5120

static int parse(const char *text, size_t length, long double *value) {
    char buffer[MAX_TEXT];
    if (length == 0 || length >= sizeof buffer) return 0;
    memcpy(buffer, text, length);
    buffer[length] = '\0';
    errno = 0;
    char *end;
    long double parsed = strtold(buffer, &end);
    if (isspace((unsigned char)buffer[0]) || end[0] != '\0' || (size_t)(end - buffer) != length ||
        (errno == ERANGE && (parsed == HUGE_VALL || parsed == -HUGE_VALL || fpclassify(parsed) == FP_ZERO)) ||
        isnan(parsed))
        return 0;
    *value = parsed;
    return 1;
}

int cached_incrbyfloat(const char *current, size_t current_length, const char *increment, size_t increment_length,
                       char *out, size_t out_capacity) {
    long double value = 0, by;
    if (current != NULL && !parse(current, current_length, &value)) return 0;
    if (!parse(increment, increment_length, &by)) return 0;
    value += by;
    if (isnan(value) || isinf(value)) return -1;
    int length = snprintf(out, out_capacity, "%.17Lf", value);
    if (length < 0 || (size_t)length + 1 > out_capacity) return -2;
    if (memchr(out, '.', (size_t)length) != NULL) {
        while (out[length - 1] == '0') length--;
        if (out[length - 1] == '.') length--;
    }
    if (length == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        length = 1;
    }
    return length;
}
