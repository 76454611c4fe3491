/* Bale histogram over MPI, aggregated in the "exstack" style: each rank
 * keeps one buffer of `--batch` updates per destination; a round draws
 * updates into the buffers until one is full or the rank has drawn all of
 * its updates, then every rank tells every other how many updates it sends
 * and whether it is done (MPI_Alltoall), the updates travel in one
 * MPI_Alltoallv, and each rank applies what it received. Rounds go on
 * until every rank is done.
 *
 *   mpirun -np N histo_mpi [--log-table 20] [--log-updates 22] [--batch 2048] [--reps 1]
 *
 * The table has 2^log-table counters in blocks over the ranks; each rank
 * makes 2^log-updates increments drawn from its splitmix64 stream (salt 1,
 * as fastmsg's `histo` example). After each repetition every counter is
 * checked against a recount of all ranks' streams; rank 0 prints one line
 * with the rate (all updates / the slowest rank's time) and OK or FAILED,
 * and the exit status is 1 when a check failed. */
#include "bale_mpi.h"

int main(int argc, char **argv) {
    int me, n;
    struct int_option opt[] = {
        {"--log-table", 20, 1, 32}, {"--log-updates", 22, 0, 40}, {"--batch", 2048, 1, 1 << 24}, {"--reps", 1, 1, 1 << 20}};
    if (!bale_start(&argc, &argv, opt, 4, &me, &n)) return 2;
    int log_t = (int)opt[0].value, log_u = (int)opt[1].value, cap = (int)opt[2].value, reps = (int)opt[3].value;
    uint64_t tsize = 1ULL << log_t, updates = 1ULL << log_u, per, lo, hi;
    bale_block(tsize, n, me, &per, &lo, &hi);
    uint64_t *counts = checked_alloc((hi - lo + 1) * sizeof(uint64_t));
    uint64_t *expect = checked_alloc((hi - lo + 1) * sizeof(uint64_t));
    struct exstack x;
    exstack_init(&x, n, cap, sizeof(uint32_t)); /* local counter indices */
    int failed = 0;

    for (int rep = 0; rep < reps; rep++) {
        memset(counts, 0, (hi - lo) * sizeof(uint64_t));
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        uint64_t stream = bale_seed((uint32_t)me, 1), drawn = 0;
        int all_done = 0;
        while (!all_done) {
            while (drawn < updates) {
                uint64_t keep = stream, g = bale_next(&stream) & (tsize - 1);
                int d = (int)(g / per);
                uint32_t *slot = exstack_slot(&x, d);
                if (!slot) {
                    stream = keep; /* this update waits for the next round */
                    break;
                }
                *slot = (uint32_t)(g - per * d);
                drawn++;
            }
            int got = exstack_exchange(&x, drawn == updates, &all_done);
            const uint32_t *in = (const uint32_t *)x.in;
            for (int k = 0; k < got; k++) counts[in[k]]++;
        }
        double mine = MPI_Wtime() - start, worst;
        MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

        /* Recount this rank's block from every rank's stream. */
        memset(expect, 0, (hi - lo) * sizeof(uint64_t));
        for (int r = 0; r < n; r++) {
            uint64_t s = bale_seed((uint32_t)r, 1);
            for (uint64_t k = 0; k < updates; k++) {
                uint64_t g = bale_next(&s) & (tsize - 1);
                if (g >= lo && g < hi) expect[g - lo]++;
            }
        }
        uint64_t mine3[3] = {0, 0, 0}, all3[3]; /* sum, wrong counters, hash */
        for (uint64_t k = 0; k < hi - lo; k++) {
            mine3[0] += counts[k];
            mine3[1] += counts[k] != expect[k];
            mine3[2] += counts[k] * bale_value(lo + k);
        }
        MPI_Allreduce(mine3, all3, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        int ok = all3[0] == (uint64_t)n * updates && all3[1] == 0;
        failed |= !ok;
        if (me == 0)
            printf("histo-mpi ranks=%d table=2^%d updates/rank=2^%d batch=%d rep=%d time_s=%.4f "
                   "updates_per_s=%.4e sum=%llu bad_counters=%llu hash=%016llx %s\n",
                   n, log_t, log_u, cap, rep, worst, (double)n * updates / worst,
                   (unsigned long long)all3[0], (unsigned long long)all3[1], (unsigned long long)all3[2],
                   ok ? "OK" : "FAILED");
        fflush(stdout);
    }
    MPI_Finalize();
    return failed;
}
