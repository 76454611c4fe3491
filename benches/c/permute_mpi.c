/* Bale random permutation (dart throwing) over MPI, aggregated in the
 * "exstack" style. The job permutes the ids 0..N, N = ranks * 2^log-darts,
 * into M = 2N slots, 2 * 2^log-darts per rank. A round throws darts (a
 * rank's ids not yet thrown, and those that bounced) at random global
 * slots into one buffer of `--batch` per slot owner until one is full or
 * the rank has nothing left to throw; the counts and a done flag go out
 * with MPI_Alltoall, the darts (local slot, id) with one MPI_Alltoallv;
 * each owner keeps a dart in an empty slot and answers 1, or 0 for a taken
 * slot, in the order the darts came; the answers return with a second
 * MPI_Alltoallv, and bounced darts are thrown again in the next round.
 * Rounds go on until no rank has a dart to throw. Then MPI_Exscan of the
 * occupied slots per rank says where each rank's occupied slots start in
 * the permutation, and each rank compacts them in slot order.
 *
 *   mpirun -np N permute_mpi [--log-darts 20] [--batch 1024] [--reps 1]
 *
 * Slots are drawn from each rank's splitmix64 stream (salt 3, as fastmsg's
 * `permute` example). Checked: every id is sent to its owner, who counts
 * it; the run is OK only if the ranks hold N entries in all and every id
 * was counted once. Rank 0 prints one line with the rate (N / the slowest
 * rank's time) and OK or FAILED; exit status 1 when a check failed. */
#include "bale_mpi.h"

struct dart {
    uint32_t slot, id;
};

#define EMPTY UINT32_MAX

