/* tests/tools/test_writebw_units.c: railnet-write-bw's pieces that need no
 * NIC: the out-of-band message encoding (wire.c), the option rules (opts.c)
 * and the peak-bandwidth rule (bw.c). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tests/tap.h"
#include "tools/common/bw.h"
#include "tools/writebw/opts.h"
#include "tools/writebw/wire.h"

/* The option rules of --gpu-initiated as a build with nvcc applies them
 * (this test links neither gpu_initiated.c nor gpu_initiated_none.c; the
 * "not built" refusal is test_write_bw_errors.sh's, in such a build). */
const int wb_gpu_initiated_built = 1;

static struct wb_hello sample_hello(void)
{
    struct wb_hello h = { .magic = WB_MAGIC, .version = WB_VERSION, .mode = WB_MODE_VERBS,
                          .bidir = 1, .nsizes = 3, .nqp = 4, .iters = 1000, .duration = 0 };
    h.sizes[0] = 2;
    h.sizes[1] = 65536;
    h.sizes[2] = 8u << 20;
    return h;
}

TAP_CASE(test_wire_hello_roundtrip)
{
    struct wb_hello h = sample_hello(), back;
    uint8_t buf[1024];
    int n = wb_enc_hello(&h, buf, sizeof(buf));
    EXPECT_TRUE(n > 0);
    EXPECT_EQ_INT(0, wb_dec_hello(buf, (size_t)n, &back));
    EXPECT_EQ_INT(3, back.nsizes);
    EXPECT_EQ_U64(8u << 20, back.sizes[2]);
    EXPECT_EQ_INT(4, back.nqp);
    EXPECT_EQ_INT(1, back.bidir);
    EXPECT_EQ_U64(1000, back.iters);
}

TAP_CASE(test_wire_hello_is_little_endian_with_magic_first)
{
    struct wb_hello h = sample_hello();
    uint8_t buf[1024];
    EXPECT_TRUE(wb_enc_hello(&h, buf, sizeof(buf)) > 0);
    static const uint8_t magic[4] = { 'R', 'N', 'W', 'B' };
    EXPECT_MEMEQ(magic, buf, 4);
}

TAP_CASE(test_wire_hello_truncated_or_extended_rejected)
{
    struct wb_hello h = sample_hello(), back;
    uint8_t buf[1024];
    int n = wb_enc_hello(&h, buf, sizeof(buf));
    for (int len = 0; len < n; len++)
        EXPECT_EQ_INT(-1, wb_dec_hello(buf, (size_t)len, &back));
    EXPECT_EQ_INT(-1, wb_dec_hello(buf, (size_t)n + 1, &back));
}

TAP_CASE(test_wire_hello_bad_magic_version_or_counts_rejected)
{
    struct wb_hello h = sample_hello(), back;
    uint8_t buf[1024];
    int n = wb_enc_hello(&h, buf, sizeof(buf));
    buf[0] ^= 1;
    EXPECT_EQ_INT(-1, wb_dec_hello(buf, (size_t)n, &back));
    h.version = WB_VERSION + 1;
    n = wb_enc_hello(&h, buf, sizeof(buf));
    EXPECT_EQ_INT(-1, wb_dec_hello(buf, (size_t)n, &back));
    h = sample_hello();
    n = wb_enc_hello(&h, buf, sizeof(buf));
    buf[16] = 0xff; /* nsizes far above WB_MAX_SIZES */
    EXPECT_EQ_INT(-1, wb_dec_hello(buf, (size_t)n, &back));
}

