/* tools/writebw/wire.c: encoding of the out-of-band messages (see wire.h).
 * A tiny cursor writes and reads little-endian fields; any overrun marks
 * the cursor bad and the whole message is refused. */
#include "config.h"

#include <string.h>

#include "../common/strfmt.h"
#include "wire.h"

struct cur {
    uint8_t *w;
    const uint8_t *r;
    size_t n, cap;
    int bad;
};

static void put(struct cur *c, uint64_t v, int bytes)
{
    if (c->bad || c->n + (size_t)bytes > c->cap) {
        c->bad = 1;
        return;
    }
    for (int i = 0; i < bytes; i++)
        c->w[c->n++] = (uint8_t)(v >> (8 * i));
}

static uint64_t get(struct cur *c, int bytes)
{
    if (c->bad || c->n + (size_t)bytes > c->cap) {
        c->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)c->r[c->n++] << (8 * i);
    return v;
}

static void put_f64(struct cur *c, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof(v));
    put(c, v, 8);
}

static double get_f64(struct cur *c)
{
    uint64_t v = get(c, 8);
    double d;
    memcpy(&d, &v, sizeof(d));
    return d;
}

static void put_bytes(struct cur *c, const void *p, size_t len)
{
    if (c->bad || c->n + len > c->cap) {
        c->bad = 1;
        return;
    }
    memcpy(c->w + c->n, p, len);
    c->n += len;
}

static void get_bytes(struct cur *c, void *p, size_t len)
{
    if (c->bad || c->n + len > c->cap) {
        c->bad = 1;
        return;
    }
    memcpy(p, c->r + c->n, len);
    c->n += len;
}

/* Fixed-size string fields, always NUL-terminated after decoding. */
static void put_str(struct cur *c, const char *s, size_t field)
{
    char tmp[64] = { 0 };
    str_fmt(tmp, sizeof(tmp) < field + 1 ? sizeof(tmp) : field + 1, "%s", s);
    put_bytes(c, tmp, field);
}

static void get_str(struct cur *c, char *s, size_t field)
{
    get_bytes(c, s, field);
    s[field - 1] = '\0';
}

static int done_w(struct cur *c) { return c->bad ? -1 : (int)c->n; }
static int done_r(struct cur *c) { return c->bad || c->n != c->cap ? -1 : 0; }

int wb_enc_hello(const struct wb_hello *h, uint8_t *buf, size_t cap)
{
    struct cur c = { .w = buf, .cap = cap };
    put(&c, h->magic, 4);
    put(&c, h->version, 4);
    put(&c, h->mode, 4);
    put(&c, h->bidir, 4);
    put(&c, h->nsizes, 4);
    put(&c, h->nqp, 4);
    for (uint32_t i = 0; i < h->nsizes && i < WB_MAX_SIZES; i++)
        put(&c, h->sizes[i], 8);
    put(&c, h->iters, 8);
    put_f64(&c, h->duration);
    return done_w(&c);
}

int wb_dec_hello(const uint8_t *buf, size_t len, struct wb_hello *h)
{
    struct cur c = { .r = buf, .cap = len };
    memset(h, 0, sizeof(*h));
    h->magic = (uint32_t)get(&c, 4);
    h->version = (uint32_t)get(&c, 4);
    if (c.bad || h->magic != WB_MAGIC || h->version != WB_VERSION)
        return -1;
    h->mode = (uint32_t)get(&c, 4);
    h->bidir = (uint32_t)get(&c, 4);
    h->nsizes = (uint32_t)get(&c, 4);
    h->nqp = (uint32_t)get(&c, 4);
    if (h->nsizes == 0 || h->nsizes > WB_MAX_SIZES || h->nqp > WB_MAX_QP_TOTAL)
        return -1;
    for (uint32_t i = 0; i < h->nsizes; i++)
        h->sizes[i] = get(&c, 8);
    h->iters = get(&c, 8);
    h->duration = get_f64(&c);
    return done_r(&c);
}

static void put_side(struct cur *c, const struct wb_side *s)
{
    put_str(c, s->device, sizeof(s->device));
    put_str(c, s->memory, sizeof(s->memory));
    put_str(c, s->registration, sizeof(s->registration));
    put(c, s->relaxed, 4);
}

