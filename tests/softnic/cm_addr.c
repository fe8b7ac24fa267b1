/* cm_addr.c: IP addresses to softnic ports, rdma_bind_addr,
 * rdma_resolve_addr/route and rdma_getaddrinfo.
 *
 * The kernel picks the RDMA port of the netdev that owns an address (its
 * GID table holds the address); softnic's port owns the address in its
 * GID[0] (::ffff:a.b.c.d, RoCE v2), and only an ACTIVE port counts (one
 * whose address lives in another namespace reads DOWN).  A destination that
 * is a local port's address is reached from that port (the kernel's
 * loopback rule); any other from the source address the routing table picks
 * (a UDP socket "connected" to it says which). */
#include "cm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void cm_gid_of_ip(struct in_addr ip, union ibv_gid *gid)
{
    memset(gid, 0, sizeof(*gid));
    gid->raw[10] = 0xff;
    gid->raw[11] = 0xff;
    memcpy(&gid->raw[12], &ip.s_addr, 4);
}

int cm_addr_to_port_locked(struct in_addr ip, struct ibv_context **verbs, uint8_t *port)
{
    union ibv_gid want;
    cm_gid_of_ip(ip, &want);
    int err = cm_devices_open_locked();
    if (err)
        return err;
    for (int d = 0; d < cm.ndevs; d++) {
        struct ibv_device_attr da;
        if (ibv_query_device(cm.devs[d], &da))
            continue;
        for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
            struct ibv_port_attr pa;
            union ibv_gid gid;
            if (ibv_query_port(cm.devs[d], p, &pa) || pa.state != IBV_PORT_ACTIVE)
                continue;
            if (ibv_query_gid(cm.devs[d], p, 0, &gid) || memcmp(&gid, &want, sizeof(gid)))
                continue;
            *verbs = cm.devs[d];
            *port = p;
            return 0;
        }
    }
    return ENODEV;
}

/* Whether ip is an address of this host (namespace) at all. */
static bool ip_is_local(struct in_addr ip)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = ip };
    bool ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

