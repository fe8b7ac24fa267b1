/* bench/conn_setup_bench.c: how long the plugin takes to set up N
 * connections, as NCCL asks for them (bench/cm_vs_tcp_setup.sh runs it once
 * with RAILNET_CM=tcp and once with RAILNET_CM=rdmacm and prints the ratio).
 * One process plays both ends through the exported table on softnic: N
 * listens, then connect and accept polled round-robin until all N pairs are
 * up (the time measured), then everything is closed. A first connection
 * (thread and device start-up) is not measured. Each count is measured
 * --reps times; the median is printed as "conns N ms X".
 * Usage: conn_setup_bench [--reps R] N... */
#include "nccl_net_v8.h"
#include "plugin/ib/parse.h"
#include "tools/common/plugin_tables.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXN 256

static const ncclNet_v8_t *net;

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    (void)level, (void)flags, (void)file, (void)line, (void)fmt;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Seconds to connect n pairs; < 0 on failure. */
static double setup(int n)
{
    static char handles[MAXN][NCCL_NET_HANDLE_MAXSIZE];
    void *lc[MAXN] = { 0 }, *sc[MAXN] = { 0 }, *rc[MAXN] = { 0 };
    double t0 = now_s(), t = -1;
    int done = 0, bad = 0;
    for (int i = 0; i < n && !bad; i++)
        bad = net->listen(0, handles[i], &lc[i]) != ncclSuccess;
    while (!bad && done < n && now_s() - t0 < 120) {
        for (int i = 0; i < n && !bad; i++) {
            if (!sc[i] && net->connect(0, handles[i], &sc[i], NULL) != ncclSuccess)
                bad = 1;
            if (!rc[i] && net->accept(lc[i], &rc[i], NULL) != ncclSuccess)
                bad = 1;
        }
        done = 0;
        for (int i = 0; i < n; i++)
            done += sc[i] && rc[i];
    }
    if (!bad && done == n)
        t = now_s() - t0;
    for (int i = 0; i < n; i++) {
        if (sc[i])
            net->closeSend(sc[i]);
        if (rc[i])
            net->closeRecv(rc[i]);
        if (lc[i])
            net->closeListen(lc[i]);
    }
    return t;
}

int main(int argc, char **argv)
{
    int reps = 5, a = 1;
    long long x;
    if (argc > 2 && !strcmp(argv[1], "--reps")) {
        if (parse_int(argv[2], 1, 99, &x)) {
            fprintf(stderr, "conn_setup_bench: bad value '%s' for --reps: an integer in [1, 99]\n", argv[2]);
            return 2;
        }
        reps = (int)x;
        a = 3;
    }
    if (a >= argc) {
        fprintf(stderr, "usage: conn_setup_bench [--reps R] N...\n");
        return 2;
    }
    /* every count before the plugin is loaded: a bad one costs no run */
    for (int i = a; i < argc; i++)
        if (parse_int(argv[i], 1, MAXN, &x)) {
            fprintf(stderr, "conn_setup_bench: bad connection count '%s': an integer in [1, %d]\n", argv[i], MAXN);
            return 2;
        }
    const char *top = getenv("top_builddir") ? getenv("top_builddir") : ".";
    char path[4096];
    snprintf(path, sizeof(path), "%s/.libs/libnccl-net-railnet.so", top);
    static struct plugin_tables lib;
    char err[512];
    int ndev = 0;
    net = plugin_tables_load(&lib, path, &plugin_table_net_v8, PLUGIN_TABLES_NAME, err, sizeof(err));
    if (!net) {
        fprintf(stderr, "conn_setup_bench: %s\n", err);
        return 1;
    }
    if (net->init(logger) != ncclSuccess || net->devices(&ndev) != ncclSuccess || ndev < 1) {
        fprintf(stderr, "conn_setup_bench: %s: init failed or no device\n", path);
        return 1;
    }
    /* first use starts threads and opens devices: not part of a setup */
    if (setup(1) < 0) {
        fprintf(stderr, "conn_setup_bench: a first connection failed\n");
        return 1;
    }
    for (; a < argc; a++) {
        (void)parse_int(argv[a], 1, MAXN, &x);   /* checked above */
        int n = (int)x;
        double t[99];
        for (int r = 0; r < reps; r++) {
            t[r] = setup(n);
            if (t[r] < 0) {
                fprintf(stderr, "conn_setup_bench: setting up %d connections failed\n", n);
                return 1;
            }
        }
        qsort(t, (size_t)reps, sizeof(double), cmp);
        printf("conns %d ms %.3f\n", n, t[reps / 2] * 1e3);
        fflush(stdout);
    }
    return 0;
}
