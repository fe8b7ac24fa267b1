/* plugin/ib/mr.h: memory registration (docs/design.md, "Memory registration").
 *
 * - Host memory: ibv_reg_mr over the page-aligned range.
 * - CUDA memory (type NCCL_PTR_CUDA): dmabuf first (the allocation exported
 *   with cuMemGetHandleForAddressRange, then ibv_reg_dmabuf_mr with the CUDA
 *   address as iova), else plain ibv_reg_mr through the peer-memory module
 *   (nvidia_peermem). RAILNET_DMABUF=0/1 forces one path.
 * - regMrDmaBuf: NCCL's own dmabuf fd and offset, registered as given.
 * - Relaxed ordering (IBV_ACCESS_RELAXED_ORDERING, through
 *   ibv_reg_mr_iova2) when the library has it, unless
 *   RAILNET_RELAXED_ORDERING=0; =1 with a library lacking it is a WARN.
 * - A registration cache (regIsGlobal = 1): one verbs MR per (protection
 *   domain, range, path), shared by every comm of the device and counted;
 *   deregMr drops a reference and the last one deregisters. Thread-safe.
 * The mhandle given to NCCL is a struct mr_handle *. Registrations name
 * the device by index (the caller maps a comm to it: comm_device).
 * Layer: low (over devices; knows nothing of comms). */
#ifndef RAILNET_IB_MR_H
#define RAILNET_IB_MR_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_net_v8.h"

struct rn_device;
struct mr_handle;

ncclResult_t mr_register(int dev, void *data, size_t size, int type, void **mhandle);
ncclResult_t mr_register_dmabuf(int dev, void *data, size_t size, int type, uint64_t offset, int fd,
                                void **mhandle);
/* comm is unused (the ABI's slot): the cache is per device. */
ncclResult_t mr_deregister(void *comm, void *mhandle);

/* The same on a device named by index, for faces without a p2p comm (GIN).
 * MR_FLAG_STRICT: no relaxed ordering (NCCL_NET_MR_FLAG_FORCE_SO: a signal
 * window, whose atomics must not pass the data written before them); such
 * registrations are cached apart from relaxed ones. Every registration
 * allows remote atomics. */
#define MR_FLAG_STRICT 0x1
ncclResult_t mr_register_dev(int dev, void *data, size_t size, int type, int flags, void **mhandle);
ncclResult_t mr_register_dmabuf_dev(int dev, void *data, size_t size, int type, uint64_t offset, int fd, int flags,
                                    void **mhandle);

uint32_t mr_lkey(const void *mhandle, int port_idx);
uint32_t mr_rkey(const void *mhandle, int port_idx);
int mr_is_cuda(const void *mhandle);
/* Whether data the NIC wrote into this registration needs a GDR flush (an
 * RDMA READ of it) before the GPU may read it, as RAILNET_GDR_FLUSH says:
 * CUDA memory unless it is 0, host memory too when it is 2 (tests). */
int mr_needs_gdr_flush(const void *mhandle);
/* Live verbs MRs in the cache (tests). */
int mr_cache_entries(void);

/* At init: NCCL_PTR_CUDA | NCCL_PTR_DMABUF as far as a test registration
 * of GPU memory on device r really succeeds by each path; 0 without a GPU.
 * Logs the decision once per device. */
int mr_probe_gpu(int dev, const struct rn_device *r);

#endif
