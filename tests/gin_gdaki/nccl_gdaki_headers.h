/* tests/gin_gdaki/nccl_gdaki_headers.h: NCCL 2.28.9's GDAKI device headers
 * (CUDA 13's nccl_device/gin/gdaki), which the C++ tests compare railnet's
 * images with. Defines HAVE_NCCL_GDAKI_HEADERS and includes them when they
 * are installed; a test without them skips. */
#ifndef RAILNET_TESTS_NCCL_GDAKI_HEADERS_H
#define RAILNET_TESTS_NCCL_GDAKI_HEADERS_H

#if defined(__has_include)
#if __has_include(<nccl_device/gin/gdaki/gin_gdaki_device_host_common.h>) && \
    __has_include(<nccl_device/gin/gdaki/doca_gpunetio/common/doca_gpunetio_verbs_dev.h>)
#define HAVE_NCCL_GDAKI_HEADERS 1
#include <nccl_device/gin/gdaki/doca_gpunetio/common/doca_gpunetio_verbs_dev.h>
#include <nccl_device/gin/gdaki/gin_gdaki_device_host_common.h>
#endif
#endif

#endif
