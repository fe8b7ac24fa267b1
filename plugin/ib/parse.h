/* plugin/ib/parse.h: the project's parsers of numbers given as text: the
 * plugin's RAILNET_* values (config.c), the tools' options (railnet-write-bw,
 * railnet-diag), the test drivers' (netdriver, gindriver, nccl_collectives)
 * and the benches' (failover_bench, conn_setup_bench). No dependencies.
 *
 * Both take the whole string (trailing characters are an error), reject a
 * value outside [lo, hi] and leave *out alone on error; they return 0 or -1. */
#ifndef RAILNET_IB_PARSE_H
#define RAILNET_IB_PARSE_H

/* A decimal, 0x hexadecimal or 0 octal integer. */
int parse_int(const char *s, long long lo, long long hi, long long *out);

/* A decimal byte count with an optional binary suffix: K, M or G, each
 * also as Ki/KiB/KB (1K = 1024), case-insensitive: "4096", "64K", "8MiB". */
int parse_size(const char *s, long long lo, long long hi, long long *out);

#endif