TAP_CASE(test_wire_setup_roundtrip_and_qp_count_bounded)
{
    static struct wb_setup s, back;
    static uint8_t buf[65536];
    memset(&s, 0, sizeof(s));
    snprintf(s.side.device, sizeof(s.side.device), "mlx5_0");
    snprintf(s.side.memory, sizeof(s.side.memory), "cuda:1");
    snprintf(s.side.registration, sizeof(s.side.registration), "dmabuf");
    s.side.relaxed = 1;
    s.nqp = 3;
    for (int i = 0; i < 3; i++) {
        s.qp[i].qpn = 0x100 + (uint32_t)i;
        s.qp[i].psn = 0xabcdef;
        s.qp[i].port = (uint8_t)(1 + i % 2);
        s.qp[i].mtu = 5;
        s.qp[i].gid[15] = (uint8_t)i;
    }
    s.addr = 0x7f0000001000ull;
    s.rkey = 0x1234;
    int n = wb_enc_setup(&s, buf, sizeof(buf));
    EXPECT_TRUE(n > 0);
    EXPECT_EQ_INT(0, wb_dec_setup(buf, (size_t)n, &back));
    EXPECT_STREQ("cuda:1", back.side.memory);
    EXPECT_EQ_INT(3, back.nqp);
    EXPECT_EQ_INT(0x102, back.qp[2].qpn);
    EXPECT_EQ_INT(2, back.qp[1].port);
    EXPECT_EQ_INT(2, back.qp[2].gid[15]);
    EXPECT_EQ_U64(0x7f0000001000ull, back.addr);
    /* a QP count past the limit is refused, not trusted */
    s.nqp = 0;
    n = wb_enc_setup(&s, buf, sizeof(buf));
    EXPECT_EQ_INT(-1, wb_dec_setup(buf, (size_t)n, &back));
}

TAP_CASE(test_wire_side_strings_always_terminated)
{
    struct wb_side s, back;
    memset(&s, 'x', sizeof(s)); /* no terminators at all */
    s.relaxed = 0;
    uint8_t buf[512];
    int n = wb_enc_side(&s, buf, sizeof(buf));
    EXPECT_TRUE(n > 0);
    EXPECT_EQ_INT(0, wb_dec_side(buf, (size_t)n, &back));
    EXPECT_TRUE(strlen(back.device) < sizeof(back.device));
    EXPECT_TRUE(strlen(back.registration) < sizeof(back.registration));
}

TAP_CASE(test_hello_compare_names_what_differs)
{
    struct wb_hello a = sample_hello(), b = sample_hello();
    char err[256];
    EXPECT_EQ_INT(0, wb_hello_compare(&a, &b, err, sizeof(err)));
    b.nqp = 2;
    EXPECT_EQ_INT(-1, wb_hello_compare(&a, &b, err, sizeof(err)));
    EXPECT_TRUE(strstr(err, "server has 4 QPs") && strstr(err, "client 2"));
    b = sample_hello();
    b.mode = WB_MODE_PLUGIN;
    EXPECT_EQ_INT(-1, wb_hello_compare(&a, &b, err, sizeof(err)));
    EXPECT_TRUE(strstr(err, "--mode=verbs") && strstr(err, "--mode=plugin"));
}

TAP_CASE(test_wire_gi_setup_roundtrip_and_length_checked)
{
    struct wb_gi_setup s, back;
    memset(&s, 0, sizeof(s));
    snprintf(s.side.device, sizeof(s.side.device), "softnic0");
    snprintf(s.side.memory, sizeof(s.side.memory), "cuda:0");
    s.magic = 0x47514931u;
    s.qpn = 0x123456;
    s.psn = 0xabcdef;
    s.lid = 7;
    s.port = 1;
    s.mtu = 5;
    s.is_global = 1;
    for (int i = 0; i < 16; i++)
        s.gid[i] = (uint8_t)(0xf0 + i);
    s.addr = 0x7f0000200000ull;
    s.rkey = 0x1111;
    s.sig_addr = 0x7f0000400000ull;
    s.sig_rkey = 0x2222;
    uint8_t buf[512];
    int n = wb_enc_gi_setup(&s, buf, sizeof(buf));
    EXPECT_TRUE(n > 0);
    EXPECT_EQ_INT(0, wb_dec_gi_setup(buf, (size_t)n, &back));
    EXPECT_EQ_INT(0x123456, back.qpn);
    EXPECT_EQ_INT(0xabcdef, back.psn);
    EXPECT_EQ_INT(5, back.mtu);
    EXPECT_EQ_INT(1, back.is_global);
    EXPECT_MEMEQ(s.gid, back.gid, 16);
    EXPECT_EQ_U64(0x7f0000400000ull, back.sig_addr);
    EXPECT_EQ_INT(0x2222, back.sig_rkey);
    EXPECT_STREQ("cuda:0", back.side.memory);
    EXPECT_EQ_INT(-1, wb_dec_gi_setup(buf, (size_t)n - 1, &back));
    EXPECT_EQ_INT(-1, wb_dec_gi_setup(buf, (size_t)n + 1, &back));
}

