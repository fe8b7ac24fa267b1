/* tools/common/json.c: JSON string escaping and numbers (see json.h). */
#include "config.h"

#include "json.h"

#include <math.h>

void json_str(FILE *out, const char *s)
{
    if (!s) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\t': fputs("\\t", out); break;
        case '\r': fputs("\\r", out); break;
        default:
            if (*p < 0x20)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

void json_num(FILE *out, double v)
{
    if (isfinite(v))
        fprintf(out, "%.6g", v);
    else
        fputs("null", out);
}
