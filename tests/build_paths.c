/* tests/build_paths.c: see build_paths.h. */
#include "build_paths.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static char softnic_verbs[4096];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void paths_init(void)
{
    const char *top = getenv("top_builddir");
    snprintf(softnic_verbs, sizeof(softnic_verbs), "%s/tests/softnic/libibverbs.so.1", top && *top ? top : ".");
}

const char *test_softnic_verbs(void)
{
    pthread_once(&once, paths_init);
    return softnic_verbs;
}
