/* Bale sparse-matrix transpose over MPI, aggregated in the "exstack"
 * style. A random square matrix of ranks * 2^log-rows rows with
 * `--nonzeros` distinct columns per row, rows in blocks over the ranks, is
 * transposed into the same distribution (row c of the transpose lives on
 * the rank that owns row c). Two phases, each in rounds: a round puts
 * items into one buffer of `--batch` per owner until one is full or the
 * rank has put all of its nonzeros, the counts and a done flag go out with
 * MPI_Alltoall and the items with one MPI_Alltoallv, and each owner
 * applies what it received; rounds go on until every rank is done. First
 * each nonzero (r, c) sends c's local index and the owner counts it; the
 * counts become offsets (a prefix sum per local column, MPI_Exscan of the
 * ranks' nonzeros for where a block starts); then each nonzero sends
 * (c, r) and the owner places r at the next free position of column c.
 *
 *   mpirun -np N transpose_mpi [--log-rows 16] [--nonzeros 16] [--batch 1024] [--reps 1]
 *
 * The matrix is drawn from each rank's splitmix64 stream (salt 4), as
 * fastmsg's `transpose` example does, so both print the same hash. Each
 * rank draws every rank's rows again and compares its block of the
 * transpose, column by column (entries sorted), with what arrived. Rank 0
 * prints one line with the rate (all nonzeros / the slowest rank's time)
 * and OK or FAILED; exit status 1 when a check failed. */
#include "bale_mpi.h"

struct entry {
    uint32_t col, row; /* the owner's local column, the global row */
};

/* rank's rows: `per` rows of `nz` distinct columns of `cols`, row after
 * row, into out[0 .. per*nz). */
static void rows_of(uint32_t rank, uint64_t per, int nz, uint64_t cols, uint32_t *out) {
    uint64_t s = bale_seed(rank, 4), k = 0;
    for (uint64_t r = 0; r < per; r++) {
        uint64_t row = k;
        while (k < row + (uint64_t)nz) {
            uint32_t c = (uint32_t)(bale_next(&s) % cols);
            int seen = 0;
            for (uint64_t j = row; j < k; j++) seen |= out[j] == c;
            if (!seen) out[k++] = c;
        }
    }
}

