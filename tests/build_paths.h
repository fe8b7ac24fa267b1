/* tests/build_paths.h: where the build tree's pieces are, for test programs
 * run by make check (top_builddir in the environment; "." without it). */
#ifndef RAILNET_TESTS_BUILD_PATHS_H
#define RAILNET_TESTS_BUILD_PATHS_H

/* $top_builddir/tests/softnic/libibverbs.so.1: softnic's verbs library.
 * The string is the process's own, the same at every call. */
const char *test_softnic_verbs(void);

#endif
