/* Open MPI's point-to-point and collective figures, for comparison with
 * fastmsg's `pingpong` and `collectives` examples.
 *
 *   mpirun -np 2 bench_mpi lat|bw|all [runs]
 *   mpirun -np N bench_mpi coll [runs] [iters]
 *
 * lat:  ping-pong between ranks 0 and 1 with MPI_Send/MPI_Recv; one-way
 *       latency = round trip / 2. Sizes 0 B to 1 MiB; up to 4 KiB 10,000
 *       round trips after 100 unmeasured ones, 64 KiB 1,000 after 10,
 *       1 MiB 200 after 10.
 * bw:   windowed one-way bandwidth (the OSU bandwidth pattern): rank 0
 *       posts WINDOW MPI_Isend, rank 1 WINDOW MPI_Irecv, both wait for all,
 *       then rank 1 acknowledges with 4 bytes. MB/s = 1e6 B/s; at 0 B the
 *       figure is the message rate (million messages/s).
 * coll: MPI_Barrier, then MPI_Allreduce of one double (SUM), `iters` each
 *       (default 10,000) after 100 unmeasured; µs per operation = the
 *       slowest rank's mean. The allreduce's sum is checked.
 *
 * Each figure is measured `runs` times (default 5, at most 64); rank 0
 * prints the median and the runs. Exit status 1 when a check fails. */
#include "common.h"
#include <mpi.h>

#define WINDOW 64
#define MAX_SIZE (1 << 20)

static const int SIZES[] = {0, 8, 64, 1024, 4096, 65536, MAX_SIZE};
#define NSIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

static int me, nranks;

/* Round trips measured and unmeasured for a ping-pong of `size` bytes. */
static void lat_counts(int size, int *iters, int *warm) {
    *iters = size <= 4096 ? 10000 : size <= 65536 ? 1000 : 200;
    *warm = size <= 4096 ? 100 : 10;
}

/* Windows measured and unmeasured for the bandwidth of `size` bytes. */
static void bw_counts(int size, int *iters, int *warm) {
    *iters = size <= 4096 ? 1000 : size <= 65536 ? 200 : 20;
    *warm = size <= 65536 ? 10 : 2;
}

