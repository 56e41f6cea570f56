/* The CUDA emulator's self-test (tests/cuda_emu): each check the emulator claims to make is made
 * to fire here, through the CUDA runtime and cuBLAS API itself and the probe kernels of
 * tests/emu_probe.cu, so that a passing run of the CUDA backend on the emulator (test_cuda_emu,
 * test_cuda_engine_emu) means something. Every scenario that leaves a sticky error (a device
 * fault, a failed launch) or kills the process runs in a fork()ed child; the child reports what it
 * saw through a pipe (its stderr through another), and the parent asserts.
 *
 * Several tests assert what only the emulator does: work queued on a stream runs at the next
 * synchronisation point, not before. On a GPU the same programs may see either the old or the new
 * data; they are the emulator showing a missing synchronisation as stale data, every time. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_kernels.h"
#include "tests/emu_probe.h"
#include "tests/test_util.h"

/* ---- helpers --------------------------------------------------------------------------------- */

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_));   \
        CU_ASSERT_FATAL(e_ == cudaSuccess);                                                        \
    } while (0)

/* The error code `call` returned is `want` (printed when not). */
#define CK_IS(call, want)                                                                          \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != (want))                                                                          \
            fprintf(stderr, "%s:%d: %s: %s, expected %s\n", __FILE__, __LINE__, #call,             \
                    cudaGetErrorName(e_), cudaGetErrorName(want));                                 \
        CU_ASSERT_EQUAL(e_, (want));                                                               \
    } while (0)

static void *dev_alloc(size_t n) {
    void *p = NULL;
    CK(cudaMalloc(&p, n));
    CU_ASSERT_FATAL(p != NULL);
    return p;
}

static void *pinned_alloc(size_t n) {
    void *p = NULL;
    CK(cudaHostAlloc(&p, n, cudaHostAllocDefault));
    CU_ASSERT_FATAL(p != NULL);
    return p;
}

static void *host_alloc(size_t n) {
    void *p = malloc(n);
    CU_ASSERT_FATAL(p != NULL);
    return p;
}

static cudaStream_t new_stream(void) {
    cudaStream_t s = NULL;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}

static void fill(float *p, int n, float v) {
    for (int i = 0; i < n; i++) p[i] = v;
}

/* Number of i < n with p[i] != v. */
static int count_not(const float *p, int n, float v) {
    int bad = 0;
    for (int i = 0; i < n; i++) bad += p[i] != v;
    return bad;
}

/* ---- IG_EMU_ORDER ---------------------------------------------------------------------------- */

static const char *const k_orders[3] = {"forward", "reverse", "random"};

/* Sets IG_EMU_ORDER (read when each kernel runs, i.e. at the synchronisation that runs it, so it
 * must stay set until then); restore_order puts the caller's value back. */
static char g_saved_order[64];
static int g_order_saved, g_had_order;

static void set_order(const char *o) {
    if (!g_order_saved) {
        const char *e = getenv("IG_EMU_ORDER");
        g_order_saved = 1;
        g_had_order = e != NULL;
        snprintf(g_saved_order, sizeof g_saved_order, "%s", e ? e : "");
    }
    CU_ASSERT_FATAL(setenv("IG_EMU_ORDER", o, 1) == 0);
}

static void restore_order(void) {
    if (!g_order_saved) return;
    if (g_had_order)
        setenv("IG_EMU_ORDER", g_saved_order, 1);
    else
        unsetenv("IG_EMU_ORDER");
    g_order_saved = 0;
}

/* ---- child processes ------------------------------------------------------------------------- */

enum { MAX_REPORT = 32 };

typedef struct child_result {
    int status;         /* from waitpid */
    int n;              /* values reported */
    long v[MAX_REPORT]; /* the values, in order */
    char err[16384];    /* the child's stderr (cut) */
} child_result;

typedef void (*child_fn)(const void *arg);

static int g_report_fd = -1;

/* In a child: one value for the parent. */
static void report(long v) {
    if (write(g_report_fd, &v, sizeof v) != (ssize_t)sizeof v) _exit(3);
}

static size_t read_all(int fd, char *buf, size_t cap) {
    size_t got = 0;
    for (;;) {
        char tmp[4096];
        ssize_t r = read(fd, tmp, sizeof tmp);
        if (r <= 0) break;
        size_t take = (size_t)r;
        if (got + take > cap) take = cap - got;
        memcpy(buf + got, tmp, take);
        got += take;
    }
    return got;
}

/* Runs fn(arg) in a fork()ed child (no core dump, killed after 60 s, exits 0 when fn returns) and
 * collects what it reported, its stderr and its wait status. */
static void run_child(child_fn fn, const void *arg, child_result *r) {
    memset(r, 0, sizeof *r);
    int out[2], err[2];
    CU_ASSERT_FATAL(pipe(out) == 0);
    CU_ASSERT_FATAL(pipe(err) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        close(out[0]);
        close(err[0]);
        dup2(err[1], 2);
        close(err[1]);
        g_report_fd = out[1];
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        alarm(60);
        fn(arg);
        fflush(stderr);
        _exit(0);
    }
    close(out[1]);
    close(err[1]);
    size_t ne = read_all(err[0], r->err, sizeof r->err - 1);
    r->err[ne] = '\0';
    long vals[MAX_REPORT + 1];
    size_t nv = read_all(out[0], (char *)vals, sizeof vals);
    r->n = (int)(nv / sizeof(long));
    if (r->n > MAX_REPORT) r->n = MAX_REPORT;
    memcpy(r->v, vals, (size_t)r->n * sizeof(long));
    close(out[0]);
    close(err[0]);
    CU_ASSERT_FATAL(waitpid(pid, &r->status, 0) == pid);
}

