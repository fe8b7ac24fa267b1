/* tools/writebw/wire.h: what the two railnet-write-bw processes tell each
 * other over the TCP channel (tcp.h), and its fixed little-endian encoding.
 *
 * Sequence (client C, server S):
 *   C->S HELLO (test parameters)      S->C OK, or ERROR(text) on a mismatch
 *   verbs:  C->S SETUP, S->C SETUP    (QPs, buffer, side description)
 *           both: connect QPs, then READY each way
 *   plugin: S->C HANDLE (listen handle; bidir: C->S HANDLE too), then
 *           both drive connect/accept and send READY each way
 *   gpu-initiated: C->S SETUP(gi), S->C SETUP(gi) (the GPU-posted QP and
 *           the ordinary QP it writes to, the destination buffer and the
 *           signal word), both connect, then READY each way
 *   per size: C->S START(i), S->C START(i); writers send HEARTBEAT while
 *           running, then RESULT; each side waits for the peer's RESULT
 *   plugin -D: a receiver that sees the first empty message (the sender's
 *           end marker) sends STOPPED(receives posted) so that the sender
 *           sends exactly enough end markers to match them
 *   C->S DONE.
 * Either side may send ERROR(text) instead of any message and exit 1; the
 * other prints it as "peer: ..." and exits 1 too.
 * Decoders check counts and lengths and return -1 on a malformed message. */
#ifndef RAILNET_TOOLS_WRITEBW_WIRE_H
#define RAILNET_TOOLS_WRITEBW_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/rc.h"
#include "../common/setup_xchg.h"
#include "opts.h"

#define WB_MAGIC 0x42574e52u /* "RNWB" */
#define WB_VERSION 2   /* 2: RESULT carries lat_us; SETUP of --gpu-initiated */
#define WB_MAX_QP_TOTAL (WB_MAX_PORTS * WB_MAX_QPS)

enum wb_msg {
    WB_MSG_HELLO = 1, WB_MSG_OK, WB_MSG_ERROR, WB_MSG_SETUP, WB_MSG_READY, WB_MSG_START,
    WB_MSG_HEARTBEAT, WB_MSG_RESULT, WB_MSG_DONE, WB_MSG_HANDLE, WB_MSG_STOPPED,
};

/* HELLO's mode field: enum wb_mode, or this for --gpu-initiated (which
 * keeps o->mode at its default). */
#define WB_HELLO_MODE_GPU_INITIATED 2u
/* ... and this for --mode=verbs -R (both sides must connect through the CM) */
#define WB_HELLO_MODE_VERBS_CM 3u

/* The parameters both sides must agree on. */
struct wb_hello {
    uint32_t magic, version;
    uint32_t mode, bidir, nsizes, nqp;
    uint64_t sizes[WB_MAX_SIZES];
    uint64_t iters;
    double duration;
};

/* One side's description, for the other's header. */
struct wb_side {
    char device[64];
    char memory[32];         /* "host", "cuda:0" */
    char registration[32];   /* "ibv_reg_mr", "dmabuf", "peermem", plugin: "regMr" ... */
    uint32_t relaxed;        /* registered with relaxed ordering */
};

struct wb_setup {
    struct wb_side side;
    uint32_t nqp;
    struct rc_qp_info qp[WB_MAX_QP_TOTAL];
    uint64_t addr;
    uint32_t rkey;
};

/* --gpu-initiated's SETUP: one QP each side (the client's is posted by the
 * GPU, the server's is an ordinary QP), the fields of struct gdaki_qp_info
 * (railnet_gdaki.h) spelled out so that this file does not depend on it;
 * the server's destination buffer and 8-byte signal word (0 from the
 * client). */
struct wb_gi_setup {
    struct wb_side side;
    uint32_t magic, qpn, psn;
    uint16_t lid;
    uint8_t port, mtu, is_global;
    uint8_t gid[16];
    uint64_t addr, sig_addr;
    uint32_t rkey, sig_rkey;
};

struct wb_result {
    uint64_t size, iters;
    double seconds, avg_bps, peak_bps, msg_rate;
    double lat_us;           /* --gpu-initiated: one put + quiet round; else 0 */
};

/* Encoders return the payload length written into buf (cap bytes), or -1. */
int wb_enc_hello(const struct wb_hello *h, uint8_t *buf, size_t cap);
int wb_dec_hello(const uint8_t *buf, size_t len, struct wb_hello *h);
int wb_enc_setup(const struct wb_setup *s, uint8_t *buf, size_t cap);
int wb_dec_setup(const uint8_t *buf, size_t len, struct wb_setup *s);
int wb_enc_side(const struct wb_side *s, uint8_t *buf, size_t cap);
int wb_dec_side(const uint8_t *buf, size_t len, struct wb_side *s);
int wb_enc_gi_setup(const struct wb_gi_setup *s, uint8_t *buf, size_t cap);
int wb_dec_gi_setup(const uint8_t *buf, size_t len, struct wb_gi_setup *s);
/* Both SETUPs for setup_exchange() (tools/common/setup_xchg.h). */
extern const struct setup_codec wb_setup_codec;
extern const struct setup_codec wb_gi_setup_codec;
int wb_enc_result(const struct wb_result *r, uint8_t *buf, size_t cap);
int wb_dec_result(const uint8_t *buf, size_t len, struct wb_result *r);
int wb_enc_u64(uint64_t v, uint8_t *buf, size_t cap);
int wb_dec_u64(const uint8_t *buf, size_t len, uint64_t *v);

/* A HELLO from these options (the client's) and the check the server makes
 * against its own: 0 when they agree, else -1 with what differs in err. */
void wb_hello_from_opts(const struct wb_opts *o, struct wb_hello *h);
int wb_hello_compare(const struct wb_hello *mine, const struct wb_hello *peer, char *err,
                     size_t errlen);

#endif
