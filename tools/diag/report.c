/* tools/diag/report.c: collecting and printing check results (see report.h). */
#include "config.h"

#include "../common/strfmt.h"
#include "report.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../common/json.h"

const char *diag_status_name(enum diag_status st)
{
    switch (st) {
    case DIAG_OK: return "OK";
    case DIAG_WARN: return "WARN";
    case DIAG_FAIL: return "FAIL";
    case DIAG_SKIP: return "SKIP";
    }
    return "?";
}

static void copy_str(char *dst, size_t len, const char *src)
{
    str_fmt(dst, len, "%s", src ? src : "");
}

struct diag_result *report_add(struct report *r, enum diag_status st, const char *id,
                               const char *subject, const char *evidence, const char *fix,
                               const char *fmt, ...)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 32;
        struct diag_result *items = realloc(r->items, cap * sizeof(*items));
        if (!items)
            return NULL;
        r->items = items;
        r->cap = cap;
    }
    struct diag_result *res = &r->items[r->n++];
    memset(res, 0, sizeof(*res));
    res->status = st;
    copy_str(res->id, sizeof(res->id), id);
    copy_str(res->subject, sizeof(res->subject), subject);
    copy_str(res->evidence, sizeof(res->evidence), evidence);
    copy_str(res->fix, sizeof(res->fix), fix);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->summary, sizeof(res->summary), fmt, ap);
    va_end(ap);
    return res;
}

size_t report_count(const struct report *r, enum diag_status st)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++)
        n += r->items[i].status == st;
    return n;
}

const struct diag_result *report_find(const struct report *r, const char *id, const char *subject)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->items[i].id, id) && (!subject || !strcmp(r->items[i].subject, subject)))
            return &r->items[i];
    return NULL;
}

void report_print_text(const struct report *r, FILE *out, int verbose)
{
    for (size_t i = 0; i < r->n; i++) {
        const struct diag_result *res = &r->items[i];
        fprintf(out, "%-5s %-22s %-14s %s\n", diag_status_name(res->status), res->id,
                res->subject, res->summary);
        /* Evidence is what a reader needs to trust a verdict they may act on;
         * for OK results it is noise unless asked for. */
        if (res->evidence[0] && (verbose || res->status == DIAG_WARN || res->status == DIAG_FAIL))
            fprintf(out, "      evidence: %s\n", res->evidence);
        if (res->fix[0] && res->status != DIAG_OK)
            fprintf(out, "      fix: %s\n", res->fix);
    }
}

void report_print_json_checks(const struct report *r, FILE *out)
{
    for (size_t i = 0; i < r->n; i++) {
        const struct diag_result *res = &r->items[i];
        fputs(i ? ",\n    {" : "\n    {", out);
        fputs("\"id\": ", out);
        json_str(out, res->id);
        fputs(", \"subject\": ", out);
        json_str(out, res->subject);
        fputs(", \"status\": ", out);
        json_str(out, diag_status_name(res->status));
        fputs(", \"summary\": ", out);
        json_str(out, res->summary);
        fputs(", \"evidence\": ", out);
        json_str(out, res->evidence);
        fputs(", \"fix\": ", out);
        json_str(out, res->fix);
        fputc('}', out);
    }
}

void report_free(struct report *r)
{
    free(r->items);
    memset(r, 0, sizeof(*r));
}
