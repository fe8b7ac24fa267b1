/* tests/proc_self.h: what this process holds, from /proc/self, for tests
 * that check a path leaks no file descriptor or thread. */
#ifndef RAILNET_TESTS_PROC_SELF_H
#define RAILNET_TESTS_PROC_SELF_H

/* Open file descriptors (the count's own directory fd not included). */
int proc_self_fds(void);
/* Threads of this process. */
int proc_self_threads(void);
/* The first open file descriptor whose target (its /proc/self/fd link)
 * starts with prefix, or -1. */
int proc_self_fd_to(const char *prefix);

#endif
