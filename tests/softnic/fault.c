/* fault.c: faults injected on purpose into unmodified programs.
 *   down_after_bytes=N (port key): the port goes DOWN once N bytes left it;
 *   down_after_ms=N (port key): the port goes DOWN N ms after start;
 *   ack_delay_us=N (port key): the completer acts on each ACK N us late
 *     (completer.c), as a NIC that coalesces ACKs: send completions lag
 *     behind data that already arrived;
 *   SOFTNIC_CTL_FILE=<path>: a file polled every 50 ms by the NIC threads;
 *     each line "<device> <port> up|down" sets that port's state (the file
 *     is re-read whenever its modification time or size changes).
 * A port going DOWN raises IBV_EVENT_PORT_ERR on every open context; its
 * QPs stop moving data, so their outstanding WQEs end with
 * IBV_WC_RETRY_EXC_ERR after the retry budget.  Test programs can do the
 * same through softnic_ctl.h. */
#include "softnic.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

void fault_tx_bytes(struct sn_device *d, struct sn_port *p, uint64_t bytes)
{
    (void)bytes;
    if (p->conf.down_after_bytes && atomic_load(&p->cnt.tx_bytes) >= p->conf.down_after_bytes &&
        atomic_load(&p->state) == IBV_PORT_ACTIVE) {
        p->conf.down_after_bytes = 0;   /* fires once */
        device_port_set_state(d, p->num, false);
    }
}

static void fault_ctl_file(struct softnic *s)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static struct timespec seen_mtime;
    static off_t seen_size = -1;
    struct stat st;
    if (stat(s->conf.ctl_file, &st))
        return;
    pthread_mutex_lock(&lock);
    if (st.st_mtim.tv_sec == seen_mtime.tv_sec && st.st_mtim.tv_nsec == seen_mtime.tv_nsec &&
        st.st_size == seen_size) {
        pthread_mutex_unlock(&lock);
        return;
    }
    seen_mtime = st.st_mtim;
    seen_size = st.st_size;
    FILE *f = fopen(s->conf.ctl_file, "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f)) {
        char dev[64], what[16];
        int port;
        if (sscanf(line, "%63s %d %15s", dev, &port, what) != 3)
            continue;
        for (int i = 0; i < s->ndevs; i++)
            if (!strcmp(s->dev[i].ibdev.name, dev))
                device_port_set_state(&s->dev[i], port, !strcmp(what, "up"));
    }
    if (f)
        fclose(f);
    pthread_mutex_unlock(&lock);
}

void fault_poll(void)
{
    static _Atomic uint64_t last_ns;
    struct softnic *s = softnic_global();
    uint64_t now = sn_now_ns();
    uint64_t last = atomic_load(&last_ns);
    if (now - last < 50000000ull || !atomic_compare_exchange_strong(&last_ns, &last, now))
        return;
    for (int i = 0; i < s->ndevs; i++)
        for (int p = 0; p < s->dev[i].nports; p++) {
            struct sn_port *port = &s->dev[i].port[p];
            if (port->conf.down_after_ms &&
                now - port->up_since_ns >= (uint64_t)port->conf.down_after_ms * 1000000ull) {
                port->conf.down_after_ms = 0;
                device_port_set_state(&s->dev[i], port->num, false);
            }
        }
    if (s->conf.ctl_file[0])
        fault_ctl_file(s);
}
