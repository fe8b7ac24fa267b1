/* tests/plugin/test_conn_oob.c: the non-blocking TCP bootstrap. Every wait
 * is a bounded loop of non-blocking calls, as connect/accept drive it. */
#include "../tap.h"
#include "plugin/ib/oob.h"

#include <time.h>
#include <unistd.h>

#define SPIN_LIMIT 2000000

struct pair { int lfd, cfd, afd; uint16_t port; };

static void pair_open(struct pair *p)
{
    char err[OOB_ERR_LEN] = "";
    struct oob_addr at = { .family = 4, .addr = { 127, 0, 0, 1 } };
    EXPECT_EQ_INT(OOB_DONE, oob_listen(&at, &p->lfd, err));
    p->port = at.port;
    EXPECT_TRUE(p->port != 0);
    struct oob_addr to = { .family = 4, .addr = { 127, 0, 0, 1 }, .port = p->port };
    EXPECT_EQ_INT(OOB_DONE, oob_connect_start(&to, &p->cfd, err));
    int c = OOB_AGAIN, a = OOB_AGAIN;
    p->afd = -1;
    for (long i = 0; i < SPIN_LIMIT && (c == OOB_AGAIN || a == OOB_AGAIN); i++) {
        if (c == OOB_AGAIN)
            c = oob_connect_poll(p->cfd, err);
        if (a == OOB_AGAIN)
            a = oob_accept(p->lfd, &p->afd, err);
        if (i > 1000)
            usleep(100);
    }
    EXPECT_EQ_INT(OOB_DONE, c);
    EXPECT_EQ_INT(OOB_DONE, a);
    EXPECT_TRUE(p->afd >= 0);
}

TAP_CASE(test_conn_oob_message_roundtrip)
{
    struct pair p;
    pair_open(&p);
    char err[OOB_ERR_LEN] = "";
    uint8_t msg[HS_MSG_MAX];
    size_t len = hs_ready_encode(HS_VERSION, msg, sizeof(msg));
    struct oob_tx tx;
    struct oob_rx rx;
    oob_tx_init(&tx, msg, len);
    oob_rx_init(&rx);
    int t = OOB_AGAIN, r = OOB_AGAIN;
    for (long i = 0; i < SPIN_LIMIT && (t == OOB_AGAIN || r == OOB_AGAIN); i++) {
        if (t == OOB_AGAIN)
            t = oob_tx_progress(p.cfd, &tx, err);
        if (r == OOB_AGAIN)
            r = oob_rx_progress(p.afd, &rx, err);
    }
    EXPECT_EQ_INT(OOB_DONE, t);
    EXPECT_EQ_INT(OOB_DONE, r);
    EXPECT_EQ_INT(HS_READY, rx.type);
    EXPECT_EQ_INT(len, rx.off);
    EXPECT_EQ_INT(HS_OK, hs_ready_parse(rx.buf, rx.off, err));
}

TAP_CASE(test_conn_oob_rx_without_data_returns_again)
{
    struct pair p;
    pair_open(&p);
    char err[OOB_ERR_LEN] = "";
    struct oob_rx rx;
    oob_rx_init(&rx);
    EXPECT_EQ_INT(OOB_AGAIN, oob_rx_progress(p.afd, &rx, err));
}

TAP_CASE(test_conn_oob_garbage_header_is_error)
{
    struct pair p;
    pair_open(&p);
    char err[OOB_ERR_LEN] = "";
    const char junk[HS_HEADER_SIZE] = "GET / HTTP/1.0\r";
    EXPECT_EQ_INT((ssize_t)sizeof(junk), write(p.cfd, junk, sizeof(junk)));
    struct oob_rx rx;
    oob_rx_init(&rx);
    int r = OOB_AGAIN;
    for (long i = 0; i < SPIN_LIMIT && r == OOB_AGAIN; i++)
        r = oob_rx_progress(p.afd, &rx, err);
    EXPECT_EQ_INT(OOB_ERROR, r);
    EXPECT_TRUE(strstr(err, "magic") != NULL);
}

TAP_CASE(test_conn_oob_eof_mid_message_is_error)
{
    struct pair p;
    pair_open(&p);
    char err[OOB_ERR_LEN] = "";
    uint8_t msg[HS_MSG_MAX];
    size_t len = hs_ready_encode(HS_VERSION, msg, sizeof(msg));
    EXPECT_EQ_INT((ssize_t)len - 2, write(p.cfd, msg, len - 2));
    close(p.cfd);
    struct oob_rx rx;
    oob_rx_init(&rx);
    int r = OOB_AGAIN;
    for (long i = 0; i < SPIN_LIMIT && r == OOB_AGAIN; i++)
        r = oob_rx_progress(p.afd, &rx, err);
    EXPECT_EQ_INT(OOB_ERROR, r);
    EXPECT_TRUE(strstr(err, "closed") != NULL);
}

TAP_CASE(test_conn_oob_peer_alive_until_closed)
{
    struct pair p;
    pair_open(&p);
    EXPECT_EQ_INT(1, oob_peer_alive(p.afd));
    close(p.cfd);
    int alive = 1;
    for (long i = 0; i < 20000 && alive; i++) {
        alive = oob_peer_alive(p.afd);
        if (alive)
            usleep(100);
    }
    EXPECT_EQ_INT(0, alive);
}

TAP_CASE(test_conn_oob_listens_only_on_the_given_address)
{
    char err[OOB_ERR_LEN] = "";
    int lfd, fd;
    struct oob_addr at = { .family = 4, .addr = { 127, 0, 0, 1 } };
    EXPECT_EQ_INT(OOB_DONE, oob_listen(&at, &lfd, err));
    /* 127.0.0.2 is loopback too, but not the address the listener was given */
    struct oob_addr other = { .family = 4, .addr = { 127, 0, 0, 2 }, .port = at.port };
    int r = oob_connect_start(&other, &fd, err);
    for (long i = 0; i < SPIN_LIMIT && r == OOB_DONE; i++) {
        r = oob_connect_poll(fd, err);
        if (r == OOB_AGAIN)
            r = OOB_DONE, usleep(100);
        else if (r == OOB_DONE)
            break;
    }
    EXPECT_EQ_INT(OOB_ERROR, r);
    close(lfd);
}

TAP_CASE(test_conn_oob_connect_to_closed_port_fails)
{
    char err[OOB_ERR_LEN] = "";
    int lfd, fd;
    struct oob_addr at = { .family = 4, .addr = { 127, 0, 0, 1 } };
    EXPECT_EQ_INT(OOB_DONE, oob_listen(&at, &lfd, err));
    uint16_t port = at.port;
    close(lfd); /* nobody listens there any more */
    struct oob_addr to = { .family = 4, .addr = { 127, 0, 0, 1 }, .port = port };
    int r = oob_connect_start(&to, &fd, err);
    for (long i = 0; i < SPIN_LIMIT && r == OOB_DONE; i++) {
        r = oob_connect_poll(fd, err);
        if (r == OOB_DONE)
            break;
        if (r == OOB_AGAIN)
            r = OOB_DONE, usleep(100);
    }
    EXPECT_EQ_INT(OOB_ERROR, r);
    EXPECT_TRUE(strstr(err, "refused") != NULL);
}

TAP_CASE(test_conn_oob_default_addr_is_ipv4)
{
    struct oob_addr a;
    oob_default_addr(&a);
    EXPECT_EQ_INT(4, a.family);
    EXPECT_TRUE(a.addr[0] != 0);
}

int main(int argc, char **argv) { return tap_run(argc, argv); }