TAP_CASE(test_wire_result_carries_latency)
{
    struct wb_result r = { .size = 4096, .iters = 100, .seconds = 0.5, .avg_bps = 1e9,
                           .peak_bps = 1e9, .msg_rate = 2e5, .lat_us = 3.25 }, back;
    uint8_t buf[128];
    int n = wb_enc_result(&r, buf, sizeof(buf));
    EXPECT_EQ_INT(56, n);
    EXPECT_EQ_INT(0, wb_dec_result(buf, (size_t)n, &back));
    EXPECT_TRUE(back.lat_us == 3.25);
    EXPECT_EQ_INT(-1, wb_dec_result(buf, 48, &back)); /* version 1's RESULT */
}

TAP_CASE(test_hello_compare_gpu_initiated_against_verbs)
{
    struct wb_hello a = sample_hello(), b = sample_hello();
    char err[256];
    b.mode = WB_HELLO_MODE_GPU_INITIATED;
    EXPECT_EQ_INT(-1, wb_hello_compare(&a, &b, err, sizeof(err)));
    EXPECT_TRUE(strstr(err, "server runs --mode=verbs, client --gpu-initiated") != NULL);
}

static int parse(struct wb_opts *o, const char *line)
{
    static char buf[512]; /* the options point into it */
    char *argv[32];
    int argc = 0;
    snprintf(buf, sizeof(buf), "railnet-write-bw %s", line);
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && argc < 31; t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    argv[argc] = NULL;
    extern int optind;
    optind = 0; /* getopt_long: full reinitialisation */
    FILE *saved = stderr;
    stderr = fopen("/dev/null", "w");
    int rc = wb_opts_parse(argc, argv, o);
    fclose(stderr);
    stderr = saved;
    return rc;
}

TAP_CASE(test_opts_all_sizes_are_powers_of_two_2B_to_8MiB)
{
    struct wb_opts o;
    EXPECT_EQ_INT(0, parse(&o, "-a host"));
    EXPECT_EQ_INT(23, o.nsizes);
    EXPECT_EQ_U64(2, o.sizes[0]);
    EXPECT_EQ_U64(8u << 20, o.sizes[22]);
    EXPECT_STREQ("host", o.server);
}

TAP_CASE(test_opts_ports_qps_cuda_and_suffixes)
{
    struct wb_opts o;
    EXPECT_EQ_INT(0, parse(&o, "--ports 2,1 -q 3 -s 64K --use_cuda=1 --peermem --no-relaxed-ordering"));
    EXPECT_EQ_INT(2, o.nports);
    EXPECT_EQ_INT(2, o.ports[0]);
    EXPECT_EQ_INT(3, o.qps);
    EXPECT_EQ_U64(65536, o.sizes[0]);
    EXPECT_EQ_INT(1, o.use_cuda);
    EXPECT_EQ_INT(1, o.gpu);
    EXPECT_EQ_INT(MEM_REG_PEERMEM, o.reg);
    EXPECT_EQ_INT(0, o.relaxed);
}