static int exited_ok(const child_result *r) {
    int ok = WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0;
    if (!ok) {
        if (WIFSIGNALED(r->status))
            fprintf(stderr, "child killed by signal %d; its stderr:\n%s\n", WTERMSIG(r->status),
                    r->err);
        else
            fprintf(stderr, "child exit status %d; its stderr:\n%s\n", WEXITSTATUS(r->status),
                    r->err);
    }
    return ok;
}

/* Value i of a child's report, as an error code (cudaErrorUnknown when it did not get that far). */
static cudaError_t reported(const child_result *r, int i) {
    return i < r->n ? (cudaError_t)r->v[i] : cudaErrorUnknown;
}

/* ---- correct kernels give correct results ---------------------------------------------------- */

static void test_copy_kernel(void) {
    const int n = 1000;
    size_t nb = (size_t)n * sizeof(float);
    float *h = host_alloc(nb), *got = host_alloc(nb);
    for (int i = 0; i < n; i++) h[i] = (float)(i % 97 - 48);
    float *dx = dev_alloc(nb), *dy = dev_alloc(nb);
    CK(cudaMemcpy(dx, h, nb, cudaMemcpyHostToDevice));
    cudaStream_t s = new_stream();
    /* the copy (s = 1), then a scale with a grid that does not cover n (the grid-stride loop) */
    ig_probe_scale(dx, dy, 1.0f, n, 4, 256, s);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(got, dy, nb, cudaMemcpyDeviceToHost));
    CU_ASSERT(memcmp(got, h, nb) == 0);
    ig_probe_scale(dx, dy, -2.0f, n, 3, 96, s);
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(got, dy, nb, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += got[i] != -2.0f * h[i];
    CU_ASSERT_EQUAL(bad, 0);
    CK(cudaStreamDestroy(s));
    CK(cudaFree(dx));
    CK(cudaFree(dy));
    free(h);
    free(got);
}

/* New device memory reads as 0xff bytes (NaN floats), so reads of memory nobody wrote show. */
static void test_fresh_alloc_is_poisoned(void) {
    const size_t nb = 4096 + 12;
    unsigned char *d = dev_alloc(nb), *h = host_alloc(nb);
    memset(h, 0, nb);
    CK(cudaMemcpy(h, d, nb, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < nb; i++) bad += h[i] != 0xff;
    CU_ASSERT_EQUAL(bad, 0);
    CK(cudaFree(d));
    free(h);
}

/* A shuffle + shared memory + __syncthreads block reduction is exact (small integers) in every
 * thread order. */
static void test_block_sum_all_orders(void) {
    const int n = 5003;
    const unsigned grids[2] = {4, 7}, blocks[2] = {256, 96};
    size_t nb = (size_t)n * sizeof(float);
    float *h = host_alloc(nb);
    for (int i = 0; i < n; i++) h[i] = (float)((i * 7) % 23 - 11);
    float *dx = dev_alloc(nb), *dout = dev_alloc(8 * sizeof(float));
    CK(cudaMemcpy(dx, h, nb, cudaMemcpyHostToDevice));
    cudaStream_t s = new_stream();
    for (int o = 0; o < 3; o++) {
        set_order(k_orders[o]);
        for (int c = 0; c < 2; c++) {
            unsigned grid = grids[c], block = blocks[c];
            float want[8] = {0}, got[8];
            for (int i = 0; i < n; i++) want[((unsigned)i / block) % grid] += h[i];
            ig_probe_block_sum(dx, dout, n, grid, block, s);
            CK(cudaStreamSynchronize(s)); /* the kernel runs here, in this order */
            CK(cudaMemcpy(got, dout, grid * sizeof(float), cudaMemcpyDeviceToHost));
            for (unsigned b = 0; b < grid; b++) {
                if (got[b] != want[b])
                    fprintf(stderr, "block_sum %s grid %u block %u: block %u %g, expected %g\n",
                            k_orders[o], grid, block, b, (double)got[b], (double)want[b]);
                CU_ASSERT_EQUAL(got[b], want[b]);
            }
        }
    }
    restore_order();
    CK(cudaStreamDestroy(s));
    CK(cudaFree(dx));
    CK(cudaFree(dout));
    free(h);
}

/* IG_EMU_ORDER is honoured: without barriers, threads run one after another in the order asked
 * for (forward: 0, 1, ...; reverse: the opposite; random: some other permutation). */
static void test_thread_orders_differ(void) {
    enum { N = 128 };
    int *dcount = dev_alloc(sizeof(int)), *dout = dev_alloc(N * sizeof(int));
    cudaStream_t s = new_stream();
    for (int o = 0; o < 3; o++) {
        int zero = 0, got[N], seen[N] = {0};
        CK(cudaMemcpy(dcount, &zero, sizeof zero, cudaMemcpyHostToDevice));
        set_order(k_orders[o]);
        ig_probe_ticket(dcount, dout, N, s);
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(got, dout, sizeof got, cudaMemcpyDeviceToHost));
        int fwd = 1, rev = 1, perm = 1;
        for (int t = 0; t < N; t++) {
            fwd &= got[t] == t;
            rev &= got[t] == N - 1 - t;
            if (got[t] < 0 || got[t] >= N || seen[got[t]]++) perm = 0;
        }
        CU_ASSERT(perm);
        if (o == 0) CU_ASSERT(fwd);
        if (o == 1) CU_ASSERT(rev);
        if (o == 2) CU_ASSERT(!fwd && !rev);
    }
    restore_order();
    CK(cudaStreamDestroy(s));
    CK(cudaFree(dcount));
    CK(cudaFree(dout));
}

