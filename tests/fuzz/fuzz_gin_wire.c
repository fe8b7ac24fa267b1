/* tests/fuzz/fuzz_gin_wire.c: libFuzzer target for the GIN message parsers
 * (plugin/gin/gin_wire.h), which read what other ranks send. A parse that
 * succeeds must re-encode to bytes that parse to the same values. Crashes,
 * out-of-bounds reads (ASan) and undefined behaviour (UBSan) are the
 * failures looked for. */
#include "plugin/gin/gin_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static void seed_write(const char *dir, const char *name, const uint8_t *buf, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    fwrite(buf, 1, len, f);
    fclose(f);
}

/* FUZZ_SEED_DIR=dir: one valid instance of every message first. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = getenv("FUZZ_SEED_DIR");
    if (!dir)
        return 0;
    uint8_t buf[GW_MSG_MAX];
    struct gw_peer m;
    memset(&m, 0, sizeof(m));
    m.nranks = 4, m.src_rank = 3, m.dst_rank = 1, m.link_layer = 2, m.nports = 2, m.nqps = 2;
    for (int i = 0; i < 2; i++)
        m.qp[i] = (struct hs_qp_info){ .qpn = 0x10 + (uint32_t)i, .psn = 1, .port_num = (uint8_t)(i + 1),
                                       .port_idx = (uint8_t)i, .mtu = 5, .is_global = 1 };
    seed_write(dir, "hello", buf, gw_peer_encode(GW_HELLO, &m, buf, sizeof(buf)));
    seed_write(dir, "reply", buf, gw_peer_encode(GW_REPLY, &m, buf, sizeof(buf)));
    m.nqps = 0, m.qps = GW_QPS_NONE; /* a GDAKI-type collComm: no proxy QPs */
    seed_write(dir, "hello-no-qps", buf, gw_peer_encode(GW_HELLO, &m, buf, sizeof(buf)));
    seed_write(dir, "ready", buf, gw_ready_encode(buf, sizeof(buf)));
    struct gw_win w = { .seq = 3, .addr = 0x1000, .size = 4096, .rkey = 7 };
    seed_write(dir, "win", buf, gw_win_encode(&w, buf, sizeof(buf)));
    return 0;
}

/* Field by field: struct copies need not carry padding bytes. */
static int peer_same(const struct gw_peer *a, const struct gw_peer *b)
{
    if (a->status != b->status || a->nranks != b->nranks || a->src_rank != b->src_rank ||
        a->dst_rank != b->dst_rank || a->dst_nonce != b->dst_nonce || a->src_nonce != b->src_nonce ||
        a->guid != b->guid || a->link_layer != b->link_layer || a->nports != b->nports || a->nqps != b->nqps ||
        a->qps != b->qps)
        return 0;
    for (int i = 0; i < a->nqps; i++) {
        const struct hs_qp_info *x = &a->qp[i], *y = &b->qp[i];
        if (x->qpn != y->qpn || x->psn != y->psn || x->lid != y->lid || x->port_num != y->port_num ||
            x->port_idx != y->port_idx || x->mtu != y->mtu || x->gid_index != y->gid_index ||
            x->is_global != y->is_global || memcmp(x->gid, y->gid, 16))
            return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[HS_ERR_LEN];
    uint8_t buf[GW_MSG_MAX];
    for (uint16_t t = GW_HELLO; t <= GW_REPLY; t++) {
        struct gw_peer m, again;
        if (gw_peer_parse(data, size, t, &m, err) == 0) {
            size_t len = gw_peer_encode(t, &m, buf, sizeof(buf));
            if (!len || gw_peer_parse(buf, len, t, &again, err) || !peer_same(&m, &again))
                abort();
        }
    }
    (void)gw_ready_parse(data, size, err);
    struct gw_win w, w2;
    if (gw_win_parse(data, size, &w, err) == 0) {
        size_t len = gw_win_encode(&w, buf, sizeof(buf));
        if (!len || gw_win_parse(buf, len, &w2, err) || w.seq != w2.seq || w.status != w2.status ||
            w.addr != w2.addr || w.size != w2.size || w.rkey != w2.rkey)
            abort();
    }
    return 0;
}
