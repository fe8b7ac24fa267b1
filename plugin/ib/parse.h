/* plugin/ib/parse.h: the project's parsers of numbers given as text: the
 * plugin's RAILNET_* values (config.c), the tools' options (railnet-write-bw,
 * railnet-diag), the test drivers' (netdriver, gindriver, nccl_collectives)
 * and the benches' (failover_bench, conn_setup_bench). No dependencies.
 *
 * Each takes the whole string (trailing characters are an error) but for
 * parse_tenths_prefix, rejects a value out of its range and leaves *out
 * alone on error; 0 or -1. */
#ifndef RAILNET_IB_PARSE_H
#define RAILNET_IB_PARSE_H

/* A decimal or 0x hexadecimal integer; leading zeros stay decimal ("010"
 * is ten: a port or an index, never octal). */
int parse_int(const char *s, long long lo, long long hi, long long *out);

/* A decimal byte count with an optional binary suffix: K, M or G, each
 * also as Ki/KiB/KB (1K = 1024), case-insensitive: "4096", "64K", "8MiB". */
int parse_size(const char *s, long long lo, long long hi, long long *out);

/* Any 64-bit unsigned value, decimal or 0x hexadecimal; a minus
 * sign is refused (strtoull would wrap it). */
int parse_u64(const char *s, unsigned long long *out);

/* A decimal (strtod: "0.5", "1e9") at least lo; NaN is refused. */
int parse_real(const char *s, double lo, double *out);

/* The decimal that starts s, in tenths, whatever the locale (sysfs's
 * "16.0 GT/s PCIe" -> 160, "2.5 Gb/sec" -> 25, "400" -> 4000; digits past
 * the first decimal are read and dropped), at most hi tenths; *end (may be
 * NULL) points past it. */
int parse_tenths_prefix(const char *s, unsigned long long hi, unsigned long long *out, const char **end);

#endif
