/* cma.c: the same-host fast path.  When requester and responder are
 * processes of one host and one network namespace, the responder pulls a
 * WRITE/SEND payload straight out of the requester's registered memory with
 * process_vm_readv (cross-memory attach: one copy, no TCP stream), while
 * headers, ordering, ACKs and everything else stay on the connection.
 *
 * Trust: the requester's hello names its pid, which is peer input.  The
 * responder believes it only when that process owns the very TCP socket
 * that is connected to us (its /proc/<pid>/fd holds the inode the kernel's
 * socket diagnostics, or /proc/net/tcp, give for our peer's address pair:
 * at the descriptor the hello names, or else anywhere); this also proves the
 * peer shares our network namespace, and a peer in another one (or another
 * host) has no such line and keeps the wire.  Then a probe read of the
 * requester's token checks that the kernel lets us (EPERM under ptrace
 * restrictions: the wire again).  A descriptor then names addresses of the
 * requester's own memory, so a peer can only ever send its own bytes.  A
 * pidfd taken before the checks pins them to that very process: each
 * engine step that pulls first makes sure it has not exited (its pid could
 * name another one).  Once a step, not once a pull: the poll is a system
 * call, as dear as the pull of a small payload in a VM, and a pid is named
 * again only after the kernel's pid counter has gone round, which no
 * step's few hundred microseconds come near. */
#include "softnic.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* This process's token: a probe read of it proves cross-memory attach
 * works towards us. */
static uint64_t token;
static pthread_once_t token_once = PTHREAD_ONCE_INIT;

static void token_init(void)
{
    uint64_t t = 0;
    if (getrandom(&t, sizeof(t), 0) != (ssize_t)sizeof(t))
        t = sn_now_ns() ^ ((uint64_t)getpid() << 32);
    token = t | 1;   /* never 0 */
}

void cma_hello_fill(struct sn_wire_hello *h)
{
    if (!softnic_global()->conf.fastpath)
        return;
    pthread_once(&token_once, token_init);
    h->hflags |= SN_HELLO_CMA;
    h->pid = (uint32_t)getpid();
    h->token_addr = (uint64_t)(uintptr_t)&token;
    h->token = token;
}

/* The inode of the socket whose local end is `local` and remote end is
 * `remote`, from /proc/net/tcp (this thread's network namespace); 0 when
 * there is none.  Reading the file walks every TCP socket of the
 * namespace: tens of ms on a busy host. */
static unsigned long tcp_inode_proc(const struct sockaddr_in *local, const struct sockaddr_in *remote)
{
    FILE *f = fopen("/proc/net/tcp", "re");
    if (!f)
        return 0;
    char line[512];
    unsigned long found = 0;
    if (!fgets(line, sizeof(line), f)) {   /* the column titles */
        fclose(f);
        return 0;
    }
    while (!found && fgets(line, sizeof(line), f)) {
        unsigned int lip, lport, rip, rport, st;
        unsigned long inode;
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*d: %x:%x %x:%x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &lip, &lport,
                   &rip, &rport, &st, &inode) != 6)
            continue;
        if (lip == local->sin_addr.s_addr && lport == ntohs(local->sin_port) &&
            rip == remote->sin_addr.s_addr && rport == ntohs(remote->sin_port))
            found = inode;
    }
    fclose(f);
    return found;
}

/* The same, asked of the kernel's socket diagnostics for that one socket
 * (an exact lookup, as `ss` makes: no walk); /proc/net/tcp where netlink
 * answers nothing usable.  A responder checks every hello this way, on an
 * engine the other connections share. */
static unsigned long tcp_inode(const struct sockaddr_in *local, const struct sockaddr_in *remote)
{
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return tcp_inode_proc(local, remote);
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 r;
    } req;
    memset(&req, 0, sizeof(req));
    req.nlh.nlmsg_len = sizeof(req);
    req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nlh.nlmsg_flags = NLM_F_REQUEST;
    req.r.sdiag_family = AF_INET;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = ~0u;
    req.r.id.idiag_sport = local->sin_port;
    req.r.id.idiag_dport = remote->sin_port;
    req.r.id.idiag_src[0] = local->sin_addr.s_addr;
    req.r.id.idiag_dst[0] = remote->sin_addr.s_addr;
    req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    union {
        struct nlmsghdr nlh;
        char buf[1024];
    } ans;
    unsigned long inode = 0;
    bool answered = false;
    struct timeval tv = { .tv_sec = 1 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) == (ssize_t)sizeof(req)) {
        ssize_t n = recv(fd, &ans, sizeof(ans), 0);
        if (n >= (ssize_t)sizeof(struct nlmsghdr) && NLMSG_OK(&ans.nlh, (size_t)n)) {
            if (ans.nlh.nlmsg_type == SOCK_DIAG_BY_FAMILY &&
                ans.nlh.nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
                const struct inet_diag_msg *m = NLMSG_DATA(&ans.nlh);
                inode = m->idiag_inode;
                answered = true;
            } else if (ans.nlh.nlmsg_type == NLMSG_ERROR &&
                       ans.nlh.nlmsg_len >= NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
                const struct nlmsgerr *e = NLMSG_DATA(&ans.nlh);
                answered = e->error == -ENOENT;   /* no such socket: a definite no */
            }
        }
    }
    close(fd);
    return answered ? inode : tcp_inode_proc(local, remote);
}

/* Whether process pid has the socket inode open: at descriptor fd_hint,
 * which its hello names (one readlink), else at any (a walk of its
 * descriptors: thousands in a process of thousands of QPs, and every hello
 * of its peers would walk them). */
