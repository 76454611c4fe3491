/* What the aggregated MPI Bale programs (`*_mpi.c` beside the Bale
 * kernels) share beyond common.h: allocation that stops the whole job
 * when memory runs out, and the end of a run whose options are out of
 * range. Include it instead of common.h. */
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

/* Reads the options (read_options; rank 0 names the ranges when one is
 * out of range). Returns 1 when they are all in range; else the caller
 * returns 2 from main, MPI already finalized. */
static inline int bale_options(int argc, char **argv, struct int_option *opts, int count) {
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (read_options(argc, argv, opts, count, me == 0)) return 1;
    MPI_Finalize();
    return 0;
}

#endif
