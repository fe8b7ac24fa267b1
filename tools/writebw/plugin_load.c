/* tools/writebw/plugin_load.c: locating and loading the plugin (see
 * plugin_load.h). */
#include "config.h"

#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../common/plugin_tables.h"
#include "../common/strfmt.h"
#include "plugin_load.h"

#define PLUGIN_FILE "libnccl-net-railnet.so"

static int try_one(struct plugin_lib *p, const char *path, char *log, size_t loglen, size_t *off)
{
    char err[PATH_MAX + 256];
    const ncclNet_v8_t *net =
        plugin_tables_load(&p->lib, path, &plugin_table_net_v8, PLUGIN_TABLES_NAME, err, sizeof(err));
    if (!net) {
        *off += str_fmt(log + *off, loglen - *off, "\n  %s", err);
        return -1;
    }
    p->net = net;
    str_fmt(p->path, sizeof(p->path), "%s", path);
    return 0;
}

int plugin_load(struct plugin_lib *p, const char *explicit_path, char *err, size_t errlen)
{
    memset(p, 0, sizeof(*p));
    char log[4096] = "";
    size_t off = 0;
    if (explicit_path) {
        if (!try_one(p, explicit_path, log, sizeof(log), &off))
            return 0;
        str_fmt(err, errlen, "cannot load the plugin given by --plugin-lib:%s", log);
        return -1;
    }
    const char *env = getenv("NCCL_NET_PLUGIN");
    if (env && *env) {
        char name[PATH_MAX];
        size_t n = strlen(env);
        if (strchr(env, '/') || (!strncmp(env, "lib", 3) && n > 3 && !strcmp(env + n - 3, ".so")))
            str_fmt(name, sizeof(name), "%s", env);
        else
            str_fmt(name, sizeof(name), "libnccl-net-%s.so", env);
        if (!try_one(p, name, log, sizeof(log), &off))
            return 0;
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *dir = dirname(exe);
        static const char *rel[] = { "", "/../lib", "/../.libs", "/../plugin/.libs" };
        for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
            char cand[PATH_MAX + 64];
            str_fmt(cand, sizeof(cand), "%s%s/" PLUGIN_FILE, dir, rel[i]);
            if (access(cand, F_OK))
                continue;
            char *real = realpath(cand, NULL);
            int ok = !try_one(p, real ? real : cand, log, sizeof(log), &off);
            free(real);
            if (ok)
                return 0;
        }
    }
    if (!try_one(p, PLUGIN_FILE, log, sizeof(log), &off))
        return 0;
    str_fmt(err, errlen, "--mode=plugin: cannot find railnet's plugin library (%s); tried:%s\n"
            "build it (make) and pass --plugin-lib PATH, set NCCL_NET_PLUGIN to its path, or add "
            "its directory to LD_LIBRARY_PATH", PLUGIN_FILE, log);
    return -1;
}

void plugin_unload(struct plugin_lib *p)
{
    plugin_tables_close(&p->lib);
    memset(p, 0, sizeof(*p));
}

void plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...)
{
    (void)flags;
    const char *dbg = getenv("NCCL_DEBUG");
    int show = level == NCCL_LOG_WARN || level == NCCL_LOG_ABORT ||
               (dbg && (!strcasecmp(dbg, "INFO") || !strcasecmp(dbg, "TRACE")) &&
                level == NCCL_LOG_INFO) ||
               (dbg && !strcasecmp(dbg, "TRACE") && level == NCCL_LOG_TRACE);
    if (!show)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "railnet-write-bw: plugin %s %s:%d: ", level == NCCL_LOG_WARN ? "WARN" : "INFO",
            file ? file : "?", line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