static void get_side(struct cur *c, struct wb_side *s)
{
    get_str(c, s->device, sizeof(s->device));
    get_str(c, s->memory, sizeof(s->memory));
    get_str(c, s->registration, sizeof(s->registration));
    s->relaxed = (uint32_t)get(c, 4);
}

int wb_enc_side(const struct wb_side *s, uint8_t *buf, size_t cap)
{
    struct cur c = { .w = buf, .cap = cap };
    put_side(&c, s);
    return done_w(&c);
}

int wb_dec_side(const uint8_t *buf, size_t len, struct wb_side *s)
{
    struct cur c = { .r = buf, .cap = len };
    get_side(&c, s);
    return done_r(&c);
}

int wb_enc_setup(const struct wb_setup *s, uint8_t *buf, size_t cap)
{
    struct cur c = { .w = buf, .cap = cap };
    put_side(&c, &s->side);
    put(&c, s->nqp, 4);
    for (uint32_t i = 0; i < s->nqp && i < WB_MAX_QP_TOTAL; i++) {
        const struct rc_qp_info *q = &s->qp[i];
        put(&c, q->qpn, 4);
        put(&c, q->psn, 4);
        put(&c, q->lid, 2);
        put(&c, q->port, 1);
        put(&c, q->mtu, 1);
        put_bytes(&c, q->gid, 16);
    }
    put(&c, s->addr, 8);
    put(&c, s->rkey, 4);
    return done_w(&c);
}

int wb_dec_setup(const uint8_t *buf, size_t len, struct wb_setup *s)
{
    struct cur c = { .r = buf, .cap = len };
    memset(s, 0, sizeof(*s));
    get_side(&c, &s->side);
    s->nqp = (uint32_t)get(&c, 4);
    if (c.bad || s->nqp == 0 || s->nqp > WB_MAX_QP_TOTAL)
        return -1;
    for (uint32_t i = 0; i < s->nqp; i++) {
        struct rc_qp_info *q = &s->qp[i];
        q->qpn = (uint32_t)get(&c, 4);
        q->psn = (uint32_t)get(&c, 4);
        q->lid = (uint16_t)get(&c, 2);
        q->port = (uint8_t)get(&c, 1);
        q->mtu = (uint8_t)get(&c, 1);
        get_bytes(&c, q->gid, 16);
    }
    s->addr = get(&c, 8);
    s->rkey = (uint32_t)get(&c, 4);
    return done_r(&c);
}

int wb_enc_gi_setup(const struct wb_gi_setup *s, uint8_t *buf, size_t cap)
{
    struct cur c = { .w = buf, .cap = cap };
    put_side(&c, &s->side);
    put(&c, s->magic, 4);
    put(&c, s->qpn, 4);
    put(&c, s->psn, 4);
    put(&c, s->lid, 2);
    put(&c, s->port, 1);
    put(&c, s->mtu, 1);
    put(&c, s->is_global, 1);
    put_bytes(&c, s->gid, 16);
    put(&c, s->addr, 8);
    put(&c, s->rkey, 4);
    put(&c, s->sig_addr, 8);
    put(&c, s->sig_rkey, 4);
    return done_w(&c);
}

int wb_dec_gi_setup(const uint8_t *buf, size_t len, struct wb_gi_setup *s)
{
    struct cur c = { .r = buf, .cap = len };
    memset(s, 0, sizeof(*s));
    get_side(&c, &s->side);
    s->magic = (uint32_t)get(&c, 4);
    s->qpn = (uint32_t)get(&c, 4);
    s->psn = (uint32_t)get(&c, 4);
    s->lid = (uint16_t)get(&c, 2);
    s->port = (uint8_t)get(&c, 1);
    s->mtu = (uint8_t)get(&c, 1);
    s->is_global = (uint8_t)get(&c, 1);
    get_bytes(&c, s->gid, 16);
    s->addr = get(&c, 8);
    s->rkey = (uint32_t)get(&c, 4);
    s->sig_addr = get(&c, 8);
    s->sig_rkey = (uint32_t)get(&c, 4);
    return done_r(&c);
}

int wb_enc_result(const struct wb_result *r, uint8_t *buf, size_t cap)
{
    struct cur c = { .w = buf, .cap = cap };
    put(&c, r->size, 8);
    put(&c, r->iters, 8);
    put_f64(&c, r->seconds);
    put_f64(&c, r->avg_bps);
    put_f64(&c, r->peak_bps);
    put_f64(&c, r->msg_rate);
    put_f64(&c, r->lat_us);
    return done_w(&c);
}