/* The reduction without its __syncthreads gives a wrong sum in at least one thread order (warp
 * 0 reads partial sums other warps have not written yet): the orders expose such races. */
static void test_racy_reduction_caught(void) {
    enum { N = 128 };
    float h[N], got;
    float *dx = dev_alloc(sizeof h), *dout = dev_alloc(sizeof(float));
    cudaStream_t s = new_stream();
    int wrong = 0;
    for (int o = 0; o < 3; o++) {
        /* a different input each time: stale partial sums from the last launch are wrong too */
        fill(h, N, (float)(o + 1));
        CK(cudaMemcpy(dx, h, sizeof h, cudaMemcpyHostToDevice));
        set_order(k_orders[o]);
        ig_probe_racy_sum(dx, dout, N, s);
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(&got, dout, sizeof got, cudaMemcpyDeviceToHost));
        fprintf(stderr, "racy sum, %s order: %g (correct %g)\n", k_orders[o], (double)got,
                (double)(N * (o + 1)));
        wrong += got != (float)(N * (o + 1));
    }
    restore_order();
    CU_ASSERT(wrong >= 1);
    CK(cudaStreamDestroy(s));
    CK(cudaFree(dx));
    CK(cudaFree(dout));
}

/* extern __shared__: each block reverses its segment through dynamic shared memory (also with
 * the 48 KiB maximum asked for). */
static void test_dynamic_shared_memory(void) {
    const unsigned blocks = 3, block = 100;
    const int n = (int)(blocks * block);
    size_t nb = (size_t)n * sizeof(float);
    float *h = host_alloc(nb), *got = host_alloc(nb);
    for (int i = 0; i < n; i++) h[i] = (float)i;
    float *dx = dev_alloc(nb), *dy = dev_alloc(nb);
    CK(cudaMemcpy(dx, h, nb, cudaMemcpyHostToDevice));
    cudaStream_t s = new_stream();
    const size_t smems[2] = {block * sizeof(float), 48 * 1024};
    for (int k = 0; k < 2; k++) {
        CK(cudaMemset(dy, 0, nb));
        ig_probe_reverse(dx, dy, blocks, block, smems[k], s);
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(got, dy, nb, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (unsigned b = 0; b < blocks; b++)
            for (unsigned t = 0; t < block; t++)
                bad += got[b * block + t] != h[b * block + block - 1 - t];
        CU_ASSERT_EQUAL(bad, 0);
    }
    CK(cudaStreamDestroy(s));
    CK(cudaFree(dx));
    CK(cudaFree(dy));
    free(h);
    free(got);
}

/* ---- deferred execution ---------------------------------------------------------------------- */

/* An async H2D copy out of pinned memory reads its source when the stream runs: overwriting the
 * source before cudaStreamSynchronize changes what the device gets (the emulator showing the
 * missing synchronisation; a GPU may copy either value). A pageable source is read at the call,
 * as CUDA stages it before returning. */
/* Queues an H2D copy of src (filled with `queued`), overwrites src with `later` before the sync,
 * and returns how many of the n values the device got are not `expect`. */
static int h2d_overwritten(float *src, float *d, float *got, int n, cudaStream_t s, float queued,
                           float later, float expect) {
    size_t nb = (size_t)n * sizeof(float);
    fill(src, n, queued);
    CK(cudaMemcpyAsync(d, src, nb, cudaMemcpyHostToDevice, s));
    fill(src, n, later); /* before the sync: the bug the emulator exposes */
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(got, d, nb, cudaMemcpyDeviceToHost));
    return count_not(got, n, expect);
}

static void test_deferred_h2d(void) {
    const int n = 256;
    size_t nb = (size_t)n * sizeof(float);
    float *pin = pinned_alloc(nb), *pg = host_alloc(nb), *got = host_alloc(nb);
    float *d = dev_alloc(nb);
    cudaStream_t s = new_stream();
    CU_ASSERT_EQUAL(h2d_overwritten(pin, d, got, n, s, 1.0f, 2.0f, 2.0f), 0); /* read late */
    CU_ASSERT_EQUAL(h2d_overwritten(pg, d, got, n, s, 3.0f, 4.0f, 3.0f), 0);  /* staged */

    CK(cudaStreamDestroy(s));
    CK(cudaFree(d));
    CK(cudaFreeHost(pin));
    free(pg);
    free(got);
}

/* An async D2H copy into pinned memory, and a kernel writing mapped pinned memory, are not
 * visible before the stream (or an event after them) is synchronised, and are after; a D2H copy
 * into pageable memory is complete when the call returns. */
static void test_deferred_d2h(void) {
    const int n = 300;
    size_t nb = (size_t)n * sizeof(float);
    float *pin = pinned_alloc(nb), *pg = host_alloc(nb), *h = host_alloc(nb);
    float *d = dev_alloc(nb);
    fill(h, n, 5.0f);
    CK(cudaMemcpy(d, h, nb, cudaMemcpyHostToDevice));
    cudaStream_t s = new_stream();

    fill(pin, n, 0.0f);
    CK(cudaMemcpyAsync(pin, d, nb, cudaMemcpyDeviceToHost, s));
    CU_ASSERT_EQUAL(count_not(pin, n, 0.0f), 0); /* not yet */
    CK(cudaStreamSynchronize(s));
    CU_ASSERT_EQUAL(count_not(pin, n, 5.0f), 0);

    fill(pg, n, 0.0f);
    CK(cudaMemcpyAsync(pg, d, nb, cudaMemcpyDeviceToHost, s));
    CU_ASSERT_EQUAL(count_not(pg, n, 5.0f), 0); /* at once */

    /* a kernel's writes to mapped pinned memory: at cudaEventSynchronize */
    cudaEvent_t ev;
    CK(cudaEventCreate(&ev));
    fill(pin, n, 0.0f);
    ig_probe_scale(d, pin, 3.0f, n, 2, 128, s);
    CK(cudaGetLastError());
    CK(cudaEventRecord(ev, s));
    CU_ASSERT_EQUAL(count_not(pin, n, 0.0f), 0);
    CK(cudaEventSynchronize(ev));
    CU_ASSERT_EQUAL(count_not(pin, n, 15.0f), 0);

    CK(cudaEventDestroy(ev));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(d));
    CK(cudaFreeHost(pin));
    free(pg);
    free(h);
}

