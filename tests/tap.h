/* tests/tap.h: the TAP producer every C test links against.
 *
 * Contract: a test program registers its cases with TAP_CASE(), calls
 * tap_run() from main(); each case prints one "ok"/"not ok" line, so
 * `make check` counts cases, not programs. A case fails on the first
 * EXPECT_*; the message shows expected and actual. A case that cannot run
 * here calls TAP_SKIP("why").  Cases run in the order registered, each in a
 * forked child (a crash or an exit() fails only that case) with a timeout
 * (TAP_TIMEOUT seconds, default 120) so a hang is a failure, not a stall.
 * A case that reports progress (tap_progress(), e.g. once per message it
 * checked) times out only after TAP_TIMEOUT seconds without any: on a host
 * loaded by other builds a long case runs slower but still finishes, while a
 * hang still fails (TAP_TIMEOUT * 10 bounds such a case in all). */
#ifndef RAILNET_TESTS_TAP_H
#define RAILNET_TESTS_TAP_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef void (*tap_fn)(void);

struct tap_case {
    const char *name;
    tap_fn fn;
};

void tap_register(const char *name, tap_fn fn);
int tap_run(int argc, char **argv);
void tap_fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
void tap_skip(const char *why) __attribute__((noreturn));
void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The running case moved on (restarts its no-progress timeout). */
void tap_progress(void);
/* Removes the directory tree at dir (a test's temporary files), without
 * following symbolic links: 0, or -1 with errno of the first failure. */
int tap_rm_tree(const char *dir);

#define TAP_CASE(fn)                                                        \
    static void fn(void);                                                   \
    __attribute__((constructor)) static void tap_reg_##fn(void) { tap_register(#fn, fn); } \
    static void fn(void)

#define TAP_SKIP(why) tap_skip(why)

#define EXPECT_TRUE(cond)                                                   \
    do { if (!(cond)) tap_fail_at(__FILE__, __LINE__, "expected: %s", #cond); } while (0)

#define EXPECT_EQ_INT(expected, actual)                                     \
    do {                                                                    \
        long long e_ = (long long)(expected), a_ = (long long)(actual);     \
        if (e_ != a_)                                                       \
            tap_fail_at(__FILE__, __LINE__, "%s: expected %lld, got %lld",  \
                        #actual, e_, a_);                                   \
    } while (0)

#define EXPECT_EQ_U64(expected, actual)                                     \
    do {                                                                    \
        uint64_t e_ = (uint64_t)(expected), a_ = (uint64_t)(actual);        \
        if (e_ != a_)                                                       \
            tap_fail_at(__FILE__, __LINE__, "%s: expected 0x%" PRIx64       \
                        ", got 0x%" PRIx64, #actual, e_, a_);               \
    } while (0)

#define EXPECT_STREQ(expected, actual)                                      \
    do {                                                                    \
        const char *e_ = (expected), *a_ = (actual);                        \
        if (!e_ || !a_ || strcmp(e_, a_) != 0)                              \
            tap_fail_at(__FILE__, __LINE__, "%s: expected \"%s\", got \"%s\"", \
                        #actual, e_ ? e_ : "(null)", a_ ? a_ : "(null)");   \
    } while (0)

#define EXPECT_MEMEQ(expected, actual, len)                                 \
    do {                                                                    \
        const unsigned char *e_ = (const unsigned char *)(expected);        \
        const unsigned char *a_ = (const unsigned char *)(actual);          \
        size_t n_ = (len);                                                  \
        for (size_t i_ = 0; i_ < n_; i_++)                                  \
            if (e_[i_] != a_[i_])                                           \
                tap_fail_at(__FILE__, __LINE__, "%s: byte %zu: expected 0x%02x, got 0x%02x", \
                            #actual, i_, e_[i_], a_[i_]);                   \
    } while (0)

#endif
