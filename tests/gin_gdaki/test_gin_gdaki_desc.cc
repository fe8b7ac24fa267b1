// tests/gin_gdaki/test_gin_gdaki_desc.cc: the images railnet builds for
// NCCL's GDAKI device code: layout 100's (plugin/gin/gin_gdaki_desc.c) read
// back through NCCL 2.28.9's own installed structures
// (doca_gpu_dev_verbs_qp, ncclGinGdakiGPUContext, ncclGinGdakiMemHandle),
// layout 200's (gin_gdaki_layout_v200.c) through railnet's statement of
// NCCL 2.30's (include/railnet_gin_gdaki.h, held to NCCL 2.30.7's headers
// by test_gin_gdaki_layout where those are installed), each field against
// values computed by hand here. Skips when the headers are absent.
#include <cstdint>
#include <cstdio>
#include <cstring>

extern "C" {
#include "gin_gdaki.h"
}

#include "nccl_gdaki_headers.h"

#if !defined(HAVE_NCCL_GDAKI_HEADERS) || NCCL_GIN_GDAKI_VERSION != 100
int main()
{
    std::printf("1..0 # SKIP NCCL 2.28's GDAKI device headers are not installed (nccl_device/gin/gdaki)\n");
    return 0;
}
#else

static int n_case, n_fail;

#define EXPECT(what, want, got)                                                                       \
    do {                                                                                            \
        unsigned long long w_ = (unsigned long long)(want), g_ = (unsigned long long)(got);         \
        n_case++;                                                                                   \
        if (w_ == g_) {                                                                             \
            std::printf("ok %d - %s\n", n_case, what);                                              \
        } else {                                                                                    \
            n_fail++;                                                                               \
            std::printf("not ok %d - %s\n#   expected 0x%llx, got 0x%llx\n", n_case, what, w_, g_); \
        }                                                                                           \
    } while (0)

/* A big-endian 32-bit word as it lies in memory, built byte by byte. */
static uint32_t be_bytes(uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
    uint8_t x[4] = { a, b, c, d };
    uint32_t v;
    std::memcpy(&v, x, 4);
    return v;
}

/* The queue both layouts' QP images are checked against: 512 slots, 1024
 * CQEs, QP 0x0a0b0c, CQ 0x412, in GPU memory. */
static uint8_t sq[512 * 64], cq[1024 * 64];
static uint32_t dbr[2], cq_dbr[2];
static uint64_t uar;

static struct gin_gdaki_queue test_queue()
{
    struct gin_gdaki_queue q = {};
    q.sq = sq;
    q.sq_log = 9;
    q.sq_dbrec = &dbr[1];
    q.db = &uar;
    q.cq = cq;
    q.cq_log = 10;
    q.cq_dbrec = cq_dbr;
    q.cqn = 0x000412;
    q.qpn = 0x0a0b0c;
    q.gpu = 1;
    return q;
}

