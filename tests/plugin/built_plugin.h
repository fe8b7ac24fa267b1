/* tests/plugin/built_plugin.h: the plugin of this build tree, as the plugin
 * tests drive it: $top_builddir/.libs/libnccl-net-railnet.so (make check
 * exports top_builddir; "." otherwise), loaded through the one loader
 * (tools/common/plugin_tables), with softnic's libibverbs as its verbs
 * library (RAILNET_IBVERBS_LIB), init'ed with the test's logger. */
#ifndef RAILNET_TESTS_BUILT_PLUGIN_H
#define RAILNET_TESTS_BUILT_PLUGIN_H

#include <stdarg.h>
#include <stddef.h>

#include "nccl_net_v8.h"

/* The table, or NULL when the library does not load, init fails or it sees
 * no device (the loader's reason is printed as a TAP comment). verbs, when
 * not NULL, receives a dlopen handle of the softnic libibverbs the plugin
 * loaded (its softnic_ctl_* and verbs for the test's own use); NULL is then
 * also returned when that library is not loaded. */
const ncclNet_v8_t *built_plugin_load(ncclDebugLogger_t logger, void **verbs);
/* The same library's table of another kind (plugin_tables.h, e.g.
 * &plugin_table_gin_v11), not init'ed; NULL when it does not load (why is
 * printed as a TAP comment). */
struct plugin_table_kind;
const void *built_plugin_table(const struct plugin_table_kind *kind);
/* The test's own context on softnic's first device (its port controls and
 * counters), opened through that handle; NULL when it cannot be. */
void *built_open_first_device(void *verbs);

/* Appends one formatted log line and a newline to the NUL-terminated log
 * buf (size bytes) when the whole line fits; a line that does not is
 * dropped (the loggers the tests give built_plugin_load keep what they
 * captured whole). */
void built_log_append(char *buf, size_t size, const char *fmt, va_list ap);

/* A logger for built_plugin_load that keeps the plugin's WARN lines (and
 * nothing else) in the buffer built_capture_warns named, by
 * built_log_append. */
void built_capture_warns(char *buf, size_t size);
void built_warn_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt,
                       ...);

/* CLOCK_MONOTONIC in seconds: the tests' deadlines. */
double built_now_s(void);
/* How many times needle occurs in text (a test's captured log). */
int built_count(const char *text, const char *needle);

/* A send and a receive comm of one process connected to each other on
 * device 0 (listen, then connect and accept until both exist, at most
 * 30 s), each with a page-aligned host buffer of `bytes` registered on it. */
struct built_pair {
    void *lc, *sc, *rc;
    char *sbuf, *rbuf;
    void *smh, *rmh;
};
/* 0, or -1 when a step failed (what was made stays for built_pair_close). */
int built_pair_open(const ncclNet_v8_t *net, struct built_pair *p, size_t bytes);
/* Undoes it in NCCL's abort order: deregMr, closeSend, closeRecv,
 * closeListen (requests may still be in flight); zeroes *p. */
void built_pair_close(const ncclNet_v8_t *net, struct built_pair *p);

#endif
