/* tools/common/fdio.h: whole-buffer reads and writes on a descriptor
 * (pipes and sockets between a program and the processes it starts). */
#ifndef RAILNET_TOOLS_FDIO_H
#define RAILNET_TOOLS_FDIO_H

#include <stddef.h>

/* All len bytes, retrying short transfers and EINTR: 0, or -1 on an error
 * or end of file before the last byte. */
int fd_write_all(int fd, const void *buf, size_t len);
int fd_read_all(int fd, void *buf, size_t len);

#endif