static void qp_image_matches_what_the_device_code_reads()
{
    struct gin_gdaki_queue q = test_queue();
    struct rn_doca_qp img;
    std::memset(&img, 0xee, sizeof(img));   /* every byte must be written */
    gin_gdaki_qp_image(&q, &img);
    const struct doca_gpu_dev_verbs_qp *d = (const struct doca_gpu_dev_verbs_qp *)&img;
    EXPECT("sq_rsvd_index starts at 0", 0, d->sq_rsvd_index);
    EXPECT("sq_ready_index starts at 0", 0, d->sq_ready_index);
    EXPECT("sq_wqe_pi starts at 0", 0, d->sq_wqe_pi);
    EXPECT("sq_num is the QP number", 0x0a0b0c, d->sq_num);
    EXPECT("sq_num_shift8", 0x0a0b0c00, d->sq_num_shift8);
    EXPECT("sq_num_shift8_be: bytes 0a 0b 0c 00", be_bytes(0x0a, 0x0b, 0x0c, 0x00), d->sq_num_shift8_be);
    EXPECT("sq_num_shift8_be_1ds: bytes 0a 0b 0c 01", be_bytes(0x0a, 0x0b, 0x0c, 0x01), d->sq_num_shift8_be_1ds);
    EXPECT("sq_num_shift8_be_2ds: bytes 0a 0b 0c 02", be_bytes(0x0a, 0x0b, 0x0c, 0x02), d->sq_num_shift8_be_2ds);
    EXPECT("sq_num_shift8_be_3ds: bytes 0a 0b 0c 03", be_bytes(0x0a, 0x0b, 0x0c, 0x03), d->sq_num_shift8_be_3ds);
    EXPECT("sq_num_shift8_be_4ds: bytes 0a 0b 0c 04", be_bytes(0x0a, 0x0b, 0x0c, 0x04), d->sq_num_shift8_be_4ds);
    EXPECT("sq_lock free", 0, d->sq_lock);
    EXPECT("sq_wqe_num: 512 slots", 512, d->sq_wqe_num);
    EXPECT("sq_wqe_mask", 511, d->sq_wqe_mask);
    EXPECT("sq_wqe_daddr is the ring", (uintptr_t)sq, (uintptr_t)d->sq_wqe_daddr);
    EXPECT("sq_dbrec is the send record word", (uintptr_t)&dbr[1], (uintptr_t)d->sq_dbrec);
    EXPECT("sq_db is the UAR register", (uintptr_t)&uar, (uintptr_t)d->sq_db);
    EXPECT("no receive queue: rq_num", 0, d->rq_num);
    EXPECT("no receive queue: rq_wqe_num", 0, d->rq_wqe_num);
    EXPECT("no receive queue: rq_wqe_daddr", 0, (uintptr_t)d->rq_wqe_daddr);
    EXPECT("no receive queue: rq_dbrec", 0, (uintptr_t)d->rq_dbrec);
    EXPECT("rq_lock free", 0, d->rq_lock);
    EXPECT("cq_sq.cqe_daddr is the CQ", (uintptr_t)cq, (uintptr_t)d->cq_sq.cqe_daddr);
    EXPECT("cq_sq.cq_num (the companion's WAIT names it)", 0x412, d->cq_sq.cq_num);
    EXPECT("cq_sq.cqe_num: 1024", 1024, d->cq_sq.cqe_num);
    EXPECT("cq_sq.dbrec", (uintptr_t)cq_dbr, (uintptr_t)d->cq_sq.dbrec);
    EXPECT("cq_sq.cqe_ci starts at 0", 0, d->cq_sq.cqe_ci);
    EXPECT("cq_sq.cqe_mask", 1023, d->cq_sq.cqe_mask);
    EXPECT("cq_sq.cqe_size: 64-byte CQEs", 64, d->cq_sq.cqe_size);
    EXPECT("cq_sq.cqe_rsvd starts at 0", 0, d->cq_sq.cqe_rsvd);
    EXPECT("cq_sq.mem_type GPU", DOCA_GPUNETIO_VERBS_MEM_TYPE_GPU, d->cq_sq.mem_type);
    EXPECT("cq_rq unused: cqe_daddr", 0, (uintptr_t)d->cq_rq.cqe_daddr);
    EXPECT("cq_rq unused: cqe_num", 0, d->cq_rq.cqe_num);
    EXPECT("nic_handler: the GPU rings the doorbell (GPU_SM_DB)", DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB,
           d->nic_handler);
    EXPECT("mem_type GPU", DOCA_GPUNETIO_VERBS_MEM_TYPE_GPU, d->mem_type);
    q.gpu = 0;
    gin_gdaki_qp_image(&q, &img);
    EXPECT("host queues: mem_type HOST", DOCA_GPUNETIO_VERBS_MEM_TYPE_HOST, d->mem_type);
    EXPECT("host queues: cq_sq.mem_type HOST", DOCA_GPUNETIO_VERBS_MEM_TYPE_HOST, d->cq_sq.mem_type);
}