/* Producer on stream A (an H2D copy), consumer on stream B (a kernel reading the copy's
 * destination). With cudaStreamWaitEvent the consumer sees the producer's data even though only B
 * is synchronised; without it the consumer reads the old data (A's copy has not run). */
static void test_stream_wait_event(void) {
    const int n = 200;
    size_t nb = (size_t)n * sizeof(float);
    float *src = pinned_alloc(nb), *out = pinned_alloc(nb), *h = host_alloc(nb);
    float *dsrc = dev_alloc(nb), *ddst = dev_alloc(nb);
    cudaStream_t a = new_stream(), b = new_stream();
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));

    for (int wait = 1; wait >= 0; wait--) {
        fill(h, n, 1.0f);
        CK(cudaMemcpy(dsrc, h, nb, cudaMemcpyHostToDevice)); /* old data: 1 */
        fill(src, n, 7.0f);
        fill(out, n, 0.0f);
        CK(cudaMemcpyAsync(dsrc, src, nb, cudaMemcpyHostToDevice, a)); /* new data: 7 */
        if (wait) {
            CK(cudaEventRecord(ev, a));
            CK(cudaStreamWaitEvent(b, ev, 0));
        }
        ig_probe_scale(dsrc, ddst, 2.0f, n, 2, 64, b);
        CK(cudaMemcpyAsync(out, ddst, nb, cudaMemcpyDeviceToHost, b));
        CK(cudaStreamSynchronize(b));
        /* with the wait: the new data; without: stale, the missing wait shows */
        CU_ASSERT_EQUAL(count_not(out, n, wait ? 14.0f : 2.0f), 0);
        CK(cudaStreamSynchronize(a));
        CK(cudaMemcpy(h, dsrc, nb, cudaMemcpyDeviceToHost));
        CU_ASSERT_EQUAL(count_not(h, n, 7.0f), 0); /* the producer did run, later */
    }

    CK(cudaEventDestroy(ev));
    CK(cudaStreamDestroy(a));
    CK(cudaStreamDestroy(b));
    CK(cudaFree(dsrc));
    CK(cudaFree(ddst));
    CK(cudaFreeHost(src));
    CK(cudaFreeHost(out));
    free(h);
}

/* cudaEventQuery: cudaErrorNotReady once for pending work (which has not run), then cudaSuccess
 * (and the work has run); an event never recorded is complete. */
static void test_event_query(void) {
    const int n = 64;
    size_t nb = (size_t)n * sizeof(float);
    float *pin = pinned_alloc(nb), *h = host_alloc(nb);
    float *d = dev_alloc(nb);
    fill(h, n, 2.0f);
    CK(cudaMemcpy(d, h, nb, cudaMemcpyHostToDevice));
    cudaStream_t s = new_stream();
    cudaEvent_t ev, never;
    CK(cudaEventCreate(&ev));
    CK(cudaEventCreate(&never));
    CK_IS(cudaEventQuery(never), cudaSuccess);

    fill(pin, n, 0.0f);
    ig_probe_scale(d, pin, 4.0f, n, 1, 64, s);
    CK(cudaEventRecord(ev, s));
    CK_IS(cudaEventQuery(ev), cudaErrorNotReady);
    CU_ASSERT_EQUAL(count_not(pin, n, 0.0f), 0);
    CK_IS(cudaEventQuery(ev), cudaSuccess);
    CU_ASSERT_EQUAL(count_not(pin, n, 8.0f), 0);
    CK_IS(cudaEventQuery(ev), cudaSuccess);
    /* a new record is pending again */
    ig_probe_scale(d, pin, 5.0f, n, 1, 64, s);
    CK(cudaEventRecord(ev, s));
    CK_IS(cudaEventQuery(ev), cudaErrorNotReady);
    CK_IS(cudaEventQuery(ev), cudaSuccess);
    CU_ASSERT_EQUAL(count_not(pin, n, 10.0f), 0);

    CK(cudaEventDestroy(ev));
    CK(cudaEventDestroy(never));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(d));
    CK(cudaFreeHost(pin));
    free(h);
}

/* ---- host access to device memory faults ----------------------------------------------------- */

enum { ACCESS_READ, ACCESS_WRITE, ACCESS_READ_AFTER_KERNEL };

static void child_host_access(const void *arg) {
    int how = *(const int *)arg;
    float *d = NULL;
    if (cudaMalloc((void **)&d, 1024) != cudaSuccess || !d) _exit(4);
    if (how == ACCESS_READ_AFTER_KERNEL) {
        /* device work ran (the arena was accessible meanwhile) and is over */
        cudaStream_t s;
        if (cudaStreamCreate(&s) != cudaSuccess) _exit(5);
        ig_probe_scale(d, d, 1.0f, 256, 1, 256, s);
        if (cudaStreamSynchronize(s) != cudaSuccess) _exit(6);
    }
    signal(SIGSEGV, SIG_DFL); /* not a sanitizer's handler: the parent looks for SIGSEGV */
    report(1);                /* reached the access */
    volatile float *p = d;
    if (how == ACCESS_WRITE)
        p[3] = 1.0f;
    else
        report((long)p[3]);
    report(2); /* not reached when the access faults */
}

