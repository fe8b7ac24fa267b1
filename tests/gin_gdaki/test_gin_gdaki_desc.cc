// tests/gin_gdaki/test_gin_gdaki_desc.cc: the images railnet builds for
// NCCL 2.28.9's GDAKI device code (plugin/gin/gin_gdaki_desc.c), read back
// through NCCL's own installed structures (doca_gpu_dev_verbs_qp,
// ncclGinGdakiGPUContext, ncclGinGdakiMemHandle) and checked field by field
// against values computed by hand here. Skips when the headers are absent.
#include <cstdint>
#include <cstdio>
#include <cstring>

extern "C" {
#include "gin_gdaki.h"
}

#include "nccl_gdaki_headers.h"

#ifndef HAVE_NCCL_GDAKI_HEADERS
int main()
{
    std::printf("1..0 # SKIP NCCL's GDAKI device headers are not installed (nccl_device/gin/gdaki)\n");
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

static void qp_image_matches_what_the_device_code_reads()
{
    static uint8_t sq[512 * 64], cq[1024 * 64];
    static uint32_t dbr[2], cq_dbr[2];
    static uint64_t uar;
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

static void ctx_image_matches_what_the_device_code_reads()
{
    static struct rn_doca_qp qps[8];
    static uint64_t counters[16], signals[32];
    static uint32_t ckeys[4], skeys[4];
    struct rn_gin_gdaki_gpu_ctx img;
    std::memset(&img, 0xee, sizeof(img));
    gin_gdaki_ctx_image(qps, qps + 4, counters, ckeys, 0x00112233u, signals, skeys, 0x44556677u, 0x8899aabbu, &img);
    const ncclGinGdakiGPUContext *c = (const ncclGinGdakiGPUContext *)&img;
    EXPECT("gdqp: peer p's QP is gdqp + p", (uintptr_t)qps, (uintptr_t)c->gdqp);
    EXPECT("companion_gdqp", (uintptr_t)(qps + 4), (uintptr_t)c->companion_gdqp);
    EXPECT("counters_table.buffer", (uintptr_t)counters, (uintptr_t)c->counters_table.buffer);
    EXPECT("counters_table.rkeys", (uintptr_t)ckeys, (uintptr_t)c->counters_table.rkeys);
    EXPECT("counters_table.lkey big-endian: bytes 00 11 22 33", be_bytes(0x00, 0x11, 0x22, 0x33),
           c->counters_table.lkey);
    EXPECT("signals_table.buffer", (uintptr_t)signals, (uintptr_t)c->signals_table.buffer);
    EXPECT("signals_table.rkeys", (uintptr_t)skeys, (uintptr_t)c->signals_table.rkeys);
    EXPECT("signals_table.lkey big-endian: bytes 44 55 66 77", be_bytes(0x44, 0x55, 0x66, 0x77),
           c->signals_table.lkey);
    EXPECT("sink_buffer_lkey big-endian: bytes 88 99 aa bb", be_bytes(0x88, 0x99, 0xaa, 0xbb), c->sink_buffer_lkey);
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
    EXPECT("NCCL 2.29.0: not a number railnet maps (its layout is checked apart)", 0, gin_gdaki_version_of_nccl(22900));
    EXPECT("NCCL 2.30.7 device code: layout 200", 200, gin_gdaki_version_of_nccl(23007));
    EXPECT("gdaki + NCCL 2.28.9 + GPU + DEVX: GDAKI type", 3, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    p.nccl_version = 22903;
    EXPECT("NCCL 2.29.3: proxy type", 2, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    EXPECT("... as a layout mismatch (a WARN)", 1, mm);
    EXPECT("... naming NCCL's version", 1, std::strstr(why, "NCCL 2.29.3") != nullptr);
    EXPECT("... saying its layout differs under the same number", 1, std::strstr(why, "another layout") != nullptr);
    p.nccl_version = 23007;
    EXPECT("NCCL 2.30.7: proxy type", 2, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    EXPECT("... naming both versions", 1,
           std::strstr(why, "expects 200") != nullptr && std::strstr(why, "railnet writes 100") != nullptr);
    p.nccl_version = 22903;
    p.version_override = 100;
    EXPECT("RAILNET_GIN_GDAKI_VERSION=100 states a compatible NCCL", 3, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    p.version_override = 101;
    EXPECT("RAILNET_GIN_GDAKI_VERSION=101: proxy type", 2, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    EXPECT("... naming both versions", 1,
           std::strstr(why, "expects 101") != nullptr && std::strstr(why, "railnet writes 100") != nullptr);
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
    p.nccl_version = 22903;
    EXPECT("auto, NCCL 2.29.3: proxy type", 2, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
    p.mode = 1;
    EXPECT("proxy: proxy type", 2, gin_gdaki_choose(&p, &mm, why, sizeof(why)));
}

int main()
{
    qp_image_matches_what_the_device_code_reads();
    ctx_image_matches_what_the_device_code_reads();
    window_handle_and_keys_match();
    type_choice_and_version_check();
    std::printf("1..%d\n", n_case);
    return n_fail ? 1 : 0;
}
#endif
