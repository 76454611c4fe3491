/* Single-thread memcpy bandwidth, 64 B to 4 MiB (powers of two): the
 * ceiling of any copy-based message path on this host.
 *
 *   memcpy_bw [--runs 5] [--ms 100] [--cpu 0]
 *
 * Source and destination are separate page-aligned buffers, written once
 * before timing. For each size the number of copies per run is chosen so a
 * run lasts about --ms milliseconds; each size is run --runs times, pinned
 * to --cpu. GB/s = bytes copied / time, 1 GB = 1e9 B, each byte counted
 * once (the memory traffic is about twice: read and write). The last column
 * lists every run. */
#include "common.h"

/* Called through a volatile pointer, so the compiler cannot inline or drop
 * the copy of a size it knows. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

/* Nanoseconds for `count` copies of `size` bytes. */
static double time_copies(char *dst, const char *src, size_t size, long count) {
    void *(*copy)(void *, const void *, size_t) = copy_fn;
    double t0 = clock_ns();
    for (long i = 0; i < count; i++) {
        copy(dst, src, size);
        __asm__ volatile("" ::: "memory");
    }
    return clock_ns() - t0;
}

int main(int argc, char **argv) {
    long runs = named_arg(argc, argv, "--runs", 5), ms = named_arg(argc, argv, "--ms", 100);
    int cpu = (int)named_arg(argc, argv, "--cpu", 0);
    if (runs < 1 || ms < 1) {
        fprintf(stderr, "usage: %s [--runs 1..64] [--ms M>0] [--cpu C]\n", argv[0]);
        return 2;
    }
    if (runs > MAX_RUNS) runs = MAX_RUNS;
    pin_to_cpu(cpu);
    const size_t largest = (size_t)4 << 20;
    char *src = aligned_alloc(4096, largest), *dst = aligned_alloc(4096, largest);
    if (!src || !dst) {
        perror("memcpy_bw: memory");
        return 1;
    }
    memset(src, 1, largest);
    memset(dst, 2, largest);
    double budget_ns = (double)ms * 1e6;
    printf("%10s %12s %12s %12s   per-run GB/s\n", "size", "median GB/s", "ns/copy", "iters/run");
    for (size_t size = 64; size <= largest; size *= 2) {
        /* Double the count until a tenth of the budget passes, then scale. */
        long count = 1;
        double ns;
        while ((ns = time_copies(dst, src, size, count)) < budget_ns / 10) count *= 2;
        count = (long)((double)count * budget_ns / ns);
        if (count < 1) count = 1;
        double gb_s[MAX_RUNS];
        for (long r = 0; r < runs; r++) gb_s[r] = (double)size * count / time_copies(dst, src, size, count);
        double med = median_of(gb_s, (int)runs);
        char label[16];
        if (size >= (1u << 20)) snprintf(label, sizeof label, "%zuMiB", size >> 20);
        else if (size >= 1024) snprintf(label, sizeof label, "%zuKiB", size >> 10);
        else snprintf(label, sizeof label, "%zuB", size);
        printf("%10s %12.2f %12.1f %12ld  ", label, med, size / med, count);
        for (long r = 0; r < runs; r++) printf(" %.2f", gb_s[r]);
        printf("\n");
        fflush(stdout);
    }
    int intact = dst[largest - 1] == 1;
    free(src);
    free(dst);
    if (!intact) {
        fprintf(stderr, "memcpy_bw: the destination does not hold the source's bytes\n");
        return 1;
    }
    return 0;
}
