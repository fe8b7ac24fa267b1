#!/bin/sh
# tests/plugin/traffic_matrix_cm.sh: tests/plugin/traffic_matrix.sh with
# RAILNET_CM=rdmacm: every connection of the matrix (QPs per connection x
# merged/unmerged ports x grouped receives, 8 ranks, sizes to 64 MiB, late
# ACKs) is set up through softnic's RDMA CM; the data path is the same.
export RAILNET_CM=rdmacm
. "${top_srcdir:-$(dirname "$0")/../..}/tests/plugin/traffic_matrix.sh"
