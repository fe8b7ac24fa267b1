/* cm_unsupported.c: what softnic's CM does not do, failing as the kernel's
 * CM does where it lacks the service: multicast (UD) joins say ENOSYS, as on
 * a port without multicast support, and so do rsockets (a library of their
 * own on top of the CM, not modelled: the symbols exist so that binaries
 * linked against librdmacm load). */
#include "cm.h"

#include <errno.h>
#include <rdma/rsocket.h>

#define NOSYS(ret) do { errno = ENOSYS; return ret; } while (0)

int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
    (void)id; (void)addr; (void)context;
    NOSYS(-1);
}

int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc_join_attr,
                           void *context)
{
    (void)id; (void)mc_join_attr; (void)context;
    NOSYS(-1);
}

int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
    (void)id; (void)addr;
    errno = EADDRNOTAVAIL;   /* never joined: the kernel's answer */
    return -1;
}

int rsocket(int domain, int type, int protocol) { (void)domain; (void)type; (void)protocol; NOSYS(-1); }
int rbind(int s, const struct sockaddr *a, socklen_t l) { (void)s; (void)a; (void)l; NOSYS(-1); }
int rlisten(int s, int b) { (void)s; (void)b; NOSYS(-1); }
int raccept(int s, struct sockaddr *a, socklen_t *l) { (void)s; (void)a; (void)l; NOSYS(-1); }
int rconnect(int s, const struct sockaddr *a, socklen_t l) { (void)s; (void)a; (void)l; NOSYS(-1); }
int rshutdown(int s, int how) { (void)s; (void)how; NOSYS(-1); }
int rclose(int s) { (void)s; NOSYS(-1); }
ssize_t rrecv(int s, void *b, size_t n, int f) { (void)s; (void)b; (void)n; (void)f; NOSYS(-1); }
ssize_t rrecvfrom(int s, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l)
{ (void)s; (void)b; (void)n; (void)f; (void)a; (void)l; NOSYS(-1); }
ssize_t rrecvmsg(int s, struct msghdr *m, int f) { (void)s; (void)m; (void)f; NOSYS(-1); }
ssize_t rsend(int s, const void *b, size_t n, int f) { (void)s; (void)b; (void)n; (void)f; NOSYS(-1); }
ssize_t rsendto(int s, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l)
{ (void)s; (void)b; (void)n; (void)f; (void)a; (void)l; NOSYS(-1); }
ssize_t rsendmsg(int s, const struct msghdr *m, int f) { (void)s; (void)m; (void)f; NOSYS(-1); }
ssize_t rread(int s, void *b, size_t n) { (void)s; (void)b; (void)n; NOSYS(-1); }
ssize_t rreadv(int s, const struct iovec *v, int n) { (void)s; (void)v; (void)n; NOSYS(-1); }
ssize_t rwrite(int s, const void *b, size_t n) { (void)s; (void)b; (void)n; NOSYS(-1); }
ssize_t rwritev(int s, const struct iovec *v, int n) { (void)s; (void)v; (void)n; NOSYS(-1); }
int rpoll(struct pollfd *f, nfds_t n, int t) { (void)f; (void)n; (void)t; NOSYS(-1); }
int rselect(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{ (void)n; (void)r; (void)w; (void)e; (void)t; NOSYS(-1); }
int rgetpeername(int s, struct sockaddr *a, socklen_t *l) { (void)s; (void)a; (void)l; NOSYS(-1); }
int rgetsockname(int s, struct sockaddr *a, socklen_t *l) { (void)s; (void)a; (void)l; NOSYS(-1); }
int rsetsockopt(int s, int lv, int o, const void *v, socklen_t l)
{ (void)s; (void)lv; (void)o; (void)v; (void)l; NOSYS(-1); }
int rgetsockopt(int s, int lv, int o, void *v, socklen_t *l)
{ (void)s; (void)lv; (void)o; (void)v; (void)l; NOSYS(-1); }
int rfcntl(int s, int cmd, ...) { (void)s; (void)cmd; NOSYS(-1); }
off_t riomap(int s, void *b, size_t n, int p, int f, off_t o)
{ (void)s; (void)b; (void)n; (void)p; (void)f; (void)o; NOSYS(-1); }
int riounmap(int s, void *b, size_t n) { (void)s; (void)b; (void)n; NOSYS(-1); }
size_t riowrite(int s, const void *b, size_t n, off_t o, int f)
{ (void)s; (void)b; (void)n; (void)o; (void)f; errno = ENOSYS; return 0; }
