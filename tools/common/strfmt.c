/* tools/common/strfmt.c: bounded formatting (see strfmt.h). */
#include "config.h"

#include "strfmt.h"

#include <stdarg.h>
#include <stdio.h>

size_t str_fmt(char *buf, size_t len, const char *fmt, ...)
{
    if (len == 0)
        return 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        buf[0] = '\0';
        return 0;
    }
    return (size_t)n < len ? (size_t)n : len - 1;
}
