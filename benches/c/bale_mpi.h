/* What the aggregated MPI Bale programs (`*_mpi.c` beside the Bale
 * kernels) share beyond common.h: the start of a run (MPI, rank, size,
 * options; the end of one whose options are out of range), allocation
 * that stops the whole job when memory runs out, and the one-way
 * "exstack" exchange of buffered items. Include it instead of common.h. */
#ifndef FMBENCH_BALE_MPI_H
#define FMBENCH_BALE_MPI_H

#include "common.h"
#include <mpi.h>

/* Zeroed memory, or the job aborted with a message naming the size. */
static inline void *checked_alloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* Starts MPI, puts this rank and the number of ranks in *me and *n, and
 * reads the options (read_options; rank 0 names the ranges when one is
 * out of range). Returns 1 when they are all in range; else the caller
 * returns 2 from main, MPI already finalized. */
static inline int bale_start(int *argc, char ***argv, struct int_option *opts, int count, int *me, int *n) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, me);
    MPI_Comm_size(MPI_COMM_WORLD, n);
    if (read_options(*argc, *argv, opts, count, *me == 0)) return 1;
    MPI_Finalize();
    return 0;
}

/* The "exstack" exchange: per-destination buffers of `cap` items of
 * `size` bytes, and one exchange's counts and displacements (in bytes).
 * A round fills the buffers (exstack_slot), then exstack_exchange tells
 * every rank how many items it sends and whether it is done
 * (MPI_Alltoall) and sends the items in one MPI_Alltoallv. */
struct exstack {
    int ranks, cap, size;
    char *out, *in;
    int *fill, *s_cnt, *s_off, *r_cnt, *r_off, *info_out, *info_in;
};

static inline void exstack_init(struct exstack *x, int ranks, int cap, int size) {
    x->ranks = ranks;
    x->cap = cap;
    x->size = size;
    x->out = checked_alloc((size_t)ranks * cap * size);
    x->in = checked_alloc((size_t)ranks * cap * size);
    x->fill = checked_alloc(ranks * sizeof(int));
    x->s_cnt = checked_alloc(ranks * sizeof(int));
    x->s_off = checked_alloc(ranks * sizeof(int));
    x->r_cnt = checked_alloc(ranks * sizeof(int));
    x->r_off = checked_alloc(ranks * sizeof(int));
    x->info_out = checked_alloc(2 * ranks * sizeof(int));
    x->info_in = checked_alloc(2 * ranks * sizeof(int));
}

/* The next free item of d's buffer, or NULL when it is full. */
static inline void *exstack_slot(struct exstack *x, int d) {
    if (x->fill[d] == x->cap) return NULL;
    return x->out + ((size_t)d * x->cap + x->fill[d]++) * x->size;
}

/* Sends the buffers and empties them; returns how many items came in (in
 * x->in) and sets *all_done when no rank has more to send. */
static inline int exstack_exchange(struct exstack *x, int done, int *all_done) {
    for (int d = 0; d < x->ranks; d++) {
        x->info_out[2 * d] = x->fill[d];
        x->info_out[2 * d + 1] = done;
    }
    MPI_Alltoall(x->info_out, 2, MPI_INT, x->info_in, 2, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    *all_done = 1;
    for (int d = 0; d < x->ranks; d++) {
        x->s_cnt[d] = x->fill[d] * x->size;
        x->s_off[d] = d * x->cap * x->size;
        x->r_cnt[d] = x->info_in[2 * d] * x->size;
        x->r_off[d] = total * x->size;
        total += x->info_in[2 * d];
        *all_done &= x->info_in[2 * d + 1];
    }
    MPI_Alltoallv(x->out, x->s_cnt, x->s_off, MPI_BYTE, x->in, x->r_cnt, x->r_off, MPI_BYTE, MPI_COMM_WORLD);
    memset(x->fill, 0, x->ranks * sizeof(int));
    return total;
}

#endif