static int order_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int me, n;
    struct int_option opt[] = {
        {"--log-rows", 16, 0, 28}, {"--nonzeros", 16, 1, 1 << 16}, {"--batch", 1024, 1, 1 << 24}, {"--reps", 1, 1, 1 << 20}};
    if (!bale_start(&argc, &argv, opt, 4, &me, &n)) return 2;
    int log_r = (int)opt[0].value, nz = (int)opt[1].value, cap = (int)opt[2].value, reps = (int)opt[3].value;
    uint64_t per = 1ULL << log_r, nr = per * (uint64_t)n, first = per * (uint64_t)me, mine_nz = per * (uint64_t)nz;
    if (nr > UINT32_MAX || (uint64_t)nz > nr) {
        if (me == 0) fprintf(stderr, "transpose_mpi: the rows must fit in 32 bits and --nonzeros must not pass the columns\n");
        MPI_Finalize();
        return 2;
    }
    uint32_t *mine = checked_alloc(mine_nz * sizeof(uint32_t));
    rows_of((uint32_t)me, per, nz, nr, mine);
    uint32_t *counts = checked_alloc(per * sizeof(uint32_t));
    uint32_t *next = checked_alloc(per * sizeof(uint32_t)), *ends = checked_alloc(per * sizeof(uint32_t));
    uint32_t *other = checked_alloc(mine_nz * sizeof(uint32_t));
    uint32_t *want_cnt = checked_alloc(per * sizeof(uint32_t)), *want_at = checked_alloc(per * sizeof(uint32_t));
    struct exstack cx, px;
    exstack_init(&cx, n, cap * 2, sizeof(uint32_t)); /* the same bytes per buffer as the entries' */
    exstack_init(&px, n, cap, sizeof(struct entry));
    int failed = 0;

    for (int rep = 0; rep < reps; rep++) {
        memset(counts, 0, per * sizeof(uint32_t));
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        int all_done = 0;
        uint64_t k = 0;
        while (!all_done) { /* count */
            for (; k < mine_nz; k++) {
                int d = (int)(mine[k] / per);
                uint32_t *x = exstack_slot(&cx, d);
                if (!x) break;
                *x = (uint32_t)(mine[k] - per * d);
            }
            int got = exstack_exchange(&cx, k == mine_nz, &all_done);
            const uint32_t *in = (const uint32_t *)cx.in;
            for (int j = 0; j < got; j++) counts[in[j]]++;
        }
        uint64_t total = 0, base = 0;
        for (uint64_t c = 0; c < per; c++) {
            next[c] = (uint32_t)total;
            total += counts[c];
            ends[c] = (uint32_t)total;
        }
        MPI_Exscan(&total, &base, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        if (me == 0) base = 0; /* MPI leaves rank 0's result undefined */
        uint32_t *placed = checked_alloc((total + 1) * sizeof(uint32_t));
        uint64_t overflow = 0;
        all_done = 0;
        k = 0;
        while (!all_done) { /* place */
            for (; k < mine_nz; k++) {
                int d = (int)(mine[k] / per);
                struct entry *x = exstack_slot(&px, d);
                if (!x) break;
                x->col = (uint32_t)(mine[k] - per * d);
                x->row = (uint32_t)(first + k / (uint64_t)nz);
            }
            int got = exstack_exchange(&px, k == mine_nz, &all_done);
            const struct entry *in = (const struct entry *)px.in;
            for (int j = 0; j < got; j++) {
                if (next[in[j].col] < ends[in[j].col])
                    placed[next[in[j].col]++] = in[j].row;
                else
                    overflow++;
            }
        }
        double mine_t = MPI_Wtime() - start, worst;
        MPI_Allreduce(&mine_t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

        /* Check: this rank's columns, recomputed from every rank's rows
         * (rows come in increasing order, so each column's list is sorted). */
        memset(want_cnt, 0, per * sizeof(uint32_t));
        for (int r = 0; r < n; r++) {
            rows_of((uint32_t)r, per, nz, nr, other);
            for (uint64_t j = 0; j < mine_nz; j++)
                if (other[j] >= first && other[j] < first + per) want_cnt[other[j] - first]++;
        }
        uint64_t want_total = 0;
        for (uint64_t c = 0; c < per; c++) {
            want_at[c] = (uint32_t)want_total;
            want_total += want_cnt[c];
        }
        uint32_t *want = checked_alloc((want_total + 1) * sizeof(uint32_t));
        for (int r = 0; r < n; r++) {
            rows_of((uint32_t)r, per, nz, nr, other);
            for (uint64_t j = 0; j < mine_nz; j++)
                if (other[j] >= first && other[j] < first + per)
                    want[want_at[other[j] - first]++] = (uint32_t)(per * r + j / (uint64_t)nz);
        }
        uint64_t bad = overflow, hash = 0, at = 0, w = 0;
        for (uint64_t c = 0; c < per; c++) {
            uint64_t end = ends[c], len = end - at;
            qsort(placed + at, len, sizeof(uint32_t), order_u32);
            int differs = len != want_cnt[c] || memcmp(placed + at, want + w, len * sizeof(uint32_t)) != 0;
            bad += differs;
            for (uint64_t j = at; j < end; j++) hash += bale_value((uint64_t)placed[j] * nr + first + c);
            at = end;
            w += want_cnt[c];
        }
        free(want);
        free(placed);
        uint64_t mine3[3] = {total, bad, hash}, all3[3], last = base + total, all_last;
        MPI_Allreduce(mine3, all3, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(&last, &all_last, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
        uint64_t nnz = nr * (uint64_t)nz;
        int ok = all3[0] == nnz && all3[1] == 0 && all_last == nnz;
        failed |= !ok;
        if (me == 0)
            printf("transpose-mpi ranks=%d rows/rank=2^%d nonzeros/row=%d batch=%d rep=%d time_s=%.4f "
                   "nonzeros_per_s=%.4e nonzeros=%llu bad_columns=%llu hash=%016llx %s\n",
                   n, log_r, nz, cap, rep, worst, (double)nnz / worst, (unsigned long long)all3[0],
                   (unsigned long long)all3[1], (unsigned long long)all3[2], ok ? "OK" : "FAILED");
        fflush(stdout);
    }
    MPI_Finalize();
    return failed;
}
