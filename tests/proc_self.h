/* tests/proc_self.h: what this process holds, from /proc/self, for tests
 * that check a path leaks no file descriptor or thread. */
#ifndef RAILNET_TESTS_PROC_SELF_H
#define RAILNET_TESTS_PROC_SELF_H

/* Open file descriptors (the count's own directory fd not included). */
int proc_self_fds(void);
/* Threads of this process. */
int proc_self_threads(void);

#endif