TAP_CASE(test_opts_refuses_bad_combinations)
{
    struct wb_opts o;
    EXPECT_EQ_INT(-1, parse(&o, "--dmabuf"));
    EXPECT_EQ_INT(-1, parse(&o, "--use_cuda --dmabuf --peermem"));
    EXPECT_EQ_INT(-1, parse(&o, "-a -s 4096"));
    EXPECT_EQ_INT(-1, parse(&o, "-D 1 -n 10"));
    EXPECT_EQ_INT(-1, parse(&o, "--ports 1,2,1"));
    EXPECT_EQ_INT(-1, parse(&o, "--mode=plugin --ports 1,2"));
    EXPECT_EQ_INT(-1, parse(&o, "-p 0 host"));
    EXPECT_EQ_INT(-1, parse(&o, "-s 2G"));
    EXPECT_EQ_INT(-1, parse(&o, "-s 0"));
    EXPECT_EQ_INT(-1, parse(&o, "-s 4Q"));
    EXPECT_EQ_INT(-1, parse(&o, "-s 1M2"));
}

/* -s reads the project's sizes (plugin/ib/parse.c), as RAILNET_* and the
 * drivers do: the KiB/MiB spellings too, 1 GiB at most */
TAP_CASE(test_opts_size_spellings)
{
    struct wb_opts o;
    EXPECT_EQ_INT(0, parse(&o, "-s 1MiB"));
    EXPECT_EQ_U64(1048576, o.sizes[0]);
    EXPECT_EQ_INT(0, parse(&o, "-s 8kb"));
    EXPECT_EQ_U64(8192, o.sizes[0]);
    EXPECT_EQ_INT(0, parse(&o, "-s 1G"));
    EXPECT_EQ_U64(1u << 30, o.sizes[0]);
}

TAP_CASE(test_opts_gpu_initiated_rules)
{
    struct wb_opts o;
    EXPECT_EQ_INT(0, parse(&o, "--gpu-initiated -n 10 -t 32"));
    EXPECT_EQ_INT(1, o.gpu_initiated);
    EXPECT_EQ_INT(1, o.use_cuda); /* GPU memory on both sides */
    EXPECT_EQ_INT(0, o.gpu);
    EXPECT_EQ_INT(0, parse(&o, "--gpu-initiated --use_cuda=2 --peermem"));
    EXPECT_EQ_INT(2, o.gpu);
    struct wb_hello h;
    wb_hello_from_opts(&o, &h);
    EXPECT_EQ_INT(WB_HELLO_MODE_GPU_INITIATED, h.mode);
    EXPECT_EQ_INT(0, h.nqp);
    EXPECT_EQ_INT(-1, parse(&o, "--gpu-initiated --bidir"));
    EXPECT_EQ_INT(-1, parse(&o, "--gpu-initiated --mode=plugin"));
    EXPECT_EQ_INT(-1, parse(&o, "--gpu-initiated -D 1"));
    EXPECT_EQ_INT(-1, parse(&o, "--gpu-initiated -q 2"));
    EXPECT_EQ_INT(-1, parse(&o, "--gpu-initiated --ports 1,2"));
    EXPECT_EQ_INT(-1, parse(&o, "--gpu-initiated --use_cuda --dmabuf"));
    EXPECT_EQ_INT(-1, parse(&o, "--gpu-initiated -t 8192"));
}

/* Samples of a steady run with one burst: the peak is at least the average
 * and never more than ten times it (a window spans a tenth of the time). */
TAP_CASE(test_peak_between_average_and_ten_times_it)
{
    struct bw_sample s[200];
    double t = 0;
    for (int i = 0; i < 200; i++) {
        t += (i == 100) ? 0.000001 : 0.01; /* a burst of completions at i=100 */
        s[i] = (struct bw_sample){ t, (long)(i + 1) * 16 };
    }
    double avg = (double)s[199].done * 4096 / s[199].t;
    double peak = bw_peak_bps(s, 200, 0, 4096);
    EXPECT_TRUE(peak >= avg * 0.999);
    EXPECT_TRUE(peak <= avg * 10.0);
    EXPECT_TRUE(bw_peak_bps(s, 0, 0, 4096) == 0);
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
