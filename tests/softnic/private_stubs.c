/* private_stubs.c: rdma-core's IBVERBS_PRIVATE_34 symbols, the provider-side
 * ABI (ibv_cmd_*, verbs_*).  softnic has no kernel and loads no provider, so
 * they exist only so that binaries bound to them load; each one fails with
 * EOPNOTSUPP (or returns NULL/nothing).  Generated from the symbol list of
 * `objdump -T libibverbs.so.1`; the names are facts, the bodies trivial. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

#define STUB_INT(name) EXPORT int name(void); int name(void) { return EOPNOTSUPP; }
#define STUB_PTR(name) EXPORT void *name(void); void *name(void) { errno = EOPNOTSUPP; return NULL; }
#define STUB_VOID(name) EXPORT void name(void); void name(void) {}

EXPORT bool verbs_allow_disassociate_destroy;

EXPORT unsigned int __ioctl_final_num_attrs(void);
unsigned int __ioctl_final_num_attrs(void) { return 0; }

STUB_VOID(__verbs_log)
STUB_PTR(_verbs_init_and_alloc_context)
STUB_INT(execute_ioctl)
STUB_INT(ibv_cmd_advise_mr)
STUB_INT(ibv_cmd_alloc_dm)
STUB_INT(ibv_cmd_alloc_mw)
STUB_INT(ibv_cmd_alloc_pd)
STUB_INT(ibv_cmd_attach_mcast)
STUB_INT(ibv_cmd_close_xrcd)
STUB_INT(ibv_cmd_create_ah)
STUB_INT(ibv_cmd_create_counters)
STUB_INT(ibv_cmd_create_cq)
STUB_INT(ibv_cmd_create_cq_ex)
STUB_INT(ibv_cmd_create_flow)
STUB_INT(ibv_cmd_create_flow_action_esp)
STUB_INT(ibv_cmd_create_qp)
STUB_INT(ibv_cmd_create_qp_ex)
STUB_INT(ibv_cmd_create_qp_ex2)
STUB_INT(ibv_cmd_create_rwq_ind_table)
STUB_INT(ibv_cmd_create_srq)
STUB_INT(ibv_cmd_create_srq_ex)
STUB_INT(ibv_cmd_create_wq)
STUB_INT(ibv_cmd_dealloc_mw)
STUB_INT(ibv_cmd_dealloc_pd)
STUB_INT(ibv_cmd_dereg_mr)
STUB_INT(ibv_cmd_destroy_ah)
STUB_INT(ibv_cmd_destroy_counters)
STUB_INT(ibv_cmd_destroy_cq)
STUB_INT(ibv_cmd_destroy_flow)
STUB_INT(ibv_cmd_destroy_flow_action)
STUB_INT(ibv_cmd_destroy_qp)
STUB_INT(ibv_cmd_destroy_rwq_ind_table)
STUB_INT(ibv_cmd_destroy_srq)
STUB_INT(ibv_cmd_destroy_wq)
STUB_INT(ibv_cmd_detach_mcast)
STUB_INT(ibv_cmd_free_dm)
STUB_INT(ibv_cmd_get_context)
STUB_INT(ibv_cmd_modify_cq)
STUB_INT(ibv_cmd_modify_flow_action_esp)
STUB_INT(ibv_cmd_modify_qp)
STUB_INT(ibv_cmd_modify_qp_ex)
STUB_INT(ibv_cmd_modify_srq)
STUB_INT(ibv_cmd_modify_wq)
STUB_INT(ibv_cmd_open_qp)
STUB_INT(ibv_cmd_open_xrcd)
STUB_INT(ibv_cmd_poll_cq)
STUB_INT(ibv_cmd_post_recv)
STUB_INT(ibv_cmd_post_send)
STUB_INT(ibv_cmd_post_srq_recv)
STUB_INT(ibv_cmd_query_context)
STUB_INT(ibv_cmd_query_device_any)
STUB_INT(ibv_cmd_query_mr)
STUB_INT(ibv_cmd_query_port)
STUB_INT(ibv_cmd_query_qp)
STUB_INT(ibv_cmd_query_srq)
STUB_INT(ibv_cmd_read_counters)
STUB_INT(ibv_cmd_reg_dm_mr)
STUB_INT(ibv_cmd_reg_dmabuf_mr)
STUB_INT(ibv_cmd_reg_mr)
STUB_INT(ibv_cmd_req_notify_cq)
STUB_INT(ibv_cmd_rereg_mr)
STUB_INT(ibv_cmd_resize_cq)
STUB_VOID(verbs_init_cq)
STUB_PTR(verbs_open_device)
STUB_VOID(verbs_register_driver_34)
STUB_VOID(verbs_set_ops)
STUB_VOID(verbs_uninit_context)
