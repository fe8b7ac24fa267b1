/* cq_ex.c: the extended CQ (ibv_create_cq_ex and its poll functions).
 *
 * In rdma-core ibv_start_poll/next_poll/end_poll and the ibv_wc_read_*
 * accessors are inlines of verbs.h that call through struct ibv_cq_ex; an
 * extended CQ here is an ordinary softnic CQ (cq.c, the same ring the NIC
 * threads fill) whose ibv_cq_ex face is filled in, so ibv_poll_cq works on
 * it too.  start_poll/next_poll take one completion off the ring into
 * ex_cur (ENOENT when there is none, as the verbs contract says; the CQ is
 * then not "in a poll" and end_poll need not be called), the accessors
 * read fields of ex_cur.
 *
 * wc_flags: a CQ offers the fields softnic's ibv_wc carries.  The
 * completion timestamp and wallclock are refused with EOPNOTSUPP: softnic
 * advertises no hca_core_clock / completion_timestamp_mask in
 * ibv_query_device_ex, and a ConnectX without the clock refuses them the
 * same way.  CVLAN, flow tag and tag matching are refused too. */
#include "softnic.h"

#include <errno.h>
#include <string.h>

struct ibv_cq *cq_create(struct ibv_context *c, int cqe, void *cq_context,
                         struct ibv_comp_channel *channel, int comp_vector);
int cq_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc);

#define SN_WC_EX_FLAGS (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | \
                        IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | \
                        IBV_WC_EX_WITH_DLID_PATH_BITS)

static struct sn_cq *cq_of_ex(struct ibv_cq_ex *x) { return (struct sn_cq *)x; }

/* Takes the next completion; ENOENT when the ring is empty. */
static int take(struct ibv_cq_ex *x)
{
    struct sn_cq *cq = cq_of_ex(x);
    if (cq_poll(&cq->ibcq, 1, &cq->ex_cur) != 1)
        return ENOENT;
    x->status = cq->ex_cur.status;
    x->wr_id = cq->ex_cur.wr_id;
    return 0;
}

static int ex_start_poll(struct ibv_cq_ex *x, struct ibv_poll_cq_attr *attr)
{
    if (attr && attr->comp_mask)
        return EINVAL;
    return take(x);
}

static int ex_next_poll(struct ibv_cq_ex *x) { return take(x); }
static void ex_end_poll(struct ibv_cq_ex *x) { (void)x; }

static enum ibv_wc_opcode ex_read_opcode(struct ibv_cq_ex *x) { return cq_of_ex(x)->ex_cur.opcode; }
static uint32_t ex_read_vendor_err(struct ibv_cq_ex *x) { return cq_of_ex(x)->ex_cur.vendor_err; }
static uint32_t ex_read_byte_len(struct ibv_cq_ex *x) { return cq_of_ex(x)->ex_cur.byte_len; }
static __be32 ex_read_imm_data(struct ibv_cq_ex *x) { return cq_of_ex(x)->ex_cur.imm_data; }
static uint32_t ex_read_qp_num(struct ibv_cq_ex *x) { return cq_of_ex(x)->ex_cur.qp_num; }
static uint32_t ex_read_src_qp(struct ibv_cq_ex *x) { return cq_of_ex(x)->ex_cur.src_qp; }
static unsigned int ex_read_wc_flags(struct ibv_cq_ex *x) { return cq_of_ex(x)->ex_cur.wc_flags; }
static uint32_t ex_read_slid(struct ibv_cq_ex *x) { return cq_of_ex(x)->ex_cur.slid; }
static uint8_t ex_read_sl(struct ibv_cq_ex *x) { return cq_of_ex(x)->ex_cur.sl; }
static uint8_t ex_read_dlid_path_bits(struct ibv_cq_ex *x)
{
    return cq_of_ex(x)->ex_cur.dlid_path_bits;
}

struct ibv_cq_ex *cq_create_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr)
{
    if (!attr) {
        errno = EINVAL;
        return NULL;
    }
    /* a PD or flags (single-threaded, ...) are hints softnic needs not */
    const uint32_t known = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
    if (attr->comp_mask & ~known) {
        errno = EINVAL;
        return NULL;
    }
    if (attr->wc_flags & ~(uint64_t)SN_WC_EX_FLAGS) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (attr->cqe > INT32_MAX) {
        errno = EINVAL;
        return NULL;
    }
    struct ibv_cq *ibcq = cq_create(c, (int)attr->cqe, attr->cq_context, attr->channel,
                                    (int)attr->comp_vector);
    if (!ibcq)
        return NULL;
    struct ibv_cq_ex *x = &((struct sn_cq *)ibcq)->ibcq_ex;
    x->comp_mask = 0;
    x->start_poll = ex_start_poll;
    x->next_poll = ex_next_poll;
    x->end_poll = ex_end_poll;
    x->read_opcode = ex_read_opcode;
    x->read_vendor_err = ex_read_vendor_err;
    x->read_byte_len = ex_read_byte_len;
    x->read_imm_data = ex_read_imm_data;
    x->read_qp_num = ex_read_qp_num;
    x->read_src_qp = ex_read_src_qp;
    x->read_wc_flags = ex_read_wc_flags;
    x->read_slid = ex_read_slid;
    x->read_sl = ex_read_sl;
    x->read_dlid_path_bits = ex_read_dlid_path_bits;
    /* timestamp, cvlan, flow tag, tm info: refused above, left NULL */
    return x;
}
