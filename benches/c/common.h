/* What the comparison programs of fmbench share: a monotonic clock in ns,
 * the median of a few runs, named integer options (`--runs 5`), pinning to
 * one CPU, and the Bale kernels' splitmix64 streams, value table and block
 * distribution, identical to fastmsg's examples (examples/lib.rs, `bale`),
 * so that both sides draw the same updates and print the same checks.
 *
 * Include it first: it asks for the GNU extensions (sched_setaffinity). */
#ifndef FMBENCH_COMMON_H
#define FMBENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Most runs a program keeps for its median. */
#define MAX_RUNS 64

static inline double clock_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int order_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (the upper one for even n); v is left as it was. */
static inline double median_of(const double *v, int n) {
    double sorted[MAX_RUNS];
    if (n < 1) return 0.0;
    if (n > MAX_RUNS) n = MAX_RUNS;
    memcpy(sorted, v, sizeof(double) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof(double), order_doubles);
    return sorted[n / 2];
}

/* Prints "   runs: a b c" (one figure per run, `digits` decimals). */
static inline void print_runs(const double *v, int n, int digits) {
    printf("   runs:");
    for (int i = 0; i < n; i++) printf(" %.*f", digits, v[i]);
    printf("\n");
}

/* The value after `--name` on the command line, or `fallback`; exits with
 * a message when the value is not a whole number. */
static inline long named_arg(int argc, char **argv, const char *name, long fallback) {
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], name) != 0) continue;
        char *end = NULL;
        long v = strtol(argv[i + 1], &end, 10);
        if (end == argv[i + 1] || *end != '\0') {
            fprintf(stderr, "%s: %s wants a whole number, not '%s'\n", argv[0], name, argv[i + 1]);
            exit(2);
        }
        return v;
    }
    return fallback;
}

/* A named whole-number option with its default and its range. */
struct int_option {
    const char *name;
    long value; /* the default; read_options puts the given value here */
    long min, max;
};

/* Reads every option of opts[0..count) (named_arg). Returns 1 when each
 * lies in its range; else returns 0 after printing on stderr, when `say`,
 * one line with each option's range. */
static inline int read_options(int argc, char **argv, struct int_option *opts, int count, int say) {
    int ok = 1;
    for (int i = 0; i < count; i++) {
        opts[i].value = named_arg(argc, argv, opts[i].name, opts[i].value);
        ok &= opts[i].value >= opts[i].min && opts[i].value <= opts[i].max;
    }
    if (!ok && say) {
        fprintf(stderr, "%s:", argv[0]);
        for (int i = 0; i < count; i++)
            fprintf(stderr, "%s %s %ld..%ld", i ? "," : "", opts[i].name, opts[i].min, opts[i].max);
        fprintf(stderr, "\n");
    }
    return ok;
}

/* Runs on `cpu` only; a warning (not an error) where that is refused. */
static inline void pin_to_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) perror("sched_setaffinity");
}

/* ---- Bale: the same streams and table as fastmsg's `histo` and `ig` ---- */

#define GOLDEN 0x9E3779B97F4A7C15ULL

/* The seed of `rank`'s stream `salt` (1: histogram, 2: index-gather,
 * 3: random permutation, 4: transpose). */
static inline uint64_t bale_seed(uint32_t rank, uint64_t salt) {
    return 0x123456789abcdef0ULL ^ (salt * GOLDEN) ^ ((uint64_t)rank << 32);
}

/* The next value of a splitmix64 stream. */
static inline uint64_t bale_next(uint64_t *state) {
    uint64_t z = (*state += GOLDEN);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Table entry g's value (index-gather reads it; the histogram's hash
 * weighs each counter with it). */
static inline uint64_t bale_value(uint64_t g) {
    uint64_t x = (g * GOLDEN) ^ 0x00ABCDEF01234567ULL;
    return (x << 17) | (x >> 47);
}

/* A table of t entries in blocks over n ranks: entries per rank, and
 * rank's block [lo, hi). */
static inline void bale_block(uint64_t t, int n, int rank, uint64_t *per, uint64_t *lo, uint64_t *hi) {
    *per = (t + (uint64_t)n - 1) / (uint64_t)n;
    uint64_t a = *per * (uint64_t)rank, b = *per * (uint64_t)(rank + 1);
    *lo = a < t ? a : t;
    *hi = b < t ? b : t;
}

#endif
