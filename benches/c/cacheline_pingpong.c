/* The physical limit of a message between two processes on one host: a
 * ping-pong through shared cache lines and nothing else (no queue, no
 * handler, no library).
 *
 *   cacheline_pingpong [--iters 1000000] [--runs 5] [--lines 1|2] [--pause 0|1]
 *                      [--cpu-a 0] [--cpu-b 1]
 *
 * The two processes share one anonymous mapping made before fork(). With
 * one line both write a single counter (odd: ping, even: pong); with two
 * lines the ping and the pong each live in their own line, written by one
 * side only. `--pause 1` executes the CPU's spin-wait hint (PAUSE, YIELD)
 * between polls. The initiator runs on CPU --cpu-a, the responder on
 * --cpu-b. Each run times `iters` round trips after 20,000 unmeasured;
 * one-way = round trip / 2. Printed: each run's mean, the median over runs,
 * and the distribution of single round trips of the last run. */
#include "common.h"
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define LINE 64
#define WARM 20000L

struct lines {
    _Alignas(LINE) _Atomic uint64_t ping; /* the only line when lines = 1 */
    _Alignas(LINE) _Atomic uint64_t pong;
    _Alignas(LINE) _Atomic uint64_t ready, start;
};

static int two_lines, use_pause;

static inline void spin_hint(void) {
    if (!use_pause) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* A cheap tick for single round trips: the time-stamp counter on x86
 * (converted with ns_per_tick, measured at start), else the clock. */
static double ns_per_tick = 1.0;
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline double tick(void) { return (double)__rdtsc(); }
static void calibrate_ticks(void) {
    double t0 = clock_ns(), c0 = tick();
    while (clock_ns() - t0 < 50e6) {}
    ns_per_tick = (clock_ns() - t0) / (tick() - c0);
}
#else
static inline double tick(void) { return clock_ns(); }
static void calibrate_ticks(void) {}
#endif

static inline void await(_Atomic uint64_t *word, uint64_t value) {
    while (atomic_load_explicit(word, memory_order_acquire) != value) spin_hint();
}

/* The initiator's side of `iters` round trips from counter `*seq`; each
 * round trip's ns go to samples[i] when samples is not NULL. */
static void initiate(struct lines *l, uint64_t *seq, long iters, double *samples) {
    for (long i = 0; i < iters; i++) {
        double t = samples ? tick() : 0;
        if (two_lines) {
            *seq += 1;
            atomic_store_explicit(&l->ping, *seq, memory_order_release);
            await(&l->pong, *seq);
        } else {
            atomic_store_explicit(&l->ping, *seq + 1, memory_order_release);
            *seq += 2;
            await(&l->ping, *seq);
        }
        if (samples) samples[i] = tick() - t;
    }
}

/* The responder's side of `iters` round trips. */
static void respond(struct lines *l, uint64_t *seq, long iters) {
    for (long i = 0; i < iters; i++) {
        if (two_lines) {
            *seq += 1;
            await(&l->ping, *seq);
            atomic_store_explicit(&l->pong, *seq, memory_order_release);
        } else {
            await(&l->ping, *seq + 1);
            *seq += 2;
            atomic_store_explicit(&l->ping, *seq, memory_order_release);
        }
    }
}

static int order_samples(const void *a, const void *b) {
    return order_doubles(a, b);
}

int main(int argc, char **argv) {
    long iters = named_arg(argc, argv, "--iters", 1000000), runs = named_arg(argc, argv, "--runs", 5);
    long lines = named_arg(argc, argv, "--lines", 1);
    int cpu_a = (int)named_arg(argc, argv, "--cpu-a", 0), cpu_b = (int)named_arg(argc, argv, "--cpu-b", 1);
    use_pause = named_arg(argc, argv, "--pause", 1) != 0;
    if (iters < 1 || runs < 1 || (lines != 1 && lines != 2)) {
        fprintf(stderr, "usage: %s [--iters N>0] [--runs 1..64] [--lines 1|2] [--pause 0|1] [--cpu-a A] [--cpu-b B]\n",
                argv[0]);
        return 2;
    }
    if (runs > MAX_RUNS) runs = MAX_RUNS;
    two_lines = lines == 2;
    struct lines *l = mmap(NULL, sizeof *l, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    double *samples = malloc(sizeof(double) * (size_t)iters);
    if (l == MAP_FAILED || !samples) {
        perror("cacheline_pingpong: memory");
        return 1;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("cacheline_pingpong: fork");
        return 1;
    }
    uint64_t seq = 0;
    if (child == 0) {
        pin_to_cpu(cpu_b);
        atomic_store_explicit(&l->ready, 1, memory_order_release);
        await(&l->start, 1);
        respond(l, &seq, WARM + iters * runs);
        _exit(0);
    }
    pin_to_cpu(cpu_a);
    calibrate_ticks();
    await(&l->ready, 1);
    atomic_store_explicit(&l->start, 1, memory_order_release);
    initiate(l, &seq, WARM, NULL);
    double one_way[MAX_RUNS];
    for (long r = 0; r < runs; r++) {
        double t0 = clock_ns();
        initiate(l, &seq, iters, r == runs - 1 ? samples : NULL);
        one_way[r] = (clock_ns() - t0) / (double)iters / 2.0;
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "cacheline_pingpong: the responder failed\n");
        return 1;
    }
    printf("cacheline lines=%ld pause=%d iters=%ld runs=%ld one-way ns per run:", lines, use_pause, iters, runs);
    for (long r = 0; r < runs; r++) printf(" %.1f", one_way[r]);
    printf("\ncacheline lines=%ld pause=%d median one-way ns=%.1f\n", lines, use_pause,
           median_of(one_way, (int)runs));
    /* The last run's single round trips, one-way. */
    qsort(samples, (size_t)iters, sizeof(double), order_samples);
    double h = 0.5 * ns_per_tick;
    printf("cacheline lines=%ld pause=%d last run, single round trips, one-way ns: p50=%.1f p90=%.1f p99=%.1f "
           "p99.9=%.1f max=%.1f\n",
           lines, use_pause, samples[iters / 2] * h, samples[iters * 9 / 10] * h, samples[iters * 99 / 100] * h,
           samples[iters * 999 / 1000] * h, samples[iters - 1] * h);
    free(samples);
    munmap(l, sizeof *l);
    return 0;
}
