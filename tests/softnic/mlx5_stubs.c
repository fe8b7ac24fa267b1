/* mlx5_stubs.c: the rest of rdma-core 50's libmlx5 symbol set
 * (mlx5_symbols_rdma_core_50.txt), for entry points softnic's NIC has no
 * model of: flow steering and direct rules, DM, VAR, packet pacing,
 * scheduling, crypto/DEK, VFIO, event channels, asynchronous DEVX, DCI
 * streams, LAG ports, reserved QPNs.  A program linked against the real
 * libmlx5 must load on softnic and, at call time, get what a ConnectX
 * without the capability answers:
 *   - an object constructor: NULL with errno = EOPNOTSUPP;
 *   - a verb returning int: EOPNOTSUPP (rdma-core's errno-style return);
 *   - a void destructor: nothing (no such object can exist here);
 *   - the few with another convention: noted where they are defined.
 * This file does not include mlx5dv.h on purpose: it defines only symbols,
 * with a C signature that returns the right kind of value; the callers'
 * arguments are ignored, which the x86-64/aarch64 calling conventions
 * allow for functions that never read them.  Anything softnic models for
 * real lives in mlx5_dv.c, mlx5_devx.c and mlx5_nic.c. */
#include <errno.h>
#include <sys/types.h>

#define EXPORT __attribute__((visibility("default")))

#define STUB_OBJ(name) \
    EXPORT void *name(void); \
    void *name(void) { errno = EOPNOTSUPP; return (void *)0; }
#define STUB_INT(name) \
    EXPORT int name(void); \
    int name(void) { return EOPNOTSUPP; }
#define STUB_VOID(name) \
    EXPORT void name(void); \
    void name(void) {}

/* Constructors and lookups that hand out an object or an address. */
STUB_OBJ(mlx5dv_alloc_dm)
STUB_OBJ(mlx5dv_alloc_var)
STUB_OBJ(mlx5dv_create_flow)
STUB_OBJ(mlx5dv_create_flow_action_esp)
STUB_OBJ(mlx5dv_create_flow_action_modify_header)
STUB_OBJ(mlx5dv_create_flow_action_packet_reformat)
STUB_OBJ(mlx5dv_create_flow_matcher)
STUB_OBJ(mlx5dv_create_steering_anchor)
STUB_OBJ(mlx5dv_create_wq)
STUB_OBJ(mlx5dv_crypto_login_create)
STUB_OBJ(mlx5dv_devx_alloc_msi_vector)
STUB_OBJ(mlx5dv_devx_create_cmd_comp)
STUB_OBJ(mlx5dv_devx_create_eq)
STUB_OBJ(mlx5dv_devx_create_event_channel)
STUB_OBJ(mlx5dv_dm_map_op_addr)
STUB_OBJ(mlx5dv_dr_action_create_aso)
STUB_OBJ(mlx5dv_dr_action_create_default_miss)
STUB_OBJ(mlx5dv_dr_action_create_dest_array)
STUB_OBJ(mlx5dv_dr_action_create_dest_devx_tir)
STUB_OBJ(mlx5dv_dr_action_create_dest_ib_port)
STUB_OBJ(mlx5dv_dr_action_create_dest_ibv_qp)
STUB_OBJ(mlx5dv_dr_action_create_dest_root_table)
STUB_OBJ(mlx5dv_dr_action_create_dest_table)
STUB_OBJ(mlx5dv_dr_action_create_dest_vport)
STUB_OBJ(mlx5dv_dr_action_create_drop)
STUB_OBJ(mlx5dv_dr_action_create_flow_counter)
STUB_OBJ(mlx5dv_dr_action_create_flow_meter)
STUB_OBJ(mlx5dv_dr_action_create_flow_sampler)
STUB_OBJ(mlx5dv_dr_action_create_modify_header)
STUB_OBJ(mlx5dv_dr_action_create_packet_reformat)
STUB_OBJ(mlx5dv_dr_action_create_pop_vlan)
STUB_OBJ(mlx5dv_dr_action_create_push_vlan)
STUB_OBJ(mlx5dv_dr_action_create_tag)
STUB_OBJ(mlx5dv_dr_domain_create)
STUB_OBJ(mlx5dv_dr_matcher_create)
STUB_OBJ(mlx5dv_dr_rule_create)
STUB_OBJ(mlx5dv_dr_table_create)
STUB_OBJ(mlx5dv_get_vfio_device_list)
STUB_OBJ(mlx5dv_pp_alloc)
STUB_OBJ(mlx5dv_sched_leaf_create)
STUB_OBJ(mlx5dv_sched_node_create)

