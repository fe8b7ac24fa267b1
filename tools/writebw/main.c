/* tools/writebw/main.c: railnet-write-bw: options, the TCP rendezvous, the
 * HELLO check, then the chosen mode. Exit status: 0 success, 1 the test
 * failed (device, peer, completion), 2 usage. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/json.h"
#include "../common/strfmt.h"
#include "modes.h"
#include "opts.h"
#include "session.h"
#include "tcp.h"

static int rendezvous(const struct wb_opts *o, struct session *s, char *peer, size_t peerlen,
                      char *err, size_t errlen)
{
    if (o->server) {
        str_fmt(peer, peerlen, "%s", o->server);
        s->fd = tcp_connect(o->server, o->tcp_port, o->timeout, err, errlen);
        return s->fd < 0 ? -1 : 0;
    }
    int port = 0;
    int lfd = tcp_listen(o->tcp_port, &port, err, errlen);
    if (lfd < 0)
        return -1;
    /* On stderr even with --json: with -p 0 this line is how a script
     * learns the port the kernel picked. */
    fprintf(stderr, "railnet-write-bw: waiting for a client on TCP port %d\n", port);
    /* A server waits for its client as long as it takes (like perftest). */
    s->fd = tcp_accept_one(lfd, 0, peer, peerlen, err, errlen);
    close(lfd);
    return s->fd < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    /* Large (message buffers), so not on the stack. */
    static struct wb_opts o;
    static struct out_report rep;
    int p = wb_opts_parse(argc, argv, &o);
    if (p)
        return p > 0 ? 0 : 2;
    /* A dead peer shows up as an error on the socket, not as SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);

    static struct session s;
    s = (struct session){ .o = &o, .fd = -1, .is_server = o.server == NULL, .rep = &rep };
    rep.o = &o;
    rep.role = s.is_server ? "server" : "client";
    char err[2048];
    /* what can fail locally fails before a server waits for its client */
    int rc = o.gpu_initiated ? 0
             : o.mode == WB_MODE_PLUGIN ? mode_plugin_check(&o, err, sizeof(err))
                                        : mode_verbs_check(&o, err, sizeof(err));
    if (!rc)
        rc = rendezvous(&o, &s, rep.peer, sizeof(rep.peer), err, sizeof(err));
    if (!rc)
        rc = session_hello(&s, err, sizeof(err));
    if (!rc)
        rc = o.gpu_initiated ? mode_gpu_initiated_run(&s, err, sizeof(err))
             : o.mode == WB_MODE_PLUGIN ? mode_plugin_run(&s, err, sizeof(err))
                                        : mode_verbs_run(&s, err, sizeof(err));
    if (s.fd >= 0)
        close(s.fd);
    if (rc) {
        fprintf(stderr, "railnet-write-bw (%s): %s\n", rep.role, err);
        if (o.json) {
            /* A machine reader gets a document on failure too. */
            printf("{\"tool\": \"railnet-write-bw\", \"role\": \"%s\", \"error\": ", rep.role);
            json_str(stdout, err);
            printf("}\n");
        }
        return 1;
    }
    out_finish(&rep);
    return 0;
}
