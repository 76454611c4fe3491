/* Start-up time of an MPI job as its ranks see it: from the launch
 * (FMTEST_T0, nanoseconds since the epoch, set just before the launcher
 * starts) to after MPI_Init and one MPI_Barrier. Each rank prints
 * "startup-ms <rank> <ms> on <host>", as fastmsg's rank program in
 * tests/two_nodes.rs does. Built and run by scripts/two-nodes.sh. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *t0s = getenv("FMTEST_T0");
    long double t0 = t0s ? strtold(t0s, NULL) : 0;
    int rank;
    char host[256] = "";
    MPI_Init(&argc, &argv);
    MPI_Barrier(MPI_COMM_WORLD);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long double ns = (long double)now.tv_sec * 1e9L + now.tv_nsec;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    gethostname(host, sizeof host - 1);
    printf("startup-ms %d %.1Lf on %s\n", rank, (ns - t0) / 1e6L, host);
    MPI_Finalize();
    return 0;
}
