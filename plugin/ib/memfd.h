/* plugin/ib/memfd.h: memfd_create as railnet and softnic call it.
 *
 * rn_memfd_create asks for MFD_NOEXEC_SEAL with flags (Linux 6.3-6.5 with
 * vm.memfd_noexec=2 refuse a memfd without it) and, where the kernel does
 * not know the flag (before 6.3: EINVAL), again without it. An fd, or -1
 * with errno set. */
#ifndef RAILNET_IB_MEMFD_H
#define RAILNET_IB_MEMFD_H

#include <errno.h>
#include <sys/mman.h>

/* include/uapi/linux/memfd.h, Linux 6.3 */
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

static inline int rn_memfd_create(const char *name, unsigned flags)
{
    int fd = memfd_create(name, flags | MFD_NOEXEC_SEAL);
    return fd < 0 && errno == EINVAL ? memfd_create(name, flags) : fd;
}

#endif