int wb_dec_result(const uint8_t *buf, size_t len, struct wb_result *r)
{
    struct cur c = { .r = buf, .cap = len };
    r->size = get(&c, 8);
    r->iters = get(&c, 8);
    r->seconds = get_f64(&c);
    r->avg_bps = get_f64(&c);
    r->peak_bps = get_f64(&c);
    r->msg_rate = get_f64(&c);
    r->lat_us = get_f64(&c);
    return done_r(&c);
}

int wb_enc_u64(uint64_t v, uint8_t *buf, size_t cap)
{
    struct cur c = { .w = buf, .cap = cap };
    put(&c, v, 8);
    return done_w(&c);
}

int wb_dec_u64(const uint8_t *buf, size_t len, uint64_t *v)
{
    struct cur c = { .r = buf, .cap = len };
    *v = get(&c, 8);
    return done_r(&c);
}

void wb_hello_from_opts(const struct wb_opts *o, struct wb_hello *h)
{
    memset(h, 0, sizeof(*h));
    h->magic = WB_MAGIC;
    h->version = WB_VERSION;
    h->mode = o->gpu_initiated ? WB_HELLO_MODE_GPU_INITIATED : o->rdma_cm ? WB_HELLO_MODE_VERBS_CM : (uint32_t)o->mode;
    h->bidir = (uint32_t)o->bidir;
    h->nsizes = (uint32_t)o->nsizes;
    h->nqp = o->mode == WB_MODE_VERBS && !o->gpu_initiated ? (uint32_t)(o->qps * o->nports) : 0;
    for (int i = 0; i < o->nsizes; i++)
        h->sizes[i] = o->sizes[i];
    h->iters = o->duration > 0 ? 0 : (uint64_t)o->iters;
    h->duration = o->duration;
}

int wb_hello_compare(const struct wb_hello *mine, const struct wb_hello *peer, char *err,
                     size_t errlen)
{
    static const char *modes[] = { "--mode=verbs", "--mode=plugin", "--gpu-initiated", "--mode=verbs -R" };
#define MODE(m) ((m) < 4 ? modes[m] : "?")
    if (mine->mode != peer->mode) {
        str_fmt(err, errlen, "server runs %s, client %s", MODE(mine->mode), MODE(peer->mode));
        return -1;
    }
    if (mine->bidir != peer->bidir) {
        str_fmt(err, errlen, "--bidir given on the %s only", mine->bidir ? "server" : "client");
        return -1;
    }
    if (mine->nqp != peer->nqp) {
        str_fmt(err, errlen, "server has %u QPs (ports x -q), client %u", mine->nqp, peer->nqp);
        return -1;
    }
    if (mine->nsizes != peer->nsizes ||
        memcmp(mine->sizes, peer->sizes, mine->nsizes * sizeof(mine->sizes[0]))) {
        str_fmt(err, errlen, "sizes differ: server %s%llu, client %s%llu (give both the same -s/-a)",
                mine->nsizes > 1 ? "-a from " : "-s ", (unsigned long long)mine->sizes[0],
                peer->nsizes > 1 ? "-a from " : "-s ", (unsigned long long)peer->sizes[0]);
        return -1;
    }
    if (mine->iters != peer->iters || mine->duration != peer->duration) {
        str_fmt(err, errlen, "run length differs: server -n %llu -D %g, client -n %llu -D %g",
                (unsigned long long)mine->iters, mine->duration, (unsigned long long)peer->iters,
                peer->duration);
        return -1;
    }
#undef MODE
    return 0;
}

/* The SETUP messages as setup_exchange() takes them (tools/common/setup_xchg.h). */
static int enc_setup(const void *m, uint8_t *buf, size_t cap) { return wb_enc_setup(m, buf, cap); }
static int dec_setup(const uint8_t *buf, size_t len, void *m) { return wb_dec_setup(buf, len, m); }
static int enc_gi_setup(const void *m, uint8_t *buf, size_t cap) { return wb_enc_gi_setup(m, buf, cap); }
static int dec_gi_setup(const uint8_t *buf, size_t len, void *m) { return wb_dec_gi_setup(buf, len, m); }
const struct setup_codec wb_setup_codec = { enc_setup, dec_setup };
const struct setup_codec wb_gi_setup_codec = { enc_gi_setup, dec_gi_setup };
