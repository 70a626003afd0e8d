/* What installing the process capability's seccomp filter costs a child, timed inside it.

       gcc -O2 host/benches/ab/seccomp_install.c -o /tmp/seccomp_install
       /tmp/seccomp_install 1 2000   # with the filter
       /tmp/seccomp_install 0 2000   # the same child without it

   Each round `vfork`s a child that sets `no_new_privs`, then times (CLOCK_MONOTONIC) only the
   `prctl(PR_SET_SECCOMP)` of the same 9-instruction filter as `keep_in_group` in
   host/src/caps/process/confine.rs, sends the time back through a pipe and exits. Prints the
   median and the 90th percentile of the rounds. */
#define _GNU_SOURCE
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct sock_filter filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 38),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 3, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setsid, 2, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setpgid, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1),
};

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s 0|1 ROUNDS\n", argv[0]);
        return 2;
    }
    int with_filter = atoi(argv[1]);
    int rounds = atoi(argv[2]);
    if (rounds < 1) {
        fprintf(stderr, "ROUNDS must be at least 1\n");
        return 2;
    }
    double *took = malloc(sizeof(double) * rounds);
    if (!took) return 1;
    for (int i = 0; i < rounds; i++) {
        int pipe_fds[2];
        if (pipe(pipe_fds) != 0) return 1;
        pid_t pid = vfork();
        if (pid == 0) {
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            double start = now_us();
            if (with_filter) {
                struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};
                if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) _exit(1);
            }
            double elapsed = now_us() - start;
            if (write(pipe_fds[1], &elapsed, sizeof elapsed) != sizeof elapsed) _exit(1);
            _exit(0);
        }
        if (pid < 0 || read(pipe_fds[0], &took[i], sizeof took[i]) != sizeof took[i]) return 1;
        waitpid(pid, NULL, 0);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
    }
    qsort(took, rounds, sizeof(double), by_value);
    printf("%s: median %.2f us, p90 %.2f us (%d rounds)\n",
           with_filter ? "filter installed" : "no filter", took[rounds / 2], took[rounds * 9 / 10],
           rounds);
    free(took);
    return 0;
}