int main(int argc, char **argv) {
    int me, n;
    struct int_option opt[] = {{"--log-darts", 20, 0, 30}, {"--batch", 1024, 1, 1 << 24}, {"--reps", 1, 1, 1 << 20}};
    if (!bale_start(&argc, &argv, opt, 3, &me, &n)) return 2;
    int log_d = (int)opt[0].value, cap = (int)opt[1].value, reps = (int)opt[2].value;
    uint64_t per = 1ULL << log_d, total = per * (uint64_t)n, per_slots = 2 * per, m = 2 * total;
    if (total > UINT32_MAX) {
        if (me == 0) fprintf(stderr, "permute_mpi: ranks * 2^log-darts ids must fit in 32 bits\n");
        MPI_Finalize();
        return 2;
    }
    uint32_t *slots = checked_alloc(per_slots * sizeof(uint32_t));
    uint32_t *bounced = checked_alloc(per * sizeof(uint32_t)); /* ids to throw again */
    uint32_t *perm = checked_alloc(per_slots * sizeof(uint32_t));
    uint32_t *seen = checked_alloc(per * sizeof(uint32_t));
    size_t room = (size_t)n * cap;
    struct dart *out = checked_alloc(room * sizeof(struct dart)), *in = checked_alloc(room * sizeof(struct dart));
    uint8_t *ans_out = checked_alloc(room), *ans_in = checked_alloc(room);
    int *fill = checked_alloc(n * sizeof(int));
    int *info_out = checked_alloc(2 * n * sizeof(int)), *info_in = checked_alloc(2 * n * sizeof(int));
    int *d_cnt = checked_alloc(n * sizeof(int)), *d_off = checked_alloc(n * sizeof(int));
    int *r_cnt = checked_alloc(n * sizeof(int)), *r_off = checked_alloc(n * sizeof(int));
    int *a_cnt = checked_alloc(n * sizeof(int)), *a_off = checked_alloc(n * sizeof(int));
    int *b_cnt = checked_alloc(n * sizeof(int)), *b_off = checked_alloc(n * sizeof(int));
    int failed = 0;

    for (int rep = 0; rep < reps; rep++) {
        memset(slots, 0xff, per_slots * sizeof(uint32_t));
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        uint64_t stream = bale_seed((uint32_t)me, 3), fresh = per * (uint64_t)me, end = fresh + per;
        uint64_t throws = 0, nb = 0; /* nb: ids in `bounced` */
        for (;;) {
            memset(fill, 0, n * sizeof(int));
            int sent = 0;
            while (nb > 0 || fresh < end) {
                uint64_t keep = stream, g = bale_next(&stream) % m;
                int d = (int)(g / per_slots);
                if (fill[d] == cap) {
                    stream = keep; /* this dart waits for the next round */
                    break;
                }
                struct dart *x = &out[d * cap + fill[d]++];
                x->slot = (uint32_t)(g - per_slots * d);
                x->id = nb > 0 ? bounced[--nb] : (uint32_t)fresh++;
                throws++;
                sent++;
            }
            for (int d = 0; d < n; d++) {
                info_out[2 * d] = fill[d];
                info_out[2 * d + 1] = sent == 0;
            }
            MPI_Alltoall(info_out, 2, MPI_INT, info_in, 2, MPI_INT, MPI_COMM_WORLD);
            int incoming = 0, all_done = 1;
            for (int d = 0; d < n; d++) {
                int got = info_in[2 * d];
                d_cnt[d] = fill[d] * (int)sizeof(struct dart);
                d_off[d] = d * cap * (int)sizeof(struct dart);
                r_cnt[d] = got * (int)sizeof(struct dart);
                r_off[d] = incoming * (int)sizeof(struct dart);
                a_cnt[d] = got;
                a_off[d] = incoming;
                b_cnt[d] = fill[d];
                b_off[d] = d * cap;
                incoming += got;
                all_done &= info_in[2 * d + 1];
            }
            /* No rank threw anything: none has a dart in flight either
             * (every round's darts are answered within the round). */
            if (all_done) break;
            MPI_Alltoallv(out, d_cnt, d_off, MPI_BYTE, in, r_cnt, r_off, MPI_BYTE, MPI_COMM_WORLD);
            for (int k = 0; k < incoming; k++) {
                uint32_t *s = &slots[in[k].slot];
                ans_out[k] = *s == EMPTY;
                if (*s == EMPTY) *s = in[k].id;
            }
            MPI_Alltoallv(ans_out, a_cnt, a_off, MPI_BYTE, ans_in, b_cnt, b_off, MPI_BYTE, MPI_COMM_WORLD);
            for (int d = 0; d < n; d++)
                for (int k = 0; k < fill[d]; k++)
                    if (!ans_in[d * cap + k]) bounced[nb++] = out[d * cap + k].id;
        }
        uint64_t count = 0, first = 0;
        for (uint64_t k = 0; k < per_slots; k++)
            if (slots[k] != EMPTY) perm[count++] = slots[k];
        MPI_Exscan(&count, &first, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        if (me == 0) first = 0; /* MPI leaves rank 0's result undefined */
        double mine = MPI_Wtime() - start, worst;
        MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

        /* Check: every id to its owner, who counts it. */
        memset(d_cnt, 0, n * sizeof(int));
        for (uint64_t k = 0; k < count; k++) d_cnt[perm[k] / per]++;
        MPI_Alltoall(d_cnt, 1, MPI_INT, r_cnt, 1, MPI_INT, MPI_COMM_WORLD);
        int incoming = 0;
        for (int d = 0; d < n; d++) {
            d_off[d] = d ? d_off[d - 1] + d_cnt[d - 1] : 0;
            r_off[d] = incoming;
            incoming += r_cnt[d];
        }
        uint32_t *sorted = checked_alloc((count + 1) * sizeof(uint32_t));
        uint32_t *ids = checked_alloc(((size_t)incoming + 1) * sizeof(uint32_t));
        memset(fill, 0, n * sizeof(int));
        for (uint64_t k = 0; k < count; k++) {
            int d = (int)(perm[k] / per);
            sorted[d_off[d] + fill[d]++] = perm[k];
        }
        MPI_Alltoallv(sorted, d_cnt, d_off, MPI_UINT32_T, ids, r_cnt, r_off, MPI_UINT32_T, MPI_COMM_WORLD);
        memset(seen, 0, per * sizeof(uint32_t));
        for (int k = 0; k < incoming; k++) seen[ids[k] - per * (uint64_t)me]++;
        uint64_t mine3[3] = {count, 0, throws}, all3[3], last = first + count, all_last;
        for (uint64_t k = 0; k < per; k++) mine3[1] += seen[k] != 1;
        free(sorted);
        free(ids);
        MPI_Allreduce(mine3, all3, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(&last, &all_last, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
        int ok = all3[0] == total && all3[1] == 0 && all_last == total;
        failed |= !ok;
        if (me == 0)
            printf("permute-mpi ranks=%d darts/rank=2^%d batch=%d rep=%d time_s=%.4f darts_per_s=%.4e "
                   "throws=%llu entries=%llu ids_not_once=%llu %s\n",
                   n, log_d, cap, rep, worst, (double)total / worst, (unsigned long long)all3[2],
                   (unsigned long long)all3[0], (unsigned long long)all3[1], ok ? "OK" : "FAILED");
        fflush(stdout);
    }
    MPI_Finalize();
    return failed;
}
