/* Where a run's OpenMP time goes: an LD_PRELOAD library that wraps libgomp's GOMP_parallel (every
 * `#pragma omp parallel` GCC emits calls it) and, at exit, prints per parallel region (its outlined
 * function) the calls, how many ran with more than one thread, the wall time inside, and each
 * thread's busy time in it; plus the span from the first region to the last and the wall time in
 * all regions (the rest of the span is serial). A measuring aid, not part of igen: built as
 * build/libigen_omp_regions.so (CMakeLists.txt), used as
 *   LD_PRELOAD=build/libigen_omp_regions.so build/igen bench-decode ...
 * Regions in static functions print as "igen+0xOFF": `addr2line -f -e build/igen 0xOFF` names
 * them. The figures in docs/results/compressed_weights.md ("Where the step goes now") came from
 * this. Assumes regions start on one thread at a time (igen has no nested parallelism). */
#include <dlfcn.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef void (*region_fn)(void *);

#define MAX_SITES   256
#define MAX_THREADS 64

typedef struct site {
    region_fn fn;
    long calls, multi;
    double wall, busy[MAX_THREADS];
} site;

static site g_sites[MAX_SITES];
static double g_first, g_last, g_in_regions;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct wrapped {
    region_fn fn;
    void *data;
    site *s;
} wrapped;

static void run_wrapped(void *p) {
    wrapped *w = p;
    double t0 = now_s();
    w->fn(w->data);
    int t = omp_get_thread_num();
    if (t < MAX_THREADS) w->s->busy[t] += now_s() - t0; /* each thread its own slot */
}

static site *find_site(region_fn fn) {
    for (int i = 0; i < MAX_SITES; i++) {
        if (g_sites[i].fn == fn) return &g_sites[i];
        if (!g_sites[i].fn) {
            g_sites[i].fn = fn;
            return &g_sites[i];
        }
    }
    return &g_sites[MAX_SITES - 1]; /* more sites than slots: the last one collects the rest */
}

void GOMP_parallel(region_fn fn, void *data, unsigned num_threads, unsigned flags);

void GOMP_parallel(region_fn fn, void *data, unsigned num_threads, unsigned flags) {
    static void (*real)(region_fn, void *, unsigned, unsigned);
    if (!real) {
        void *sym = dlsym(RTLD_NEXT, "GOMP_parallel");
        memcpy(&real, &sym, sizeof real);
    }
    site *s = find_site(fn);
    wrapped w = {fn, data, s};
    double t0 = now_s();
    if (g_first == 0) g_first = t0;
    real(run_wrapped, &w, num_threads, flags);
    double t1 = now_s();
    s->wall += t1 - t0;
    s->calls++;
    if (num_threads != 1) s->multi++;
    g_last = t1;
    g_in_regions += t1 - t0;
}

__attribute__((destructor)) static void report(void) {
    fprintf(stderr, "omp_regions: span %.3f s, in parallel regions %.3f s\n", g_last - g_first,
            g_in_regions);
    for (int i = 0; i < MAX_SITES && g_sites[i].fn; i++) {
        const site *s = &g_sites[i];
        char name[160];
        Dl_info di;
        void *addr;
        memcpy(&addr, &s->fn, sizeof addr);
        if (dladdr(addr, &di) && di.dli_sname)
            snprintf(name, sizeof name, "%s", di.dli_sname);
        else if (dladdr(addr, &di) && di.dli_fname)
            snprintf(name, sizeof name, "%s+0x%lx",
                     strrchr(di.dli_fname, '/') ? strrchr(di.dli_fname, '/') + 1 : di.dli_fname,
                     (unsigned long)((uintptr_t)addr - (uintptr_t)di.dli_fbase));
        else
            snprintf(name, sizeof name, "%p", addr);
        fprintf(stderr, "  %-36s calls %7ld (multi-thread %7ld) wall %.3f s, %.1f us a call; busy",
                name, s->calls, s->multi, s->wall, s->wall / (double)s->calls * 1e6);
        for (int t = 0; t < MAX_THREADS; t++)
            if (s->busy[t] > 0) fprintf(stderr, " t%d %.3f", t, s->busy[t]);
        fprintf(stderr, "\n");
    }
}