static bool pid_owns_inode(uint32_t pid, unsigned long inode, uint32_t fd_hint)
{
    char path[64], want[64], link[64];
    snprintf(path, sizeof(path), "/proc/%u/fd", pid);
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    char hint[96];
    snprintf(hint, sizeof(hint), "%s/%u", path, fd_hint);
    ssize_t hn = readlink(hint, link, sizeof(link) - 1);
    if (hn > 0) {
        link[hn] = 0;
        if (strcmp(link, want) == 0)
            return true;
    }
    DIR *d = opendir(path);
    if (!d)
        return false;
    bool owns = false;
    struct dirent *e;
    while (!owns && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char fdpath[sizeof(path) + sizeof(e->d_name) + 1];
        snprintf(fdpath, sizeof(fdpath), "%s/%s", path, e->d_name);
        ssize_t n = readlink(fdpath, link, sizeof(link) - 1);
        if (n <= 0)
            continue;
        link[n] = 0;
        owns = strcmp(link, want) == 0;
    }
    closedir(d);
    return owns;
}

static int pidfd_of(uint32_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

void cma_token(uint64_t *addr, uint64_t *tok)
{
    pthread_once(&token_once, token_init);
    *addr = (uint64_t)(uintptr_t)&token;
    *tok = token;
}

int cma_accept_peer(int fd, const struct sn_wire_hello *h)
{
    if (!softnic_global()->conf.fastpath || !(h->hflags & SN_HELLO_CMA) || !h->pid)
        return -1;
    return cma_check_peer(fd, h->pid, h->fd, h->token_addr, h->token);
}

bool cma_listener_owner(uint32_t pid, struct in_addr ip, uint16_t port)
{
    if (pid == (uint32_t)getpid())
        return true;
    /* the listener: its local end ip:port, its remote end none */
    struct sockaddr_in l = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr = ip };
    struct sockaddr_in none = { .sin_family = AF_INET };
    unsigned long inode = tcp_inode(&l, &none);
    /* no descriptor to look at first: a walk of its descriptors */
    return inode && pid_owns_inode(pid, inode, UINT32_MAX);
}

int cma_check_peer(int fd, uint32_t pid, uint32_t fd_hint, uint64_t token_addr, uint64_t tok)
{
    struct sockaddr_storage us;
    struct sockaddr_in peer;
    socklen_t lu = sizeof(us), lp = sizeof(peer);
    if (getsockname(fd, (struct sockaddr *)&us, &lu))
        return -1;
    /* over a UNIX socket (wire.c) the kernel names the process at the
     * other end: the one that connected, or the one that listened */
    bool local = us.ss_family == AF_UNIX;
    if (local) {
        struct ucred cr;
        socklen_t lc = sizeof(cr);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &lc) || (uint32_t)cr.pid != pid)
            return -1;
    } else if (us.ss_family != AF_INET || getpeername(fd, (struct sockaddr *)&peer, &lp) ||
               peer.sin_family != AF_INET) {
        return -1;
    }
    int pidfd = pidfd_of(pid);
    if (pidfd < 0)
        return -1;
    if (!local) {
        unsigned long inode = tcp_inode(&peer, (const struct sockaddr_in *)&us);
        if (!inode || !pid_owns_inode(pid, inode, fd_hint)) {
            close(pidfd);
            return -1;
        }
    }
    uint64_t got = 0;
    struct iovec l = { &got, sizeof(got) };
    struct iovec r = { (void *)(uintptr_t)token_addr, sizeof(got) };
    ssize_t n = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0);
    if (n != (ssize_t)sizeof(got) || got != tok) {
        SN_DEBUG("cma: peer pid %u: process_vm_readv refused (%s): payloads on the wire", pid,
                 n < 0 ? strerror(errno) : "token mismatch");
        close(pidfd);
        return -1;
    }
    return pidfd;
}

bool cma_peer_alive(int pidfd)
{
    struct pollfd p = { .fd = pidfd, .events = POLLIN };   /* readable once it exited */
    return poll(&p, 1, 0) == 0;
}

int cma_pull(uint32_t pid, const struct sn_cma_seg *seg, int nseg, uint64_t off, void *dst, size_t len)
{
    struct iovec remote[SN_MAX_SGE];
    int nr = 0;
    char *d = dst;
    while (len) {
        /* the remote pieces covering [off, off + len) */
        nr = 0;
        uint64_t pos = 0, want = len;
        for (int s = 0; s < nseg && want; s++) {
            uint64_t a = seg[s].addr, n = seg[s].len;
            if (pos + n <= off) {
                pos += n;
                continue;
            }
            uint64_t skip = off > pos ? off - pos : 0;
            uint64_t take = n - skip < want ? n - skip : want;
            remote[nr++] = (struct iovec){ (void *)(uintptr_t)(a + skip), take };
            want -= take;
            pos += n;
        }
        if (want)
            return EPROTO;   /* the descriptor is shorter than the request */
        struct iovec local = { d, len };
        ssize_t got = process_vm_readv((pid_t)pid, &local, 1, remote, (unsigned long)nr, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            /* gone, or its memory unmapped under a request (a QP or MR
             * torn down with work in flight): the connection ends */
            return errno == ESRCH || errno == EFAULT ? ECONNRESET : errno;
        }
        if (got == 0)
            return ECONNRESET;
        d += got;
        off += (uint64_t)got;
        len -= (size_t)got;
    }
    return 0;
}