static void qp_image_v200_matches_nccl_2_30()
{
    struct gin_gdaki_queue q = test_queue();
    uint8_t raw[sizeof(struct rn_doca_qp_v200)];
    std::memset(raw, 0xee, sizeof(raw));    /* every byte must be written */
    EXPECT("layout 200: a QP descriptor of 296 bytes", 296, gin_gdaki_qp_size(RN_GIN_GDAKI_V200));
    EXPECT("layout 100: a QP descriptor of 280 bytes", 280, gin_gdaki_qp_size(RN_GIN_GDAKI_V100));
    gin_gdaki_qp_write(RN_GIN_GDAKI_V200, &q, raw);
    struct rn_doca_qp_v200 d;
    std::memcpy(&d, raw, sizeof(d));
    EXPECT("v200 sq_num_shift8_be_4ds: bytes 0a 0b 0c 04", be_bytes(0x0a, 0x0b, 0x0c, 0x04), d.sq_num_shift8_be_4ds);
    EXPECT("v200 sq_num_shift8_be_5ds: bytes 0a 0b 0c 05", be_bytes(0x0a, 0x0b, 0x0c, 0x05), d.sq_num_shift8_be_5ds);
    EXPECT("v200 sq_lock (offset 56) free", 0, d.sq_lock);
    EXPECT("v200 sq_wqe_num (offset 60): 512", 512, d.sq_wqe_num);
    EXPECT("v200 sq_wqe_mask", 511, d.sq_wqe_mask);
    EXPECT("v200 sq_wqe_daddr", (uintptr_t)sq, (uintptr_t)d.sq_wqe_daddr);
    EXPECT("v200 sq_dbrec", (uintptr_t)&dbr[1], (uintptr_t)d.sq_dbrec);
    EXPECT("v200 sq_db", (uintptr_t)&uar, (uintptr_t)d.sq_db);
    int zero = 1;
    for (size_t i = 0; i < sizeof(d.reserved1); i++)
        zero &= d.reserved1[i] == 0;
    for (size_t i = 0; i < sizeof(d.reserved2); i++)
        zero &= d.reserved2[i] == 0;
    for (size_t i = 0; i < sizeof(d.reserved3); i++)
        zero &= d.reserved3[i] == 0;
    for (size_t i = 0; i < sizeof(d.cq_sq.reserved1); i++)
        zero &= d.cq_sq.reserved1[i] == 0;
    for (size_t i = 0; i < sizeof(d.cq_sq.reserved2); i++)
        zero &= d.cq_sq.reserved2[i] == 0;
    EXPECT("v200 reserved room zeroed (QP and CQ)", 1, zero);
    EXPECT("v200 cq_sq (offset 160) cqe_daddr", (uintptr_t)cq, (uintptr_t)d.cq_sq.cqe_daddr);
    EXPECT("v200 cq_sq.cq_num", 0x412, d.cq_sq.cq_num);
    EXPECT("v200 cq_sq.cqe_num", 1024, d.cq_sq.cqe_num);
    EXPECT("v200 cq_sq.cqe_mask", 1023, d.cq_sq.cqe_mask);
    EXPECT("v200 cq_sq.cqe_size", 64, d.cq_sq.cqe_size);
    EXPECT("v200 cq_sq.mem_type GPU", RN_DOCA_MEM_TYPE_GPU, d.cq_sq.mem_type);
    EXPECT("v200 nic_handler (offset 288): GPU_SM_DB, 2 in the flag encoding too", 2, d.nic_handler);
    EXPECT("v200 mem_type (offset 292) GPU", RN_DOCA_MEM_TYPE_GPU, d.mem_type);
}

