/* plugin/ib/parse.c: numbers given as text (parse.h). */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* 16 for "0x..." (after blanks and a sign, where strtoll looks), else 10:
 * a leading zero is not octal here, so port "010" is port ten */
static int int_base(const char *s)
{
    s += strspn(s, " \t\n\v\f\r");
    if (*s == '+' || *s == '-')
        s++;
    return s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10;
}

int parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, int_base(s));
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int parse_size(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return -1;
    int shift = 0;
    switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    default: return -1;
    }
    if (shift && end[1] != '\0' && strcasecmp(end + 1, "i") && strcasecmp(end + 1, "ib") && strcasecmp(end + 1, "b"))
        return -1;
    if (hi < 0 || v > (hi >> shift))
        return -1;
    v <<= shift;
    if (v < lo)
        return -1;
    *out = v;
    return 0;
}

int parse_u64(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, int_base(s));
    if (errno || end == s || *end || s[strspn(s, " \t")] == '-')
        return -1;
    *out = v;
    return 0;
}

int parse_real(const char *s, double lo, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo))
        return -1;
    *out = v;
    return 0;
}

int parse_tenths_prefix(const char *s, unsigned long long hi, unsigned long long *out, const char **end)
{
    const char *c = s;
    unsigned long long v = 0;
    if (!isdigit((unsigned char)*c))
        return -1;
    while (isdigit((unsigned char)*c)) {
        v = v * 10 + (unsigned long long)(*c++ - '0');
        if (v > hi)
            return -1;
    }
    v *= 10;
    if (*c == '.' && isdigit((unsigned char)c[1])) {
        v += (unsigned long long)(c[1] - '0');
        for (c += 2; isdigit((unsigned char)*c); c++)
            ;
    }
    if (v > hi)
        return -1;
    *out = v;
    if (end)
        *end = c;
    return 0;
}