static void test_host_access_faults(void) {
    const char *pr = getenv("IG_EMU_PROTECT");
    if (pr && strcmp(pr, "0") == 0) {
        ig_test_skip("IG_EMU_PROTECT=0: device memory is not protected");
        return;
    }
    const char *what[3] = {"read", "write", "read after a kernel"};
    for (int how = 0; how < 3; how++) {
        child_result r;
        run_child(child_host_access, &how, &r);
        int segv = WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGSEGV;
        if (!segv)
            fprintf(stderr, "host %s of device memory: status 0x%x, %d reports; stderr:\n%s\n",
                    what[how], r.status, r.n, r.err);
        CU_ASSERT(segv);
        CU_ASSERT_EQUAL(r.n, 1); /* it got to the access, and no further */
    }
}

/* ---- sticky device faults -------------------------------------------------------------------- */

typedef struct pointer_case {
    int registered; /* 0: malloc; 1: cudaHostRegister'd without cudaHostRegisterMapped */
} pointer_case;

/* A kernel with a host pointer argument: reports the launch's cudaGetLastError, then the sync, two
 * more cudaGetLastError, a cudaMalloc and a cudaMemcpy (sticky: all fail the same way). */
static void child_host_pointer_arg(const void *arg) {
    const pointer_case *c = arg;
    const int n = 256;
    float *d = NULL, *h = malloc((size_t)n * sizeof(float));
    if (!h || cudaMalloc((void **)&d, (size_t)n * sizeof(float)) != cudaSuccess) _exit(4);
    for (int i = 0; i < n; i++) h[i] = 1.0f;
    if (c->registered && cudaHostRegister(h, (size_t)n * sizeof(float), 0) != cudaSuccess) _exit(5);
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) _exit(6);
    ig_probe_scale(h, d, 1.0f, n, 1, 256, s);
    report(cudaStreamSynchronize(s));
    report(cudaGetLastError());
    report(cudaGetLastError());
    void *q = NULL;
    report(cudaMalloc(&q, 64));
    float one = 0;
    report(cudaMemcpy(&one, d, sizeof one, cudaMemcpyDeviceToHost));
}

static void test_host_pointer_argument(void) {
    for (int reg = 0; reg < 2; reg++) {
        pointer_case c = {reg};
        child_result r;
        run_child(child_host_pointer_arg, &c, &r);
        CU_ASSERT(exited_ok(&r));
        CU_ASSERT_EQUAL(r.n, 5);
        for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(reported(&r, i), cudaErrorIllegalAddress);
        CU_ASSERT(strstr(r.err, "probe_scale_kernel") != NULL);
        CU_ASSERT(strstr(r.err, reg ? "pinned host memory that is not mapped"
                                    : "pageable host memory") != NULL);
    }
}

/* The same check reaches pointers inside a structure passed by value: ig_cuda_attention_rows with
 * its key table (a.k) in pageable host memory is a sticky cudaErrorIllegalAddress naming the
 * kernel; the same call with the table on the device works. `arg` != NULL: the bad case. */
