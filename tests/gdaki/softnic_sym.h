/* tests/gdaki/softnic_sym.h: a function of softnic's control API
 * (tests/softnic/softnic_ctl.h) in the verbs library a gdaki pair loaded,
 * for tests that read softnic's counters. */
#ifndef RAILNET_TESTS_GDAKI_SOFTNIC_SYM_H
#define RAILNET_TESTS_GDAKI_SOFTNIC_SYM_H

#include <dlfcn.h>
#include <stddef.h>

#include "railnet_gdaki.h"

/* The address of name in pair p's libibverbs, or NULL when that library is
 * not softnic (or a softnic without it).  It stays valid while p is open:
 * the pair holds the library loaded. */
static inline void *softnic_sym(struct gdaki_pair *p, const char *name)
{
    struct gdaki_pair_info in;
    gdaki_pair_get_info(p, &in);
    void *h = in.ibverbs_path ? dlopen(in.ibverbs_path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    void *fn = h ? dlsym(h, name) : NULL;
    if (h)
        dlclose(h);   /* drops only the reference RTLD_NOLOAD took */
    return fn;
}

#endif
