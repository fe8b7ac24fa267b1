/* tests/plugin/built_plugin.c: see built_plugin.h. */
#include "built_plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/build_paths.h"
#include "tools/common/plugin_tables.h"

const void *built_plugin_table(const struct plugin_table_kind *kind)
{
    const char *top = getenv("top_builddir");
    char path[4096];
    snprintf(path, sizeof(path), "%s/.libs/libnccl-net-railnet.so", top ? top : ".");
    setenv("RAILNET_IBVERBS_LIB", test_softnic_verbs(), 1);
    static struct plugin_tables tables;
    char err[PATH_MAX + 256];
    const void *t = plugin_tables_load(&tables, path, kind, PLUGIN_TABLES_NAME, err, sizeof(err));
    if (!t)
        printf("# %s\n", err);
    return t;
}

const ncclNet_v8_t *built_plugin_load(ncclDebugLogger_t logger, void **verbs)
{
    const ncclNet_v8_t *net = built_plugin_table(&plugin_table_net_v8);
    if (!net)
        return NULL;
    int n = 0;
    if (net->init(logger) != ncclSuccess || net->devices(&n) != ncclSuccess || n < 1)
        return NULL;
    if (verbs && !(*verbs = dlopen(test_softnic_verbs(), RTLD_NOW | RTLD_NOLOAD)))
        return NULL;
    return net;
}

void *built_open_first_device(void *verbs)
{
    void **(*get_list)(int *) = (void **(*)(int *))dlsym(verbs, "ibv_get_device_list");
    void *(*open_dev)(void *) = (void *(*)(void *))dlsym(verbs, "ibv_open_device");
    int n = 0;
    void **list = get_list ? get_list(&n) : NULL;
    return open_dev && list && n >= 1 ? open_dev(list[0]) : NULL;
}

void built_log_append(char *buf, size_t size, const char *fmt, va_list ap)
{
    char line[4096];
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    size_t at = strlen(buf);
    if (n < 0 || (size_t)n >= sizeof(line) || at + (size_t)n + 2 > size)
        return;
    memcpy(buf + at, line, (size_t)n);
    buf[at + (size_t)n] = '\n';
    buf[at + (size_t)n + 1] = '\0';
}

static char *warn_buf;
static size_t warn_size;

void built_capture_warns(char *buf, size_t size)
{
    warn_buf = buf;
    warn_size = size;
}

void built_warn_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt,
                       ...)
{
    (void)flags, (void)file, (void)line;
    if (level != NCCL_LOG_WARN || !warn_buf)
        return;
    va_list ap;
    va_start(ap, fmt);
    built_log_append(warn_buf, warn_size, fmt, ap);
    va_end(ap);
}

double built_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int built_count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

int built_pair_open(const ncclNet_v8_t *net, struct built_pair *p, size_t bytes)
{
    uint8_t handle[NCCL_NET_HANDLE_MAXSIZE];
    memset(p, 0, sizeof(*p));
    if (net->listen(0, handle, &p->lc) != ncclSuccess)
        return -1;
    double end = built_now_s() + 30;
    while ((!p->sc || !p->rc) && built_now_s() < end) {
        if (!p->sc && net->connect(0, handle, &p->sc, NULL) != ncclSuccess)
            return -1;
        if (!p->rc && net->accept(p->lc, &p->rc, NULL) != ncclSuccess)
            return -1;
    }
    if (!p->sc || !p->rc)
        return -1;
    if (posix_memalign((void **)&p->sbuf, 4096, bytes) || posix_memalign((void **)&p->rbuf, 4096, bytes))
        return -1;
    if (net->regMr(p->sc, p->sbuf, (int)bytes, NCCL_PTR_HOST, &p->smh) != ncclSuccess ||
        net->regMr(p->rc, p->rbuf, (int)bytes, NCCL_PTR_HOST, &p->rmh) != ncclSuccess)
        return -1;
    return 0;
}

void built_pair_close(const ncclNet_v8_t *net, struct built_pair *p)
{
    if (p->smh)
        net->deregMr(p->sc, p->smh);
    if (p->rmh)
        net->deregMr(p->rc, p->rmh);
    net->closeSend(p->sc);
    net->closeRecv(p->rc);
    net->closeListen(p->lc);
    free(p->sbuf);
    free(p->rbuf);
    memset(p, 0, sizeof(*p));
}