int cm_bind_locked(struct cm_id *c, const struct sockaddr_in *sin)
{
    if (c->state != CM_IDLE)
        return EINVAL;
    struct ibv_context *verbs = NULL;
    uint8_t port = 0;
    if (sin->sin_addr.s_addr != htonl(INADDR_ANY)) {
        if (cm_addr_to_port_locked(sin->sin_addr, &verbs, &port))   /* the kernel's answers: no such address, or no RDMA on it */
            return ip_is_local(sin->sin_addr) ? ENODEV : EADDRNOTAVAIL;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    /* SO_REUSEADDR always: the kernel CM lets a new id listen on the port
     * of a connection accepted there (perftest -R does so), which TCP
     * allows only with it; two listeners on one address and port still
     * conflict (EADDRINUSE), as two CM ids do.  RDMA_OPTION_ID_REUSEADDR
     * asks for no more than that. */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = *sin;
    sa.sin_family = AF_INET;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
        int err = errno;
        close(fd);
        return err;
    }
    socklen_t sl = sizeof(sa);
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    c->sock = fd;
    memset(&c->id.route.addr.src_storage, 0, sizeof(c->id.route.addr.src_storage));
    c->id.route.addr.src_sin = sa;
    c->id.verbs = verbs;
    c->id.port_num = port;
    c->state = CM_BOUND;
    return 0;
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
    if (!id || !addr) {
        errno = EINVAL;
        return -1;
    }
    if (addr->sa_family != AF_INET) {
        errno = EAFNOSUPPORT;   /* softnic's ports have IPv4 addresses only */
        return -1;
    }
    pthread_mutex_lock(&cm.lock);
    int err = cm_bind_locked(cm_of(id), (const struct sockaddr_in *)addr);
    pthread_mutex_unlock(&cm.lock);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

int cm_route_fill(struct cm_id *c)
{
    struct rdma_cm_id *id = &c->id;
    struct ibv_port_attr pa;
    if (!id->verbs || ibv_query_port(id->verbs, id->port_num, &pa))
        return ENODEV;
    union ibv_gid sgid, dgid;
    if (ibv_query_gid(id->verbs, id->port_num, 0, &sgid))
        return ENODEV;
    cm_gid_of_ip(id->route.addr.dst_sin.sin_addr, &dgid);
    id->route.addr.addr.ibaddr.sgid = sgid;
    id->route.addr.addr.ibaddr.dgid = dgid;
    id->route.addr.addr.ibaddr.pkey = htobe16(0xffff);
    memset(&c->path, 0, sizeof(c->path));
    c->path.sgid = sgid;
    c->path.dgid = dgid;
    c->path.pkey = htobe16(0xffff);
    c->path.mtu = (uint8_t)pa.active_mtu;
    c->path.mtu_selector = 2;
    c->path.hop_limit = 64;
    c->path.traffic_class = c->tos;
    c->path.reversible = 1;
    c->path.numb_path = 1;
    c->path.packet_life_time = 16;   /* the kernel's RoCE default */
    c->path.packet_life_time_selector = 2;
    c->path.rate_selector = 2;
    c->path.rate = IBV_RATE_100_GBPS;
    id->route.path_rec = &c->path;
    id->route.num_paths = 1;
    c->local.gid = sgid;
    c->local.mtu = (uint8_t)pa.active_mtu;
    return 0;
}

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
                      struct sockaddr *dst_addr, int timeout_ms)
{
    (void)timeout_ms;   /* resolution is local: it never waits */
    if (!id || !dst_addr) {
        errno = EINVAL;
        return -1;
    }
    if (dst_addr->sa_family != AF_INET || (src_addr && src_addr->sa_family != AF_INET)) {
        errno = EAFNOSUPPORT;
        return -1;
    }
    struct cm_id *c = cm_of(id);
    const struct sockaddr_in *dst = (const struct sockaddr_in *)dst_addr;
    int err = 0, status = 0;
    pthread_mutex_lock(&cm.lock);
    if (c->state != CM_IDLE && c->state != CM_BOUND) {
        pthread_mutex_unlock(&cm.lock);
        errno = EINVAL;
        return -1;
    }
    if (c->state == CM_IDLE) {
        struct sockaddr_in src = { .sin_family = AF_INET };
        if (src_addr) {
            src = *(const struct sockaddr_in *)src_addr;
        } else {
            struct ibv_context *v;
            uint8_t p;
            if (cm_addr_to_port_locked(dst->sin_addr, &v, &p) == 0) {
                src.sin_addr = dst->sin_addr;    /* loopback: the same port */
            } else {
                int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                struct sockaddr_in probe = *dst;
                probe.sin_port = htons(9);
                socklen_t sl = sizeof(src);
                if (fd < 0 || connect(fd, (struct sockaddr *)&probe, sizeof(probe)) ||
                    getsockname(fd, (struct sockaddr *)&src, &sl))
                    status = -(errno ? errno : ENETUNREACH);
                if (fd >= 0)
                    close(fd);
                src.sin_port = 0;
            }
        }
        if (!status) {
            int e = cm_bind_locked(c, &src);
            if (e == EADDRNOTAVAIL || e == ENODEV)
                status = -ENODEV;     /* no RDMA port on the route's source */
            else if (e)
                err = e;
        }
    } else if (c->id.route.addr.src_sin.sin_addr.s_addr == htonl(INADDR_ANY)) {
        err = EINVAL;   /* bound to any address: not a source to connect from */
    }
    if (!err && !status) {
        /* the route from the bound source must exist, as the kernel's
         * lookup with the source address requires */
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in from = c->id.route.addr.src_sin, probe = *dst;
        from.sin_port = 0;
        probe.sin_port = htons(9);
        if (fd < 0 || bind(fd, (struct sockaddr *)&from, sizeof(from)) ||
            connect(fd, (struct sockaddr *)&probe, sizeof(probe)))
            status = -(errno == EINVAL || !errno ? ENETUNREACH : errno);
        if (fd >= 0)
            close(fd);
    }
    if (!err) {
        memset(&c->id.route.addr.dst_storage, 0, sizeof(c->id.route.addr.dst_storage));
        c->id.route.addr.dst_sin = *dst;
        if (!status && cm_route_fill(c))
            status = -ENODEV;
        if (status) {
            cm_post_locked(c, RDMA_CM_EVENT_ADDR_ERROR, status, NULL, NULL, 0, 0, NULL);
        } else {
            c->state = CM_ADDR_RESOLVED;
            cm_post_locked(c, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, NULL, 0, 0, NULL);
        }
    }
    bool sync = c->chan && c->chan->sync;
    pthread_mutex_unlock(&cm.lock);
    if (err) {
        errno = err;
        return -1;
    }
    return sync ? (cm_sync_wait(c, RDMA_CM_EVENT_ADDR_RESOLVED) ? -1 : 0) : 0;
}

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
    (void)timeout_ms;
    if (!id) {
        errno = EINVAL;
        return -1;
    }
    struct cm_id *c = cm_of(id);
    pthread_mutex_lock(&cm.lock);
    if (c->state != CM_ADDR_RESOLVED) {
        pthread_mutex_unlock(&cm.lock);
        errno = EINVAL;
        return -1;
    }
    c->state = CM_ROUTE_RESOLVED;
    cm_post_locked(c, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, NULL, 0, 0, NULL);
    bool sync = c->chan && c->chan->sync;
    pthread_mutex_unlock(&cm.lock);
    return sync ? (cm_sync_wait(c, RDMA_CM_EVENT_ROUTE_RESOLVED) ? -1 : 0) : 0;
}

