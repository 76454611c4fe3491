/* Bale index-gather over MPI, aggregated in the "exstack" style: each rank
 * reads 2^log-requests entries of a table spread in blocks over the ranks.
 * A round draws requests (the reader's slot, the owner's local index) into
 * one buffer of `--batch` per owner until one is full or all are drawn; the
 * counts and a done flag go out with MPI_Alltoall, the requests with one
 * MPI_Alltoallv; each owner answers (slot, value) into reply buffers packed
 * in the order the requests came, and the replies return with a second
 * MPI_Alltoallv whose counts are the requests' reversed. Rounds go on
 * until every rank is done.
 *
 *   mpirun -np N ig_mpi [--log-table 20] [--log-requests 21] [--batch 1024] [--reps 1]
 *
 * Requests are drawn from each rank's splitmix64 stream (salt 2, as
 * fastmsg's `ig` example); every value read is checked against the table's
 * formula. Rank 0 prints one line with the rate (all requests / the
 * slowest rank's time) and OK or FAILED; exit status 1 when a check
 * failed. */
#include "bale_mpi.h"

struct request {
    uint32_t slot, index;
};
struct reply {
    uint32_t slot, pad;
    uint64_t value;
};

/* Byte counts and displacements of one MPI_Alltoallv. */
struct plan {
    int *cnt, *off;
};

static struct plan plan_new(int n) {
    struct plan p = {checked_alloc(n * sizeof(int)), checked_alloc(n * sizeof(int))};
    return p;
}

int main(int argc, char **argv) {
    int me, n;
    struct int_option opt[] = {
        {"--log-table", 20, 1, 32}, {"--log-requests", 21, 0, 32}, {"--batch", 1024, 1, 1 << 24}, {"--reps", 1, 1, 1 << 20}};
    if (!bale_start(&argc, &argv, opt, 4, &me, &n)) return 2;
    int log_t = (int)opt[0].value, log_r = (int)opt[1].value, cap = (int)opt[2].value, reps = (int)opt[3].value;
    uint64_t tsize = 1ULL << log_t, nreq = 1ULL << log_r, per, lo, hi;
    bale_block(tsize, n, me, &per, &lo, &hi);
    uint64_t *table = checked_alloc((hi - lo + 1) * sizeof(uint64_t));
    uint64_t *got = checked_alloc(nreq * sizeof(uint64_t));
    for (uint64_t k = 0; k < hi - lo; k++) table[k] = bale_value(lo + k);

    size_t slots = (size_t)n * cap;
    struct request *req_out = checked_alloc(slots * sizeof(struct request));
    struct request *req_in = checked_alloc(slots * sizeof(struct request));
    struct reply *rep_out = checked_alloc(slots * sizeof(struct reply));
    struct reply *rep_in = checked_alloc(slots * sizeof(struct reply));
    int *fill = checked_alloc(n * sizeof(int));
    int *info_out = checked_alloc(2 * n * sizeof(int)), *info_in = checked_alloc(2 * n * sizeof(int));
    struct plan q_send = plan_new(n), q_recv = plan_new(n), a_send = plan_new(n), a_recv = plan_new(n);
    int failed = 0;

    for (int rep = 0; rep < reps; rep++) {
        memset(got, 0, nreq * sizeof(uint64_t));
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        uint64_t stream = bale_seed((uint32_t)me, 2), drawn = 0;
        int all_done = 0;
        while (!all_done) {
            memset(fill, 0, n * sizeof(int));
            while (drawn < nreq) {
                uint64_t keep = stream, g = bale_next(&stream) & (tsize - 1);
                int d = (int)(g / per);
                if (fill[d] == cap) {
                    stream = keep; /* this request waits for the next round */
                    break;
                }
                struct request *r = &req_out[d * cap + fill[d]++];
                r->slot = (uint32_t)drawn;
                r->index = (uint32_t)(g - per * d);
                drawn++;
            }
            for (int d = 0; d < n; d++) {
                info_out[2 * d] = fill[d];
                info_out[2 * d + 1] = drawn == nreq;
            }
            MPI_Alltoall(info_out, 2, MPI_INT, info_in, 2, MPI_INT, MPI_COMM_WORLD);
            int incoming = 0;
            all_done = 1;
            for (int d = 0; d < n; d++) {
                int asked = info_in[2 * d];
                q_send.cnt[d] = fill[d] * (int)sizeof(struct request);
                q_send.off[d] = d * cap * (int)sizeof(struct request);
                q_recv.cnt[d] = asked * (int)sizeof(struct request);
                q_recv.off[d] = incoming * (int)sizeof(struct request);
                a_send.cnt[d] = asked * (int)sizeof(struct reply);
                a_send.off[d] = incoming * (int)sizeof(struct reply);
                a_recv.cnt[d] = fill[d] * (int)sizeof(struct reply);
                a_recv.off[d] = d * cap * (int)sizeof(struct reply);
                incoming += asked;
                all_done &= info_in[2 * d + 1];
            }
            MPI_Alltoallv(req_out, q_send.cnt, q_send.off, MPI_BYTE, req_in, q_recv.cnt, q_recv.off, MPI_BYTE,
                          MPI_COMM_WORLD);
            for (int k = 0; k < incoming; k++) {
                rep_out[k].slot = req_in[k].slot;
                rep_out[k].pad = 0;
                rep_out[k].value = table[req_in[k].index];
            }
            MPI_Alltoallv(rep_out, a_send.cnt, a_send.off, MPI_BYTE, rep_in, a_recv.cnt, a_recv.off, MPI_BYTE,
                          MPI_COMM_WORLD);
            for (int d = 0; d < n; d++)
                for (int k = 0; k < fill[d]; k++) {
                    const struct reply *a = &rep_in[d * cap + k];
                    got[a->slot] = a->value;
                }
        }
        double mine = MPI_Wtime() - start, worst;
        MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

        uint64_t s = bale_seed((uint32_t)me, 2), bad = 0, all_bad;
        for (uint64_t k = 0; k < nreq; k++) bad += got[k] != bale_value(bale_next(&s) & (tsize - 1));
        MPI_Allreduce(&bad, &all_bad, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        failed |= all_bad != 0;
        if (me == 0)
            printf("ig-mpi ranks=%d table=2^%d requests/rank=2^%d batch=%d rep=%d time_s=%.4f "
                   "requests_per_s=%.4e bad=%llu %s\n",
                   n, log_t, log_r, cap, rep, worst, (double)n * nreq / worst, (unsigned long long)all_bad,
                   all_bad ? "FAILED" : "OK");
        fflush(stdout);
    }
    MPI_Finalize();
    return failed;
}