static void ctx_images_match_what_the_device_code_reads()
{
    static struct rn_doca_qp qps[8];
    static uint64_t counters[16], signals[32], gets[8];
    static uint32_t ckeys[4], skeys[4];
    struct gin_gdaki_ctx_desc dsc = {};
    dsc.gdqp = qps;
    dsc.companion = qps + 4;
    dsc.counters.base = counters;
    dsc.counters.rkeys = ckeys;
    dsc.counters.lkey = 0x00112233u;
    dsc.counters.offset = 4;
    dsc.signals.base = signals;
    dsc.signals.rkeys = skeys;
    dsc.signals.lkey = 0x44556677u;
    dsc.signals.offset = 8;
    dsc.sink_lkey = 0x8899aabbu;
    dsc.last_issued_get = gets;
    dsc.last_visible_get = gets + 4;
    struct rn_gin_gdaki_gpu_ctx img;
    std::memset(&img, 0xee, sizeof(img));
    gin_gdaki_ctx_write(RN_GIN_GDAKI_V100, -1, &dsc, &img);
    const ncclGinGdakiGPUContext *c = (const ncclGinGdakiGPUContext *)&img;
    EXPECT("gdqp: peer p's QP is gdqp + p", (uintptr_t)qps, (uintptr_t)c->gdqp);
    EXPECT("companion_gdqp", (uintptr_t)(qps + 4), (uintptr_t)c->companion_gdqp);
    EXPECT("counters_table.buffer: the context's part (base + offset)", (uintptr_t)(counters + 4),
           (uintptr_t)c->counters_table.buffer);
    EXPECT("counters_table.rkeys", (uintptr_t)ckeys, (uintptr_t)c->counters_table.rkeys);
    EXPECT("counters_table.lkey big-endian: bytes 00 11 22 33", be_bytes(0x00, 0x11, 0x22, 0x33),
           c->counters_table.lkey);
    EXPECT("counters_table.offset (NCCL 2.29's, 2.28's padding)", 4, img.counters_table.offset);
    EXPECT("signals_table.buffer: the context's part", (uintptr_t)(signals + 8), (uintptr_t)c->signals_table.buffer);
    EXPECT("signals_table.rkeys", (uintptr_t)skeys, (uintptr_t)c->signals_table.rkeys);
    EXPECT("signals_table.lkey big-endian: bytes 44 55 66 77", be_bytes(0x44, 0x55, 0x66, 0x77),
           c->signals_table.lkey);
    EXPECT("signals_table.offset", 8, img.signals_table.offset);
    EXPECT("sink_buffer_lkey big-endian: bytes 88 99 aa bb", be_bytes(0x88, 0x99, 0xaa, 0xbb), c->sink_buffer_lkey);
    EXPECT("layout 100: 72-byte contexts", 72, gin_gdaki_ctx_size(RN_GIN_GDAKI_V100, -1));
    EXPECT("layout 200, backend 1 (kernels of NCCL 2.30.3/2.30.4): 72-byte contexts", 72,
           gin_gdaki_ctx_size(RN_GIN_GDAKI_V200, RN_GIN_GDAKI_BACKEND_V1));
    EXPECT("layout 200, backend 2: 88-byte contexts", 88, gin_gdaki_ctx_size(RN_GIN_GDAKI_V200, RN_GIN_GDAKI_BACKEND_V2));
    EXPECT("layout 200, backend 0 (kernels before NCCL 2.30.3): not written", 0, gin_gdaki_ctx_size(RN_GIN_GDAKI_V200, 0));
    EXPECT("layout 101: not written", 0, gin_gdaki_ctx_size(101, 2));
    struct rn_gin_gdaki_gpu_ctx_v200 v2;
    std::memset(&v2, 0xee, sizeof(v2));
    gin_gdaki_ctx_write(RN_GIN_GDAKI_V200, RN_GIN_GDAKI_BACKEND_V2, &dsc, &v2);
    EXPECT("v200 backend 2: the common part as layout 100's", 0, std::memcmp(&v2.base, &img, sizeof(img)));
    EXPECT("v200 backend 2: last_issued_get (offset 72)", (uintptr_t)gets, (uintptr_t)v2.last_issued_get);
    EXPECT("v200 backend 2: last_visible_get (offset 80)", (uintptr_t)(gets + 4), (uintptr_t)v2.last_visible_get);
    std::memset(&v2, 0xee, sizeof(v2));
    gin_gdaki_ctx_write(RN_GIN_GDAKI_V200, RN_GIN_GDAKI_BACKEND_V1, &dsc, &v2);
    EXPECT("v200 backend 1: the 72-byte context only (nothing written past it)", 0xeeeeeeeeeeeeeeeeull,
           (uintptr_t)v2.last_issued_get);
}

static void window_handle_and_keys_match()
{
    static uint32_t keys_host[3] = { 0x01020304u, 0x0a0b0c0du, 0xdeadbeefu };
    static uint32_t keys[3];
    gin_gdaki_keys_be(keys_host, 3, keys);
    EXPECT("rkeys[0] stored big-endian: bytes 01 02 03 04", be_bytes(1, 2, 3, 4), keys[0]);
    EXPECT("rkeys[2] stored big-endian: bytes de ad be ef", be_bytes(0xde, 0xad, 0xbe, 0xef), keys[2]);
    struct rn_gin_gdaki_mem_handle img;
    std::memset(&img, 0xee, sizeof(img));
    gin_gdaki_mh_image(keys, 0x00c0ffeeu, &img);
    const ncclGinGdakiMemHandle *m = (const ncclGinGdakiMemHandle *)&img;
    EXPECT("window rkeys: every rank's, indexed by peer", (uintptr_t)keys, (uintptr_t)m->rkeys);
    EXPECT("window lkey big-endian: bytes 00 c0 ff ee", be_bytes(0x00, 0xc0, 0xff, 0xee), m->lkey);
}