/* Verbs that return 0 or a positive errno. */
STUB_INT(_mlx5dv_mkey_check)
STUB_INT(mlx5dv_crypto_login_destroy)
STUB_INT(mlx5dv_crypto_login_query)
STUB_INT(mlx5dv_crypto_login_query_state)
STUB_INT(mlx5dv_crypto_logout)
STUB_INT(mlx5dv_dci_stream_id_reset)
STUB_INT(mlx5dv_dek_query)
STUB_INT(mlx5dv_destroy_flow_matcher)
STUB_INT(mlx5dv_destroy_steering_anchor)
STUB_INT(mlx5dv_devx_cq_modify)
STUB_INT(mlx5dv_devx_cq_query)
STUB_INT(mlx5dv_devx_destroy_eq)
STUB_INT(mlx5dv_devx_free_msi_vector)
STUB_INT(mlx5dv_devx_get_async_cmd_comp)
STUB_INT(mlx5dv_devx_ind_tbl_modify)
STUB_INT(mlx5dv_devx_ind_tbl_query)
STUB_INT(mlx5dv_devx_obj_query_async)
STUB_INT(mlx5dv_devx_qp_modify)
STUB_INT(mlx5dv_devx_qp_query)
STUB_INT(mlx5dv_devx_srq_modify)
STUB_INT(mlx5dv_devx_srq_query)
STUB_INT(mlx5dv_devx_subscribe_devx_event)
STUB_INT(mlx5dv_devx_subscribe_devx_event_fd)
STUB_INT(mlx5dv_devx_wq_modify)
STUB_INT(mlx5dv_devx_wq_query)
STUB_INT(mlx5dv_dr_action_destroy)
STUB_INT(mlx5dv_dr_action_modify_aso)
STUB_INT(mlx5dv_dr_action_modify_flow_meter)
STUB_INT(mlx5dv_dr_aso_other_domain_link)
STUB_INT(mlx5dv_dr_aso_other_domain_unlink)
STUB_INT(mlx5dv_dr_domain_destroy)
STUB_INT(mlx5dv_dr_domain_sync)
STUB_INT(mlx5dv_dr_matcher_destroy)
STUB_INT(mlx5dv_dr_matcher_set_layout)
STUB_INT(mlx5dv_dr_rule_destroy)
STUB_INT(mlx5dv_dr_table_destroy)
STUB_INT(mlx5dv_dump_dr_domain)
STUB_INT(mlx5dv_dump_dr_matcher)
STUB_INT(mlx5dv_dump_dr_rule)
STUB_INT(mlx5dv_dump_dr_table)
STUB_INT(mlx5dv_map_ah_to_qp)
STUB_INT(mlx5dv_modify_qp_lag_port)
STUB_INT(mlx5dv_modify_qp_sched_elem)
STUB_INT(mlx5dv_modify_qp_udp_sport)
STUB_INT(mlx5dv_query_qp_lag_port)
STUB_INT(mlx5dv_reserved_qpn_alloc)
STUB_INT(mlx5dv_reserved_qpn_dealloc)
STUB_INT(mlx5dv_sched_leaf_destroy)
STUB_INT(mlx5dv_sched_leaf_modify)
STUB_INT(mlx5dv_sched_node_destroy)
STUB_INT(mlx5dv_sched_node_modify)
STUB_INT(mlx5dv_vfio_process_events)

/* Destructors of objects the constructors above never made. */
STUB_VOID(mlx5dv_devx_destroy_cmd_comp)
STUB_VOID(mlx5dv_devx_destroy_event_channel)
STUB_VOID(mlx5dv_dr_domain_allow_duplicate_rules)
STUB_VOID(mlx5dv_dr_domain_set_reclaim_device_memory)
STUB_VOID(mlx5dv_free_var)
STUB_VOID(mlx5dv_pp_free)

/* ssize_t read of an event channel, -1 and errno on failure: no event
 * channel can be created, so none can be read. */
EXPORT ssize_t mlx5dv_devx_get_event(void);
ssize_t mlx5dv_devx_get_event(void)
{
    errno = EOPNOTSUPP;
    return -1;
}

/* A file descriptor, or -1 with errno: only contexts of VFIO devices
 * (mlx5dv_get_vfio_device_list) have one, and softnic lists none. */
EXPORT int mlx5dv_vfio_get_events_fd(void);
int mlx5dv_vfio_get_events_fd(void)
{
    errno = EOPNOTSUPP;
    return -1;
}

/* The number of WRs cancelled, or a negative errno; it takes a
 * struct mlx5dv_qp_ex, which softnic never hands out. */
EXPORT int mlx5dv_qp_cancel_posted_send_wrs(void);
int mlx5dv_qp_cancel_posted_send_wrs(void)
{
    return -EOPNOTSUPP;
}
