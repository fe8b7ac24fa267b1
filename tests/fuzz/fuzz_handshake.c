/* tests/fuzz/fuzz_handshake.c: libFuzzer target for the handshake parsers.
 * Every parser gets the same untrusted bytes; a parse that succeeds must
 * re-encode to bytes that parse again to the same values (no parser accepts
 * what the encoder could not produce). Crashes, out-of-bounds reads (ASan)
 * and undefined behaviour (UBSan) are the failures looked for. */
#include "plugin/ib/handshake.h"

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

/* FUZZ_SEED_DIR=dir: write one valid instance of every message there first,
 * so that a short run explores near valid inputs rather than random noise. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = getenv("FUZZ_SEED_DIR");
    if (!dir)
        return 0;
    uint8_t buf[HS_MSG_MAX];
    struct hs_handle h = { .version = HS_VERSION, .family = 4, .link_layer = 2, .nports = 2,
                           .tcp_port = 4242, .guid = 1, .nonce = 2 };
    h.addr[0] = 127;
    h.addr[3] = 1;
    hs_handle_encode(&h, buf);
    seed_write(dir, "handle", buf, HS_HANDLE_SIZE);
    struct hs_hello m;
    memset(&m, 0, sizeof(m));
    m.link_layer = 2;
    m.nports = 2;
    m.cts_slots = HS_CTS_SLOTS;
    m.cts_entry_size = HS_CTS_ENTRY_SIZE;
    m.max_recvs = HS_MAX_RECVS;
    m.cts_addr = 0x1000;
    for (int i = 0; i < HS_MAX_QPS; i++)
        m.qp[i] = (struct hs_qp_info){ .qpn = 10 + (uint32_t)i, .psn = 5, .port_num = 1,
                                       .port_idx = (uint8_t)(i % 2), .mtu = 3, .is_global = 1 };
    const int counts[] = { 1, 2, HS_MAX_QPS };
    for (int c = 0; c < 3; c++) {
        char name[32];
        m.nqps = (uint8_t)counts[c];
        snprintf(name, sizeof(name), "hello%d", counts[c]);
        seed_write(dir, name, buf, hs_hello_encode(&m, HS_VERSION, buf, sizeof(buf)));
        struct hs_reply r;
        memset(&r, 0, sizeof(r));
        r.nqps = m.nqps;
        r.nports = 2;
        r.sizes_addr = 0x2000;
        memcpy(r.qp, m.qp, sizeof(r.qp));
        snprintf(name, sizeof(name), "reply%d", counts[c]);
        seed_write(dir, name, buf, hs_reply_encode(&r, HS_VERSION, buf, sizeof(buf)));
    }
    struct hs_reply rej;
    memset(&rej, 0, sizeof(rej));
    rej.status = HS_REJECT_WRONG_DEVICE;
    seed_write(dir, "reject", buf, hs_reply_encode(&rej, HS_VERSION, buf, sizeof(buf)));
    seed_write(dir, "ready", buf, hs_ready_encode(HS_VERSION, buf, sizeof(buf)));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[HS_ERR_LEN];
    struct hs_handle h;
    if (hs_handle_parse(data, size, &h, err) == HS_OK) {
        uint8_t again[HS_HANDLE_SIZE];
        hs_handle_encode(&h, again);
        /* the CRC is not enforced in fuzzing builds: compare around it */
        if (memcmp(again, data, 48) != 0 || memcmp(again + 52, data + 52, HS_HANDLE_SIZE - 52) != 0)
            abort();
    }
    uint16_t type;
    uint32_t len;
    if (hs_header_parse(data, size, &type, &len, err) != HS_OK)
        return 0;
    uint8_t out[HS_MSG_MAX];
    struct hs_hello m;
    if (hs_hello_parse(data, size, &m, err) == HS_OK) {
        size_t n = hs_hello_encode(&m, HS_VERSION, out, sizeof(out));
        if (n != size || memcmp(out, data, 12) != 0 || memcmp(out + 16, data + 16, n - 16) != 0)
            abort();
    }
    struct hs_reply r;
    if (hs_reply_parse(data, size, &r, err) == HS_OK) {
        size_t n = hs_reply_encode(&r, HS_VERSION, out, sizeof(out));
        if (n != size || memcmp(out, data, 12) != 0 || memcmp(out + 16, data + 16, n - 16) != 0)
            abort();
    }
    (void)hs_ready_parse(data, size, err);
    return 0;
}