static void child_struct_pointer(const void *arg) {
    const int hd = 8, rows = 4;
    size_t tb = (size_t)rows * hd * sizeof(float);
    float *k = NULL, *v = NULL, *q = NULL, *out = NULL;
    int32_t *nsel = NULL, four = rows;
    float *host_k = malloc(tb);
    if (!host_k || cudaMalloc((void **)&k, tb) != cudaSuccess ||
        cudaMalloc((void **)&v, tb) != cudaSuccess ||
        cudaMalloc((void **)&q, hd * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&out, hd * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&nsel, sizeof(int32_t)) != cudaSuccess)
        _exit(4);
    for (int i = 0; i < rows * hd; i++) host_k[i] = 0.5f;
    if (cudaMemcpy(k, host_k, tb, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(v, host_k, tb, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(q, host_k, hd * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(nsel, &four, sizeof four, cudaMemcpyHostToDevice) != cudaSuccess)
        _exit(5);
    ig_cuda_attn_rows a;
    memset(&a, 0, sizeof a);
    a.batch = 1;
    a.n_head = a.n_kv_head = 1;
    a.hd = hd;
    a.scale = 1.0f;
    a.kv_dtype = IG_DTYPE_F32;
    a.k = arg ? (const void *)host_k : (const void *)k;
    a.v = v;
    a.table_stride = (int64_t)rows * hd;
    a.row_stride = hd;
    a.n_sel = nsel;
    ig_error err;
    memset(&err, 0, sizeof err);
    report(ig_cuda_attention_rows(&a, q, out, NULL, &err) == IG_OK ? cudaSuccess
                                                                   : cudaErrorUnknown);
    report(cudaDeviceSynchronize());
    report(cudaGetLastError());
}

static void test_struct_pointer_member(void) {
    for (int bad = 0; bad < 2; bad++) {
        child_result r;
        run_child(child_struct_pointer, bad ? (const void *)"bad" : NULL, &r);
        CU_ASSERT(exited_ok(&r));
        CU_ASSERT_EQUAL(r.n, 3);
        /* the launch: the emulator finds the fault as it queues the kernel, so the launcher's
         * cudaGetLastError already reports it (cudaErrorUnknown: the child's "launcher failed") */
        CU_ASSERT_EQUAL(reported(&r, 0), bad ? cudaErrorUnknown : cudaSuccess);
        CU_ASSERT_EQUAL(reported(&r, 1), bad ? cudaErrorIllegalAddress : cudaSuccess);
        CU_ASSERT_EQUAL(reported(&r, 2), bad ? cudaErrorIllegalAddress : cudaSuccess);
        if (bad) CU_ASSERT(strstr(r.err, "attn_rows_kernel") != NULL);
    }
}

typedef struct misuse_case {
    ig_probe_misuse which;
    const char *order;
} misuse_case;

/* A misused barrier: reports the launch's cudaGetLastError (fine: the kernel has not run), then
 * the sync, two more cudaGetLastError and a cudaMalloc. */
static void child_misuse(const void *arg) {
    const misuse_case *c = arg;
    setenv("IG_EMU_ORDER", c->order, 1);
    float *y = NULL;
    if (cudaMalloc((void **)&y, 64 * sizeof(float)) != cudaSuccess) _exit(4);
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) _exit(5);
    ig_probe_misuse_launch(c->which, y, s);
    report(cudaGetLastError());
    report(cudaStreamSynchronize(s));
    report(cudaGetLastError());
    report(cudaGetLastError());
    void *q = NULL;
    report(cudaMalloc(&q, 64));
}

/* Each barrier misuse is a sticky cudaErrorLaunchFailure naming the kernel, in every order. */
static void test_barrier_misuse(void) {
    for (int w = 0; w < IG_PROBE_N_MISUSE; w++)
        for (int o = 0; o < 3; o++) {
            misuse_case c = {(ig_probe_misuse)w, k_orders[o]};
            const char *kname = ig_probe_misuse_kernel(c.which);
            child_result r;
            run_child(child_misuse, &c, &r);
            int ok = exited_ok(&r) && r.n == 5 && reported(&r, 0) == cudaSuccess;
            for (int i = 1; i < 5; i++) ok = ok && reported(&r, i) == cudaErrorLaunchFailure;
            ok = ok && strstr(r.err, kname) != NULL;
            if (!ok)
                fprintf(stderr, "%s, %s order: %d reports (%s, %s, ...); stderr:\n%s\n", kname,
                        c.order, r.n, cudaGetErrorName(reported(&r, 0)),
                        cudaGetErrorName(reported(&r, 1)), r.err);
            CU_ASSERT(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
            CU_ASSERT_EQUAL(r.n, 5);
            CU_ASSERT_EQUAL(reported(&r, 0), cudaSuccess);
            for (int i = 1; i < 5; i++) CU_ASSERT_EQUAL(reported(&r, i), cudaErrorLaunchFailure);
            CU_ASSERT(strstr(r.err, kname) != NULL);
        }
}

/* ---- launch configuration: an error of the launch, not sticky -------------------------------- */

/* Reports: cudaGetLastError after a 2048-thread block, then again; after a grid of 0 blocks; after
 * 64 KiB of dynamic shared memory; then a good launch's cudaGetLastError and sync, and whether the
 * output is what the good launch (alone) wrote. */
static void child_bad_config(const void *arg) {
    (void)arg;
    enum { N = 256 };
    float h[N], got[N];
    float *dx = NULL, *dy = NULL;
    if (cudaMalloc((void **)&dx, sizeof h) != cudaSuccess ||
        cudaMalloc((void **)&dy, sizeof h) != cudaSuccess)
        _exit(4);
    for (int i = 0; i < N; i++) h[i] = (float)i;
    if (cudaMemcpy(dx, h, sizeof h, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(dy, h, sizeof h, cudaMemcpyHostToDevice) != cudaSuccess)
        _exit(5);
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) _exit(6);
    ig_probe_scale(dx, dy, 10.0f, N, 1, 2048, s);
    report(cudaGetLastError());
    report(cudaGetLastError());
    ig_probe_scale(dx, dy, 10.0f, N, 0, 256, s);
    report(cudaGetLastError());
    ig_probe_reverse(dx, dy, 1, N, 64 * 1024, s);
    report(cudaGetLastError());
    report(cudaStreamSynchronize(s)); /* none of them ran */
    if (cudaMemcpy(got, dy, sizeof got, cudaMemcpyDeviceToHost) != cudaSuccess) _exit(7);
    report(memcmp(got, h, sizeof h) == 0);
    ig_probe_scale(dx, dy, 3.0f, N, 1, 256, s);
    report(cudaGetLastError());
    report(cudaStreamSynchronize(s));
    if (cudaMemcpy(got, dy, sizeof got, cudaMemcpyDeviceToHost) != cudaSuccess) _exit(8);
    int same = 1;
    for (int i = 0; i < N; i++) same &= got[i] == 3.0f * h[i];
    report(same);
}

static void test_invalid_launch_config(void) {
    child_result r;
    run_child(child_bad_config, NULL, &r);
    CU_ASSERT(exited_ok(&r));
    CU_ASSERT_EQUAL(r.n, 9);
    CU_ASSERT_EQUAL(reported(&r, 0), cudaErrorInvalidConfiguration);
    CU_ASSERT_EQUAL(reported(&r, 1), cudaSuccess); /* read and cleared: not sticky */
    CU_ASSERT_EQUAL(reported(&r, 2), cudaErrorInvalidConfiguration);
    CU_ASSERT_EQUAL(reported(&r, 3), cudaErrorInvalidValue);
    CU_ASSERT_EQUAL(reported(&r, 4), cudaSuccess);
    CU_ASSERT_EQUAL(r.v[5], 1); /* the rejected launches wrote nothing */
    CU_ASSERT_EQUAL(reported(&r, 6), cudaSuccess);
    CU_ASSERT_EQUAL(reported(&r, 7), cudaSuccess);
    CU_ASSERT_EQUAL(r.v[8], 1); /* the good launch after them works */
    CU_ASSERT(strstr(r.err, "invalid launch configuration") != NULL);
}

/* ---- copies: direction and bounds ------------------------------------------------------------ */

static void test_copy_checks(void) {
    const size_t nb = 1024;
    char *pin = pinned_alloc(nb + 64), *pg = host_alloc(nb + 64);
    char *d = dev_alloc(nb), *d2 = dev_alloc(1000);
    memset(pin, 1, nb + 64);
    memset(pg, 2, nb + 64);
    cudaStream_t s = new_stream();
    CK(cudaGetLastError());

    /* direction: the destination of an H2D copy is pageable host memory */
    CK_IS(cudaMemcpyAsync(pg, pin, nb, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue);
    CK_IS(cudaGetLastError(), cudaErrorInvalidValue);
    CK_IS(cudaGetLastError(), cudaSuccess); /* not sticky */
    /* the source of a D2H copy is pageable host memory; a D2D copy from pageable memory; an H2D
     * copy into pageable memory from device memory */
    CK_IS(cudaMemcpyAsync(pin, pg, nb, cudaMemcpyDeviceToHost, s), cudaErrorInvalidValue);
    CK_IS(cudaMemcpyAsync(d, pg, nb, cudaMemcpyDeviceToDevice, s), cudaErrorInvalidValue);
    CK_IS(cudaMemcpy(pg, d, nb, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    CU_ASSERT_EQUAL(pg[0], 2); /* nothing was copied */

    /* bounds: past the end of a cudaMalloc allocation, either side of the copy */
    CK_IS(cudaMemcpyAsync(d, pin, nb + 4, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue);
    CK_IS(cudaMemcpyAsync(d + 512, pin, 516, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue);
    CK_IS(cudaMemcpyAsync(pin, d + 1, nb, cudaMemcpyDeviceToHost, s), cudaErrorInvalidValue);
    CK_IS(cudaMemcpy(pg, d, nb + 1, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    /* past the size asked for, inside the allocator's rounding (1000 -> 1024 bytes) */
    CK_IS(cudaMemcpyAsync(d2, pin, 1001, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue);
    CK_IS(cudaMemcpy(pg, d2 + 8, 1000, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);

    /* the same copies inside the allocations work, and nothing above was sticky */
    CK(cudaMemcpyAsync(d, pin, nb, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(d2, pin, 1000, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(d + 512, pin, 512, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(pg, d2, 1000, cudaMemcpyDeviceToHost));
    CU_ASSERT(pg[0] == 1 && pg[999] == 1 && pg[1000] == 2);

    CK(cudaStreamDestroy(s));
    CK(cudaFree(d));
    CK(cudaFree(d2));
    CK(cudaFreeHost(pin));
    free(pg);
}

/* ---- cuBLAS GemmEx --------------------------------------------------------------------------- */

/* f16 bits of a small integer (|v| < 2048: exact). */
static uint16_t f16_of_int(int v) {
    if (v == 0) return 0;
    uint16_t sign = v < 0 ? 0x8000u : 0u;
    unsigned a = (unsigned)(v < 0 ? -v : v);
    int e = 31 - __builtin_clz(a);
    unsigned mant = (a << (10 - e)) & 0x3ffu;
    return (uint16_t)(sign | (unsigned)((e + 15) << 10) | mant);
}

static void test_cublas_gemm(void) {
    enum { M = 3, N = 4, K = 5 };
    int ai[M * K], bi[K * N]; /* column-major: A m x k (lda M), B k x n (ldb K) */
    uint16_t ah[M * K], aht[K * M], bh[K * N];
    for (int c = 0; c < K; c++)
        for (int r = 0; r < M; r++) {
            ai[c * M + r] = (r * 5 + c * 3) % 7 - 3;
            ah[c * M + r] = f16_of_int(ai[c * M + r]);
            aht[r * K + c] = ah[c * M + r]; /* A^T stored k x m (lda K) */
        }
    for (int i = 0; i < K * N; i++) {
        bi[i] = (i * 11) % 9 - 4;
        bh[i] = f16_of_int(bi[i]);
    }
    float want[M * N];
    for (int c = 0; c < N; c++)
        for (int r = 0; r < M; r++) {
            int acc = 0;
            for (int k = 0; k < K; k++) acc += ai[k * M + r] * bi[c * K + k];
            want[c * M + r] = (float)acc;
        }
    uint16_t *dA = dev_alloc(sizeof ah), *dAt = dev_alloc(sizeof aht), *dB = dev_alloc(sizeof bh);
    float *dC = dev_alloc(sizeof want);
    CK(cudaMemcpy(dA, ah, sizeof ah, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dAt, aht, sizeof aht, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dB, bh, sizeof bh, cudaMemcpyHostToDevice));
    float sentinel[M * N], got[M * N], pg[M * N];
    fill(sentinel, M * N, -1.0f);
    CK(cudaMemcpy(dC, sentinel, sizeof sentinel, cudaMemcpyHostToDevice));

    cublasHandle_t h = NULL;
    CU_ASSERT_FATAL(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    cudaStream_t s = new_stream();
    CU_ASSERT_EQUAL(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
    const float one = 1.0f, zero = 0.0f;
    const cublasOperation_t N_ = CUBLAS_OP_N;

    /* argument checks: nothing is queued, C keeps its sentinel */
    CU_ASSERT_EQUAL(cublasGemmEx(h, N_, N_, M, N, K, &one, dA, CUDA_R_16F, M, dB, CUDA_R_16F, K,
                                 &zero, dC, CUDA_R_32F, M - 1, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT),
                    CUBLAS_STATUS_INVALID_VALUE); /* ldc < m */
    CU_ASSERT_EQUAL(cublasGemmEx(h, N_, N_, M, N, K, &one, dA, CUDA_R_16F, M - 1, dB, CUDA_R_16F, K,
                                 &zero, dC, CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    CUBLAS_STATUS_INVALID_VALUE); /* lda < m */
    CU_ASSERT_EQUAL(cublasGemmEx(h, N_, N_, M, N, K, &one, dA, CUDA_R_16F, M, dB, CUDA_R_16F, K - 1,
                                 &zero, dC, CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    CUBLAS_STATUS_INVALID_VALUE); /* ldb < k */
    CU_ASSERT_EQUAL(cublasGemmEx(h, CUBLAS_OP_T, N_, M, N, K, &one, dAt, CUDA_R_16F, M, dB,
                                 CUDA_R_16F, K, &zero, dC, CUDA_R_32F, M, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT),
                    CUBLAS_STATUS_INVALID_VALUE); /* op(A) = A^T: lda must be >= k */
    CU_ASSERT_EQUAL(cublasGemmEx(h, N_, N_, M, N, K, &one, dA, CUDA_R_16F, M, dB, CUDA_R_32F, K,
                                 &zero, dC, CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    CUBLAS_STATUS_NOT_SUPPORTED); /* A f16, B f32 */
    CU_ASSERT_EQUAL(cublasGemmEx(h, N_, N_, M, N, K, &one, dA, CUDA_R_16F, M, dB, CUDA_R_16F, K,
                                 &zero, dC, CUDA_R_32F, M, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT),
                    CUBLAS_STATUS_NOT_SUPPORTED); /* compute type */
    CU_ASSERT_EQUAL(cublasGemmEx(h, N_, N_, M, N, K, &one, dA, CUDA_R_16F, M, dB, CUDA_R_16F, K,
                                 &zero, pg, CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    CUBLAS_STATUS_INVALID_VALUE); /* C in pageable host memory */
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(got, dC, sizeof got, cudaMemcpyDeviceToHost));
    CU_ASSERT(memcmp(got, sentinel, sizeof got) == 0);

    /* f16 x f16 -> f32, f32 accumulation: exact on small integers; A as is, then A^T with op T */
    for (int t = 0; t < 2; t++) {
        CK(cudaMemcpy(dC, sentinel, sizeof sentinel, cudaMemcpyHostToDevice));
        CU_ASSERT_EQUAL(cublasGemmEx(h, t ? CUBLAS_OP_T : N_, N_, M, N, K, &one, t ? dAt : dA,
                                     CUDA_R_16F, t ? K : M, dB, CUDA_R_16F, K, &zero, dC,
                                     CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                        CUBLAS_STATUS_SUCCESS);
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(got, dC, sizeof got, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int i = 0; i < M * N; i++) bad += got[i] != want[i];
        CU_ASSERT_EQUAL(bad, 0);
    }
    /* alpha 2, beta 0.5 over C = the product: C = 2.5 * product */
    const float two = 2.0f, halfv = 0.5f;
    CU_ASSERT_EQUAL(cublasGemmEx(h, N_, N_, M, N, K, &two, dA, CUDA_R_16F, M, dB, CUDA_R_16F, K,
                                 &halfv, dC, CUDA_R_32F, M, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT),
                    CUBLAS_STATUS_SUCCESS);
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(got, dC, sizeof got, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < M * N; i++) bad += got[i] != 2.5f * want[i];
    CU_ASSERT_EQUAL(bad, 0);

    CU_ASSERT_EQUAL(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    CK(cudaStreamDestroy(s));
    CK(cudaFree(dA));
    CK(cudaFree(dAt));
    CK(cudaFree(dB));
    CK(cudaFree(dC));
}

void ig_test_register(void) {
    /* the arena's page protection is what host_access_faults tests: on even where the emulator
     * would leave it off by default (no transparent huge pages) */
    setenv("IG_EMU_PROTECT", "1", 0);
    CU_pSuite s = CU_add_suite("emu_self", NULL, NULL);
    CU_add_test(s, "copy_kernel", test_copy_kernel);
    CU_add_test(s, "fresh_alloc_is_poisoned", test_fresh_alloc_is_poisoned);
    CU_add_test(s, "block_sum_all_orders", test_block_sum_all_orders);
    CU_add_test(s, "thread_orders_differ", test_thread_orders_differ);
    CU_add_test(s, "racy_reduction_caught", test_racy_reduction_caught);
    CU_add_test(s, "dynamic_shared_memory", test_dynamic_shared_memory);
    CU_add_test(s, "deferred_h2d", test_deferred_h2d);
    CU_add_test(s, "deferred_d2h", test_deferred_d2h);
    CU_add_test(s, "stream_wait_event", test_stream_wait_event);
    CU_add_test(s, "event_query", test_event_query);
    CU_add_test(s, "host_access_faults", test_host_access_faults);
    CU_add_test(s, "host_pointer_argument", test_host_pointer_argument);
    CU_add_test(s, "struct_pointer_member", test_struct_pointer_member);
    CU_add_test(s, "barrier_misuse", test_barrier_misuse);
    CU_add_test(s, "invalid_launch_config", test_invalid_launch_config);
    CU_add_test(s, "copy_checks", test_copy_checks);
    CU_add_test(s, "cublas_gemm", test_cublas_gemm);
}
