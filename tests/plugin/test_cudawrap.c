/* tests/plugin/test_cudawrap.c: the one CUDA driver seam (plugin/ib/cudawrap.h).
 *
 * Here (no GPU, no driver) the seam must give one stable answer that says
 * why CUDA is not usable; on a GPU host it must give a full table. Against
 * NVIDIA's stub libcuda (the toolkit's lib64/stubs: every entry point
 * exported, cuInit failing) it must resolve every required entry point and
 * stop at cuInit: that is the lookup path (cuGetProcAddress_v2, then dlsym)
 * running against a real libcuda ABI. The seam loads once per process, so
 * that case runs this program again (--answer) in a child. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin/ib/cudawrap.h"
#include "tests/tap.h"

static int known_answer(const char *why)
{
    return !strncmp(why, "no CUDA driver (libcuda.so.1: ", 30) || !strncmp(why, "libcuda.so.1 lacks ", 19) ||
           !strncmp(why, "cuInit failed: ", 15);
}

TAP_CASE(test_cudawrap_answer_is_loaded_once_and_stable)
{
    char why1[256] = "", why2[256] = "";
    const struct cudawrap *a = cudawrap_get(why1, sizeof(why1));
    const struct cudawrap *b = cudawrap_get(why2, sizeof(why2));
    EXPECT_TRUE(a == b);
    EXPECT_TRUE(cudawrap_peek() == a);
    if (a) {
        /* a GPU host: the table is whole */
        EXPECT_TRUE(a->driver_version >= 12000 || !a->via_proc_address);
        EXPECT_TRUE(a->init && a->mem_alloc && a->memcpy_dtoh_async && a->primary_ctx_release);
        tap_diag("driver %d, entry points via %s", a->driver_version,
                 a->via_proc_address ? "cuGetProcAddress_v2" : "dlsym");
        return;
    }
    tap_diag("CUDA not usable here: %s", why1);
    EXPECT_TRUE(known_answer(why1));
    EXPECT_STREQ(why1, why2);
    EXPECT_STREQ("unknown CUDA error", cudawrap_error_string(1));
}

TAP_CASE(test_cudawrap_stub_driver_resolves_every_entry_point_then_cuinit_fails)
{
    char stub[512];
    snprintf(stub, sizeof(stub), "%s/lib64/stubs/libcuda.so", CUDA_HOME_DIR);
    if (!CUDA_HOME_DIR[0] || access(stub, R_OK))
        TAP_SKIP("no CUDA toolkit stub libcuda.so (configure found no CUDA)");
    char dir[] = "/tmp/test_cudawrap.XXXXXX";
    EXPECT_TRUE(mkdtemp(dir) != NULL);
    char link[600];
    snprintf(link, sizeof(link), "%s/libcuda.so.1", dir);
    EXPECT_EQ_INT(0, symlink(stub, link));
    int fds[2];
    EXPECT_EQ_INT(0, pipe(fds));
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        setenv("LD_LIBRARY_PATH", dir, 1);
        char self[512];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        self[n > 0 ? n : 0] = 0;
        execl(self, self, "--answer", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char out[512] = "";
    size_t got = 0;
    ssize_t r;
    while ((r = read(fds[0], out + got, sizeof(out) - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = 0;
    int st = 0;
    waitpid(pid, &st, 0);
    unlink(link);
    rmdir(dir);
    tap_diag("stub driver: %s", out);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    EXPECT_TRUE(strstr(out, "cuInit failed: ") != NULL);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--answer")) {
        char why[256] = "";
        const struct cudawrap *t = cudawrap_get(why, sizeof(why));
        printf("%s\n", t ? "usable" : why);
        return 0;
    }
    return tap_run(argc, argv);
}
