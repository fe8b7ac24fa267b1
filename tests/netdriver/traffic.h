/* tests/netdriver/traffic.h: the traffic-generating subcommands of the
 * driver (each takes the subcommand's argv, argv[0] being its name, and
 * returns the process exit status). */
#ifndef RAILNET_NETDRIVER_TRAFFIC_H
#define RAILNET_NETDRIVER_TRAFFIC_H

int nd_cmd_traffic(int argc, char **argv); /* NCCL-proxy-like multi-rank traffic, verified */
int nd_cmd_bw(int argc, char **argv);      /* one-way bandwidth table */
int nd_cmd_lat(int argc, char **argv);     /* 8 B ping-pong latency */

#endif