/* One ping-pong run: µs one-way. */
static double pingpong_once(char *buf, int size, int iters, int warm) {
    int peer = 1 - me;
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = -warm; i < iters; i++) {
        if (i == 0) start = MPI_Wtime();
        if (me == 0) {
            MPI_Send(buf, size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (me == 1) {
            MPI_Recv(buf, size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - start) * 1e6 / iters / 2.0;
}

static void latency(char *buf, int runs) {
    if (me == 0) printf("# ping-pong one-way latency (us) = RTT/2, MPI_Send/MPI_Recv\n");
    for (int s = 0; s < NSIZES; s++) {
        int iters, warm;
        double us[MAX_RUNS];
        lat_counts(SIZES[s], &iters, &warm);
        for (int r = 0; r < runs; r++) us[r] = pingpong_once(buf, SIZES[s], iters, warm);
        if (me == 0) {
            printf("lat size=%-8d iters=%-6d median_us=%.3f\n", SIZES[s], iters, median_of(us, runs));
            print_runs(us, runs, 3);
            fflush(stdout);
        }
    }
}

/* One bandwidth run: seconds for `iters` windows. */
static double window_once(char *buf, int size, int iters, int warm) {
    MPI_Request req[WINDOW];
    char ack[4] = {0};
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = -warm; i < iters; i++) {
        if (i == 0) start = MPI_Wtime();
        if (me == 0) {
            for (int w = 0; w < WINDOW; w++)
                MPI_Isend(buf + (size_t)w * size, size, MPI_CHAR, 1, 2, MPI_COMM_WORLD, &req[w]);
            MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
            MPI_Recv(ack, 4, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (me == 1) {
            for (int w = 0; w < WINDOW; w++)
                MPI_Irecv(buf + (size_t)w * size, size, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &req[w]);
            MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
            MPI_Send(ack, 4, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - start;
}

static void bandwidth(char *buf, int runs) {
    if (me == 0) printf("# windowed bandwidth, %d MPI_Isend in flight, MB/s (1e6 B/s)\n", WINDOW);
    for (int s = 0; s < NSIZES; s++) {
        int size = SIZES[s], iters, warm;
        double fig[MAX_RUNS];
        bw_counts(size, &iters, &warm);
        for (int r = 0; r < runs; r++) {
            double msgs = (double)WINDOW * iters, secs = window_once(buf, size, iters, warm);
            fig[r] = (size ? msgs * size : msgs) / secs / 1e6;
        }
        if (me != 0) continue;
        double m = median_of(fig, runs);
        if (size)
            printf("bw  size=%-8d MB/s median=%.1f  (Mmsg/s %.3f)\n", size, m, m / size);
        else
            printf("bw  size=0        Mmsg/s median=%.3f\n", m);
        print_runs(fig, runs, size ? 1 : 3);
        fflush(stdout);
    }
}

/* The slowest rank's mean µs per call of `op` over `iters` calls. */
static double slowest_mean_us(void (*op)(double *), double *acc, int iters) {
    const int warm = 100;
    double start = 0, mine, worst;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = -warm; i < iters; i++) {
        if (i == 0) start = MPI_Wtime();
        op(acc);
    }
    mine = (MPI_Wtime() - start) * 1e6 / iters;
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

static void do_barrier(double *acc) {
    (void)acc;
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Sums rank + 1 over all ranks into *acc. */
static void do_allreduce(double *acc) {
    double mine = me + 1.0;
    MPI_Allreduce(&mine, acc, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

static int collectives(int runs, int iters) {
    double bar[MAX_RUNS], red[MAX_RUNS], sum = 0, want = nranks * (nranks + 1) / 2.0;
    int wrong = 0;
    for (int r = 0; r < runs; r++) {
        bar[r] = slowest_mean_us(do_barrier, &sum, iters);
        sum = 0;
        red[r] = slowest_mean_us(do_allreduce, &sum, iters);
        wrong |= sum != want;
    }
    if (wrong) fprintf(stderr, "rank %d: allreduce gave %f, not %f\n", me, sum, want);
    if (me == 0) {
        printf("barrier   np=%d iters=%d median_us=%.3f\n", nranks, iters, median_of(bar, runs));
        print_runs(bar, runs, 3);
        printf("allreduce np=%d iters=%d (1 double SUM) median_us=%.3f\n", nranks, iters,
               median_of(red, runs));
        print_runs(red, runs, 3);
        fflush(stdout);
    }
    return wrong;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *mode = argc > 1 ? argv[1] : "all";
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    int iters = argc > 3 ? atoi(argv[3]) : 10000;
    int all = !strcmp(mode, "all"), lat = all || !strcmp(mode, "lat"), bw = all || !strcmp(mode, "bw");
    int coll = all || !strcmp(mode, "coll");
    if (!(lat || bw || coll) || runs < 1 || iters < 1) {
        if (me == 0) fprintf(stderr, "usage: mpirun -np N %s lat|bw|coll|all [runs 1..64] [coll iters]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    if (runs > MAX_RUNS) runs = MAX_RUNS;
    if ((lat || bw) && nranks < 2) {
        if (me == 0) fprintf(stderr, "%s %s needs 2 ranks\n", argv[0], mode);
        MPI_Finalize();
        return 2;
    }
    double t0 = MPI_Wtime();
    if (me == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(lib, &len);
        lib[strcspn(lib, "\n")] = '\0';
        printf("# library: %s\n# np=%d mode=%s runs=%d\n", lib, nranks, mode, runs);
    }
    char *buf = NULL;
    if (lat || bw) {
        buf = malloc((size_t)WINDOW * MAX_SIZE);
        if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
        memset(buf, 7, (size_t)WINDOW * MAX_SIZE);
    }
    int failed = 0;
    if (lat) latency(buf, runs);
    if (bw) bandwidth(buf, runs);
    if (coll) failed |= collectives(runs, iters);
    if (me == 0) printf("# total wall time %.1f s\n", MPI_Wtime() - t0);
    free(buf);
    MPI_Finalize();
    return failed;
}
