/* tools/diag/report.h: the list of check results railnet-diag prints.
 *
 * Contract: checks append results in the order they run; nothing is printed
 * until report_print_text() or report_print_json(). Each result has a stable
 * id ("pci.relaxed_ordering"), the subject it is about ("mlx5_0",
 * "0000:3b:00.0", "host"), a status, a one-line summary, the evidence it was
 * decided from, and the fix to try (empty when there is nothing to fix). */
#ifndef RAILNET_TOOLS_DIAG_REPORT_H
#define RAILNET_TOOLS_DIAG_REPORT_H

#include <stdio.h>

enum diag_status { DIAG_OK, DIAG_WARN, DIAG_FAIL, DIAG_SKIP };

struct diag_result {
    enum diag_status status;
    char id[48];
    char subject[48];
    char summary[512];
    char evidence[1024];
    char fix[1024];
};

struct report {
    struct diag_result *items;
    size_t n, cap;
};

const char *diag_status_name(enum diag_status st);

/* Appends a result; the summary is a printf format. evidence/fix may be NULL.
 * Returns the stored result (so a caller can amend it) or NULL when out of
 * memory. */
struct diag_result *report_add(struct report *r, enum diag_status st, const char *id,
                               const char *subject, const char *evidence, const char *fix,
                               const char *fmt, ...) __attribute__((format(printf, 7, 8)));

size_t report_count(const struct report *r, enum diag_status st);
/* First result with this id and subject (subject NULL: any), or NULL. */
const struct diag_result *report_find(const struct report *r, const char *id, const char *subject);

void report_print_text(const struct report *r, FILE *out, int verbose);
/* Prints the "checks" array members (without brackets) as JSON objects. */
void report_print_json_checks(const struct report *r, FILE *out);
void report_free(struct report *r);

#endif