/* ------------------------------------------------------ rdma_getaddrinfo */
static int copy_sa(struct sockaddr **dst, socklen_t *dlen, const struct sockaddr *src, socklen_t len)
{
    *dst = malloc(len);
    if (!*dst)
        return ENOMEM;
    memcpy(*dst, src, len);
    *dlen = len;
    return 0;
}

int rdma_getaddrinfo(const char *node, const char *service,
                     const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
    if (!res || (!node && !service)) {
        errno = EINVAL;
        return EAI_NONAME;
    }
    struct rdma_addrinfo *ai = calloc(1, sizeof(*ai));
    if (!ai) {
        errno = ENOMEM;
        return EAI_MEMORY;
    }
    ai->ai_flags = hints ? hints->ai_flags : 0;
    ai->ai_family = AF_INET;
    ai->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
    ai->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
    if (hints && hints->ai_family && hints->ai_family != AF_INET) {
        free(ai);
        return EAI_FAMILY;   /* softnic's ports have IPv4 addresses only */
    }
    struct addrinfo gh = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
    if (hints && (hints->ai_flags & RAI_PASSIVE))
        gh.ai_flags |= AI_PASSIVE;
    if (hints && (hints->ai_flags & RAI_NUMERICHOST))
        gh.ai_flags |= AI_NUMERICHOST;
    struct addrinfo *gai = NULL;
    int rc = getaddrinfo(node, service, &gh, &gai);
    if (rc) {
        free(ai);
        return rc;
    }
    int err = 0;
    if (ai->ai_flags & RAI_PASSIVE) {
        err = copy_sa(&ai->ai_src_addr, &ai->ai_src_len, gai->ai_addr, gai->ai_addrlen);
    } else {
        err = copy_sa(&ai->ai_dst_addr, &ai->ai_dst_len, gai->ai_addr, gai->ai_addrlen);
        if (!err && hints && hints->ai_src_addr && hints->ai_src_len)
            err = copy_sa(&ai->ai_src_addr, &ai->ai_src_len, hints->ai_src_addr, hints->ai_src_len);
    }
    freeaddrinfo(gai);
    if (err) {
        rdma_freeaddrinfo(ai);
        errno = err;
        return EAI_MEMORY;
    }
    *res = ai;
    return 0;
}

void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
    while (res) {
        struct rdma_addrinfo *n = res->ai_next;
        free(res->ai_src_addr);
        free(res->ai_dst_addr);
        free(res->ai_src_canonname);
        free(res->ai_dst_canonname);
        free(res->ai_route);
        free(res->ai_connect);
        free(res);
        res = n;
    }
}