static void type_choice_and_version_check()
{
    struct gin_gdaki_probe p;
    char why[512];
    int mm = 0;
    std::memset(&p, 0, sizeof(p));
    p.mode = 2;     /* RN_GIN_GDAKI */
    p.nccl_version = 22809;
    p.cuda_ok = 1;
    p.devx_ok = 1;
    EXPECT("NCCL 2.28.9 device code: layout 100", 100, gin_gdaki_version_of_nccl(22809));
    EXPECT("NCCL 2.29.7 device code: layout 100 (contexts and table offsets)", 100, gin_gdaki_version_of_nccl(22907));
    EXPECT("NCCL 2.30.7 device code: layout 200", 200, gin_gdaki_version_of_nccl(23007));
    EXPECT("NCCL 2.31.0: not known", 0, gin_gdaki_version_of_nccl(23100));
    EXPECT("gdaki + NCCL 2.28.9 + GPU + DEVX: GDAKI type", 3, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    p.nccl_version = 22907;
    EXPECT("gdaki + NCCL 2.29.7: GDAKI type", 3, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    EXPECT("... layout 100", 100, gin_gdaki_layout_of(&p));
    p.nccl_version = 23007;
    EXPECT("gdaki + NCCL 2.30.7: GDAKI type", 3, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    EXPECT("... layout 200", 200, gin_gdaki_layout_of(&p));
    EXPECT("... said", 1, std::strstr(why, "layout version 200 for NCCL 2.30.7") != nullptr);
    p.nccl_version = 23100;
    EXPECT("NCCL 2.31.0: proxy type", 2, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    EXPECT("... as a layout mismatch (a WARN)", 1, mm);
    EXPECT("... naming NCCL's version and the layouts written", 1,
           std::strstr(why, "NCCL 2.31.0") != nullptr && std::strstr(why, "railnet writes 100") != nullptr);
    p.version_override = 200;
    EXPECT("RAILNET_GIN_GDAKI_VERSION=200 states a compatible NCCL", 3, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    EXPECT("... layout 200", 200, gin_gdaki_layout_of(&p));
    p.version_override = 101;
    EXPECT("RAILNET_GIN_GDAKI_VERSION=101: proxy type", 2, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    EXPECT("... naming both versions", 1,
           std::strstr(why, "expects 101") != nullptr && std::strstr(why, "railnet writes 100 and 200") != nullptr);
    p.version_override = 0;
    p.nccl_version = 0;     /* a test driver: no NCCL in the process */
    p.devx_ok = 0;
    std::snprintf(p.devx_why, sizeof(p.devx_why), "not an mlx5 device");
    EXPECT("no DEVX: proxy type", 2, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    EXPECT("... not as a mismatch", 0, mm);
    EXPECT("... saying why", 1, std::strstr(why, "not an mlx5 device") != nullptr);
    p.devx_ok = 1;
    p.cuda_ok = 0;
    EXPECT("no GPU, no host-devx: proxy type", 2, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    p.host_test = 1;
    EXPECT("no GPU, host-devx (CPU consumers): GDAKI type", 3, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    p.mode = 0;     /* auto */
    EXPECT("auto, no GPU, host-devx: proxy type (CPU consumers only when asked for)", 2,
           gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    EXPECT("... saying auto", 1, std::strstr(why, "RAILNET_GIN=auto: no CUDA GPU") != nullptr);
    p.cuda_ok = 1;
    EXPECT("auto + GPU + DEVX: GDAKI type", 3, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    p.devx_ok = 0;
    EXPECT("auto, no DEVX: proxy type", 2, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    p.devx_ok = 1;
    p.nccl_version = 22907;
    EXPECT("auto, NCCL 2.29.7: proxy type (layout written, not yet run on a GPU)", 2,
           gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    EXPECT("... not as a mismatch (INFO)", 0, mm);
    p.nccl_version = 23007;
    EXPECT("auto, NCCL 2.30.7: proxy type", 2, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    p.mode = 1;
    EXPECT("proxy: proxy type", 2, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
}

int main()
{
    qp_image_matches_what_the_device_code_reads();
    qp_image_v200_matches_nccl_2_30();
    ctx_images_match_what_the_device_code_reads();
    window_handle_and_keys_match();
    type_choice_and_version_check();
    std::printf("1..%d\n", n_case);
    return n_fail ? 1 : 0;
}
#endif
