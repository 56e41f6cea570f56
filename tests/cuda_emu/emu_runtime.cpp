/* The CUDA emulator's runtime (see docs/cuda.md, "The CUDA emulator"): the subset of the CUDA
 * runtime and cuBLAS that kernels/cuda/ calls, implemented on the CPU, so that the CUDA backend's
 * own code (its kernels, launch geometry, streams, events, copies and GEMM arguments, and the
 * engine driving them) runs and is checked on machines without a GPU. It is not a GPU, and its
 * device name says so.
 *
 * What it checks beyond running the code:
 *   - Device memory lives in one arena that is PROT_NONE whenever no device work runs, so host
 *     code that reads or writes a device pointer faults at once. New allocations are filled with
 *     0xff bytes (NaN floats), so reads of memory nobody wrote show.
 *   - Work is deferred: an operation queued on a stream runs only when the host has to see it (a
 *     stream, event or device synchronisation, a blocking copy, cudaFree, a copy to pageable
 *     memory) or another stream waits for it. Copies out of pinned memory read their source then.
 *     A missing synchronisation or event wait shows as stale data.
 *   - Kernel pointer arguments must be device memory or mapped pinned memory; copy directions
 *     must match the pointers and stay inside their allocations; launch configurations are checked
 *     as a GPU checks them; cublasGemmEx's arguments as its documentation states them.
 *   - Barriers that cannot complete are errors of the launch (emu_device.h).
 * An error found while work runs is sticky, like a device fault: every later call returns it, and
 * a message naming the kernel or call goes to stderr.
 *
 * Environment: IG_EMU_DEVICE_MEM (bytes of device memory, default 16 GiB),
 * IG_EMU_ORDER=forward|reverse|random (the order of a block's threads between barriers),
 * IG_EMU_PROTECT=0|1 (page protection of the arena off / on; by default on where transparent huge
 * pages can back the arena, since with 4 KiB pages each protection change walks every page),
 * IG_EMU_EAGER=1 (stream work runs as soon as it is queued: the opposite interleaving of the
 * default, which runs it as late as possible). */
#include <cblas.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "kernels/cuda/cuda_kernels.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

uint3 ig_emu_thread_idx, ig_emu_block_idx;
dim3 ig_emu_block_dim, ig_emu_grid_dim;

/* ---- streams, events, handles ---------------------------------------------------------------- */

struct Op {
    std::function<void()> run;
};

struct CUstream_st {
    std::deque<Op> q;
    uint64_t queued = 0, done = 0; /* operations ever queued on it, and run */
    bool nonblocking = false, legacy = false, destroyed = false, flushing = false;
};

struct CUevent_st {
    CUstream_st *s = nullptr;
    uint64_t seq = 0; /* complete once s->done >= seq */
    bool recorded = false, timing = true, destroyed = false, queried = false;
    double t_ms = 0.0;
};

struct cublasContext {
    CUstream_st *s = nullptr;
};

namespace {

std::recursive_mutex g_mu;
CUstream_st g_legacy;
std::vector<std::unique_ptr<CUstream_st>> g_streams; /* kept after destroy: waits may name them */
std::vector<std::unique_ptr<CUevent_st>> g_events;
cudaError_t g_last = cudaSuccess, g_sticky = cudaSuccess;
bool g_protect = true;
bool g_eager = false; /* IG_EMU_EAGER=1: stream work runs when queued (the other extreme) */

void emu_vlog(const char *what, const char *fmt, va_list ap) {
    fprintf(stderr, "igen CUDA emulator: %s", what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void emu_log(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emu_vlog("", fmt, ap);
    va_end(ap);
}

/* A fault found while device work runs: sticky from now on. */
void emu_fault(cudaError_t e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emu_vlog("device fault: ", fmt, ap);
    va_end(ap);
    if (g_sticky == cudaSuccess) g_sticky = e;
}

/* An error of the call itself (not sticky); cudaGetLastError reports it too. */
cudaError_t emu_fail(cudaError_t e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emu_vlog("", fmt, ap);
    va_end(ap);
    g_last = e;
    return e;
}

double now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- device memory: one arena, protected while no device work runs --------------------------- */

char *g_arena;
size_t g_arena_size, g_hw; /* reserved bytes; high-water mark (page multiple) */
/* g_free: offset -> length; g_used: offset -> the bytes asked for (an allocation's extent for the
 * range checks; it occupies them rounded up to 256) */
std::map<size_t, size_t> g_free, g_used;
int g_dev_depth;
size_t g_page = 4096;
const size_t k_huge = (size_t)2 << 20;

/* Whether madvise(MADV_HUGEPAGE) can give the arena 2 MiB pages. */
bool huge_pages_usable() {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return false;
    char buf[128] = "";
    bool ok = fgets(buf, sizeof buf, f) && !strstr(buf, "[never]");
    fclose(f);
    return ok;
}

bool arena_init() {
    if (g_arena) return true;
    size_t sz = (size_t)16 << 30;
    const char *e = getenv("IG_EMU_DEVICE_MEM");
    if (e && *e) sz = (size_t)strtoull(e, nullptr, 10);
    g_page = (size_t)sysconf(_SC_PAGESIZE);
    sz = (sz + k_huge - 1) / k_huge * k_huge;
    if (sz == 0) sz = k_huge;
    /* 2 MiB aligned and advised huge: protecting the arena then changes one entry per 2 MiB, not
     * one per 4 KiB page (which made mprotect most of the run time with the weights resident) */
    void *p =
        mmap(nullptr, sz + k_huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    g_arena = (char *)(((uintptr_t)p + k_huge - 1) & ~(uintptr_t)(k_huge - 1));
    madvise(g_arena, sz, MADV_HUGEPAGE);
    g_arena_size = sz;
    g_free[0] = sz;
    const char *pr = getenv("IG_EMU_PROTECT");
    if (pr && *pr)
        g_protect = strcmp(pr, "0") != 0;
    else if (!(g_protect = huge_pages_usable()))
        emu_log("transparent huge pages are off here, so device memory is not page-protected "
                "(IG_EMU_PROTECT=1 protects it, slowly)");
    const char *ea = getenv("IG_EMU_EAGER");
    g_eager = ea && strcmp(ea, "1") == 0;
    if (!g_protect) mprotect(g_arena, g_arena_size, PROT_READ | PROT_WRITE);
    return true;
}

void dev_enter() {
    if (g_dev_depth++ == 0 && g_protect && g_hw) mprotect(g_arena, g_hw, PROT_READ | PROT_WRITE);
}
void dev_leave() {
    if (--g_dev_depth == 0 && g_protect && g_hw) mprotect(g_arena, g_hw, PROT_NONE);
}

bool in_arena(const void *p) {
    return g_arena && (const char *)p >= g_arena && (const char *)p < g_arena + g_arena_size;
}

/* The live allocation holding [p, p + n) (n may be 0: p may then be its end), or false. */
bool arena_range_ok(const void *p, size_t n) {
    size_t off = (size_t)((const char *)p - g_arena);
    auto it = g_used.upper_bound(off);
    if (it == g_used.begin()) return false;
    --it;
    return off >= it->first && off + n <= it->first + it->second;
}

/* ---- pinned host memory ---------------------------------------------------------------------- */

struct Pinned {
    size_t n;
    bool mapped, owned;
};
std::map<uintptr_t, Pinned> g_pinned;

const Pinned *pinned_find(const void *p, size_t n, uintptr_t *base) {
    uintptr_t a = (uintptr_t)p;
    auto it = g_pinned.upper_bound(a);
    if (it == g_pinned.begin()) return nullptr;
    --it;
    if (a < it->first || a + n > it->first + it->second.n) return nullptr;
    if (base) *base = it->first;
    return &it->second;
}

enum Where { PAGEABLE, PINNED, MAPPED, DEVICE, BAD_DEVICE };

/* Where [p, p + n) lives. */
Where where(const void *p, size_t n) {
    if (in_arena(p)) return arena_range_ok(p, n) ? DEVICE : BAD_DEVICE;
    const Pinned *pi = pinned_find(p, n, nullptr);
    if (pi) return pi->mapped ? MAPPED : PINNED;
    return PAGEABLE;
}
const char *where_name(Where w) {
    switch (w) {
    case PAGEABLE:
        return "pageable host memory";
    case PINNED:
        return "pinned host memory that is not mapped";
    case MAPPED:
        return "mapped pinned host memory";
    case DEVICE:
        return "device memory";
    default:
        return "device memory outside any live allocation";
    }
}
bool device_accessible(Where w) {
    return w == DEVICE || w == MAPPED;
}

/* ---- queues ---------------------------------------------------------------------------------- */

CUstream_st *stream_of(cudaStream_t s) {
    if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return &g_legacy;
    return s;
}
bool stream_ok(cudaStream_t s) {
    CUstream_st *st = stream_of(s);
    if (st == &g_legacy) return true;
    for (auto &p : g_streams)
        if (p.get() == st) return !st->destroyed;
    return false;
}

void flush(CUstream_st *s, uint64_t upto);

void flush_all() {
    for (auto &p : g_streams)
        if (!p->destroyed) flush(p.get(), UINT64_MAX);
}

void flush(CUstream_st *s, uint64_t upto) {
    if (s->flushing) {
        emu_fault(cudaErrorLaunchFailure, "streams wait on each other's events in a cycle");
        return;
    }
    s->flushing = true;
    dev_enter();
    while (s->done < upto && !s->q.empty()) {
        Op op = std::move(s->q.front());
        s->q.pop_front();
        if (g_sticky == cudaSuccess) op.run();
        s->done++;
    }
    dev_leave();
    s->flushing = false;
}

/* Queue `run` on s; the legacy stream first waits for every blocking stream and runs it now.
 * Returns the operation's number on s. */
uint64_t enqueue(cudaStream_t stream, std::function<void()> run) {
    CUstream_st *s = stream_of(stream);
    if (s == &g_legacy) {
        for (auto &p : g_streams)
            if (!p->destroyed && !p->nonblocking) flush(p.get(), UINT64_MAX);
        s->queued++;
        dev_enter();
        if (g_sticky == cudaSuccess) run();
        dev_leave();
        s->done++;
        return s->queued;
    }
    s->q.push_back(Op{std::move(run)});
    ++s->queued;
    if (g_eager) flush(s, UINT64_MAX);
    return s->queued;
}

/* ---- kernels: fibers ------------------------------------------------------------------------- */

enum { F_RUN, F_BLOCK, F_WARP, F_DONE, F_DEAD };

/* Context switches between fibers. On x86-64 a few instructions that save the callee-saved
 * registers and swap stacks (swapcontext also saves the signal mask, a system call each way,
 * which made it most of the emulator's run time); elsewhere ucontext. */
#if defined(__x86_64__)
} // namespace
extern "C" void ig_emu_switch(void **save_sp, void *to_sp);
asm(".text\n"
    ".globl ig_emu_switch\n"
    ".type ig_emu_switch,@function\n"
    "ig_emu_switch:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    ".size ig_emu_switch,.-ig_emu_switch\n");
namespace {
struct Ctx {
    void *sp;
};
void ctx_switch(Ctx *from, Ctx *to) {
    ig_emu_switch(&from->sp, to->sp);
}
/* A new context on [stack, stack + size) that starts in fn (which must never return). */
void ctx_make(Ctx *c, char *stack, size_t size, void (*fn)(), Ctx *) {
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    void **sp = (void **)(top - 64);             /* 16-aligned: fn is entered as if called */
    for (int i = 0; i < 6; i++) sp[i] = nullptr; /* r15 r14 r13 r12 rbx rbp */
    sp[6] = (void *)fn;
    sp[7] = nullptr;
    c->sp = sp;
}
#else
struct Ctx {
    ucontext_t uc;
};
void ctx_switch(Ctx *from, Ctx *to) {
    swapcontext(&from->uc, &to->uc);
}
void ctx_make(Ctx *c, char *stack, size_t size, void (*fn)(), Ctx *link) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = &link->uc;
    makecontext(&c->uc, fn, 0);
}
#endif

struct Fiber {
    Ctx ctx;
    uint3 tid;
    int lane, warp, state;
    uint64_t gen; /* the warp generation it waits for */
};
struct Warp {
    int n_lanes, arrived, exited;
    uint64_t gen;
    const char *what;
    uint64_t slot[2][32];
};

Ctx g_sched;
std::vector<Fiber> g_fibers;
std::vector<Warp> g_warps;
std::vector<char *> g_stacks;
const size_t k_stack = 256 << 10;
Fiber *g_cur; /* the running fiber; nullptr when a block runs without fibers */
int g_block_arrived, g_block_exited;
std::string g_kerr; /* the launch's error */
const char *g_kname;
std::function<void()> *g_body;
std::vector<unsigned char> g_smem;
unsigned g_rng = 12345u;

void kerr(const char *fmt, ...) {
    if (!g_kerr.empty()) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g_kerr = buf;
}

/* Back to the scheduler; returns when the scheduler runs this fiber again. */
void yield_to_sched() {
    ctx_switch(&g_cur->ctx, &g_sched);
}

/* A fiber that hit an error never runs again. */
[[noreturn]] void die_in_fiber() {
    g_cur->state = F_DEAD;
    ctx_switch(&g_cur->ctx, &g_sched);
    abort(); /* not reached: a dead fiber is never resumed */
}

void fiber_entry() {
    (*g_body)();
    g_cur->state = F_DONE;
    ctx_switch(&g_cur->ctx, &g_sched); /* never resumed */
    abort();
}

char *stack_at(size_t i) {
    while (g_stacks.size() <= i) {
        void *p = mmap(nullptr, k_stack + g_page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return nullptr;
        mprotect(p, g_page, PROT_NONE); /* guard page below the stack */
        g_stacks.push_back((char *)p + g_page);
    }
    return g_stacks[i];
}

int order_mode() {
    const char *e = getenv("IG_EMU_ORDER");
    if (!e || !*e || strcmp(e, "forward") == 0) return 0;
    if (strcmp(e, "reverse") == 0) return 1;
    return 2;
}

void make_order(std::vector<int> &ord, int n, int mode) {
    ord.resize((size_t)n);
    for (int i = 0; i < n; i++) ord[(size_t)i] = mode == 1 ? n - 1 - i : i;
    if (mode == 2)
        for (int i = n - 1; i > 0; i--) {
            g_rng = g_rng * 1103515245u + 12345u;
            std::swap(ord[(size_t)i], ord[(size_t)((g_rng >> 8) % (unsigned)(i + 1))]);
        }
}

uint3 tid_of(int i, dim3 b) {
    uint3 t;
    t.x = (unsigned)i % b.x;
    t.y = ((unsigned)i / b.x) % b.y;
    t.z = (unsigned)i / (b.x * b.y);
    return t;
}

void start_fiber(Fiber &f, int i, dim3 b) {
    ctx_make(&f.ctx, g_stacks[(size_t)i], k_stack, fiber_entry, &g_sched);
    f.tid = tid_of(i, b);
    f.lane = i & 31;
    f.warp = i >> 5;
    f.state = F_RUN;
    f.gen = 0;
}

/* Takes turns among the started fibers `set` (in the block's order) until all have left the
 * kernel, or reports the barrier that can never complete. */
void run_fibers(const std::vector<int> &set) {
    size_t done = 0;
    for (int i : set) done += g_fibers[(size_t)i].state == F_DONE;
    while (done < set.size()) {
        bool progressed = false;
        for (int i : set) {
            Fiber &f = g_fibers[(size_t)i];
            if (f.state != F_RUN) continue;
            g_cur = &f;
            ig_emu_thread_idx = f.tid;
            ctx_switch(&g_sched, &f.ctx);
            g_cur = nullptr;
            progressed = true;
            if (!g_kerr.empty()) return;
            if (f.state == F_DONE) {
                done++;
                g_block_exited++;
                Warp &w = g_warps[(size_t)f.warp];
                w.exited++;
                if (g_block_arrived > 0)
                    kerr("thread (%u,%u,%u) left the kernel while others wait at __syncthreads",
                         f.tid.x, f.tid.y, f.tid.z);
                else if (w.arrived > 0)
                    kerr("thread (%u,%u,%u) left the kernel while lanes of its warp wait in %s",
                         f.tid.x, f.tid.y, f.tid.z, w.what);
                if (!g_kerr.empty()) return;
            }
        }
        if (!progressed) {
            int nb = 0, nwp = 0;
            for (int i : set)
                nb += g_fibers[(size_t)i].state == F_BLOCK,
                    nwp += g_fibers[(size_t)i].state == F_WARP;
            kerr("deadlock: %d threads wait at __syncthreads, %d in warp intrinsics", nb, nwp);
            return;
        }
    }
}

/* Runs the fiber of thread i until it first waits or leaves; true if it left. */
bool run_first(int i, dim3 b) {
    start_fiber(g_fibers[(size_t)i], i, b);
    std::vector<int> one(1, i);
    Fiber &f = g_fibers[(size_t)i];
    g_cur = &f;
    ig_emu_thread_idx = f.tid;
    ctx_switch(&g_sched, &f.ctx);
    g_cur = nullptr;
    if (f.state != F_DONE) return false;
    g_block_exited++;
    g_warps[(size_t)f.warp].exited++;
    return true;
}

/* One block. Fibers cost a context switch each way, so they are made only where needed: the
 * block's first thread (in `ord`) runs as a fiber; if it reaches a barrier, every thread gets one
 * and they take turns between barriers. If it leaves the kernel without one, no other thread may
 * reach __syncthreads; each warp's first lane then runs as a fiber too, and only a warp whose
 * first lane reaches a warp intrinsic gets fibers for all its lanes. The remaining threads run one
 * after another; one that reaches a barrier its block or warp has left is reported. */
void run_block(int n, dim3 b, const std::vector<int> &ord) {
    g_fibers.resize((size_t)n);
    int nw = (n + 31) / 32;
    g_warps.assign((size_t)nw, Warp());
    for (int w = 0; w < nw; w++) g_warps[(size_t)w].n_lanes = std::min(32, n - 32 * w);
    g_block_arrived = g_block_exited = 0;
    if (!stack_at((size_t)n - 1)) {
        kerr("no memory for %d thread stacks", n);
        return;
    }
    for (auto &f : g_fibers) f.state = F_DEAD;
    if (!run_first(ord[0], b)) {
        if (!g_kerr.empty()) return;
        for (int i = 0; i < n; i++)
            if (i != ord[0]) start_fiber(g_fibers[(size_t)i], i, b);
        run_fibers(ord);
        return;
    }
    std::vector<char> warp_seen((size_t)nw, 0);
    warp_seen[(size_t)(ord[0] >> 5)] = 1;
    std::vector<int> lanes;
    for (size_t j = 1; j < ord.size() && g_kerr.empty(); j++) {
        int i = ord[j], w = i >> 5;
        if (warp_seen[(size_t)w]) {
            if (g_fibers[(size_t)i].state != F_DEAD) continue; /* ran as a fiber */
            ig_emu_thread_idx = tid_of(i, b);
            (*g_body)();
            continue;
        }
        warp_seen[(size_t)w] = 1;
        if (run_first(i, b)) continue;
        if (!g_kerr.empty()) return;
        lanes.clear();
        for (int k : ord)
            if (k >> 5 == w) {
                if (k != i) start_fiber(g_fibers[(size_t)k], k, b);
                lanes.push_back(k);
            }
        run_fibers(lanes);
    }
}

void run_grid(const char *name, dim3 grid, dim3 block, size_t smem, std::function<void()> &body) {
    g_kname = name;
    g_body = &body;
    g_kerr.clear();
    ig_emu_grid_dim = grid;
    ig_emu_block_dim = block;
    int n = (int)(block.x * block.y * block.z);
    std::vector<int> ord;
    int mode = order_mode();
    g_smem.assign(smem ? smem : 1, 0xff);
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                ig_emu_block_idx.x = x;
                ig_emu_block_idx.y = y;
                ig_emu_block_idx.z = z;
                if (smem) memset(g_smem.data(), 0xff, smem);
                make_order(ord, n, mode);
                run_block(n, block, ord);
                if (!g_kerr.empty()) {
                    emu_fault(cudaErrorLaunchFailure, "kernel %s, block (%u,%u,%u): %s", name, x, y,
                              z, g_kerr.c_str());
                    return;
                }
            }
}

} // namespace

/* ---- device-side entry points (emu_device.h) ------------------------------------------------- */

void *ig_emu_dynamic_smem(void) {
    return g_smem.data();
}

void ig_emu_syncthreads(void) {
    if (!g_cur) {
        uint3 t = ig_emu_thread_idx;
        kerr("thread (%u,%u,%u) reached __syncthreads after other threads of its block left the "
             "kernel without reaching it",
             t.x, t.y, t.z);
        return;
    }
    if (g_block_exited > 0) {
        kerr("__syncthreads reached after %d threads of the block left the kernel", g_block_exited);
        die_in_fiber();
    }
    int n = (int)g_fibers.size();
    g_cur->state = F_BLOCK;
    if (++g_block_arrived == n) {
        g_block_arrived = 0;
        for (auto &f : g_fibers)
            if (f.state == F_BLOCK) f.state = F_RUN;
    }
    yield_to_sched();
}

static unsigned warp_full_mask(const Warp &w) {
    return w.n_lanes == 32 ? 0xffffffffu : ((1u << w.n_lanes) - 1u);
}

uint64_t ig_emu_warp_exchange(unsigned mask, uint64_t mine, int src, const char *what) {
    if (!g_cur) {
        uint3 t = ig_emu_thread_idx;
        kerr("thread (%u,%u,%u) reached %s after other threads of its block left the kernel "
             "without reaching it",
             t.x, t.y, t.z, what);
        return mine;
    }
    Warp &w = g_warps[(size_t)g_cur->warp];
    if ((mask & warp_full_mask(w)) != warp_full_mask(w)) {
        kerr("%s with mask 0x%08x: the emulator supports whole-warp masks only (warp of %d lanes)",
             what, mask, w.n_lanes);
        die_in_fiber();
    }
    if (w.exited > 0) {
        kerr("%s after %d lanes of the warp left the kernel", what, w.exited);
        die_in_fiber();
    }
    if (w.arrived == 0)
        w.what = what;
    else if (strcmp(w.what, what) != 0) {
        kerr("lanes of one warp wait in different intrinsics (%s and %s)", w.what, what);
        die_in_fiber();
    }
    uint64_t gen = w.gen;
    w.slot[gen & 1][g_cur->lane] = mine;
    g_cur->state = F_WARP;
    g_cur->gen = gen;
    if (++w.arrived == w.n_lanes) {
        w.arrived = 0;
        w.gen++;
        int base = g_cur->warp * 32;
        for (int l = 0; l < w.n_lanes; l++)
            if (g_fibers[(size_t)(base + l)].state == F_WARP)
                g_fibers[(size_t)(base + l)].state = F_RUN;
    }
    yield_to_sched();
    int l = src & 31;
    if (l >= w.n_lanes) l = g_cur->lane;
    return w.slot[gen & 1][l];
}

unsigned ig_emu_warp_ballot(unsigned mask, int pred) {
    if (!g_cur) {
        uint3 t = ig_emu_thread_idx;
        kerr("thread (%u,%u,%u) reached __ballot_sync after other threads of its block left the "
             "kernel without reaching it",
             t.x, t.y, t.z);
        return 0;
    }
    int nl = g_warps[(size_t)g_cur->warp].n_lanes, lane = g_cur->lane;
    unsigned r = 0;
    /* one exchange per lane's predicate would be 32; instead exchange the predicate and read all */
    Warp &w = g_warps[(size_t)g_cur->warp];
    uint64_t gen = w.gen;
    (void)ig_emu_warp_exchange(mask, pred ? 1u : 0u, lane, "__ballot_sync");
    for (int l = 0; l < nl; l++)
        if (w.slot[gen & 1][l]) r |= 1u << l;
    return r & mask;
}

void ig_emu_note_ptr(const ig_be_attn_rows &a, const void **out, int *n) {
    const void *p[] = {a.k, a.v, a.idx, a.n_sel, a.k_extra, a.v_extra, a.probs};
    for (const void *q : p) out[(*n)++] = q;
}

void ig_emu_enqueue_kernel(const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                           std::function<void()> body, const void *const *ptrs, int n_ptrs) {
    std::lock_guard<std::recursive_mutex> lk(g_mu);
    if (g_sticky != cudaSuccess) return;
    if (!stream_ok(s)) {
        emu_fail(cudaErrorInvalidResourceHandle, "kernel %s: launch on an invalid stream", name);
        return;
    }
    uint64_t threads = (uint64_t)block.x * block.y * block.z;
    if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > 1024 || block.y > 1024 ||
        block.z > 64 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        emu_fail(cudaErrorInvalidConfiguration,
                 "kernel %s: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u)", name,
                 grid.x, grid.y, grid.z, block.x, block.y, block.z);
        return;
    }
    if (smem > 48 * 1024) {
        emu_fail(cudaErrorInvalidValue, "kernel %s: %zu bytes of dynamic shared memory (> 48 KiB)",
                 name, smem);
        return;
    }
    for (int i = 0; i < n_ptrs; i++) {
        if (!ptrs[i]) continue;
        Where w = where(ptrs[i], 0);
        if (!device_accessible(w)) {
            emu_fault(cudaErrorIllegalAddress,
                      "kernel %s: pointer %d of its arguments (%p, structure members counted in "
                      "order) is %s",
                      name, i + 1, ptrs[i], where_name(w));
            return;
        }
    }
    std::string nm = name;
    auto b = std::make_shared<std::function<void()>>(std::move(body));
    enqueue(s, [nm, grid, block, smem, b]() { run_grid(nm.c_str(), grid, block, smem, *b); });
}

/* ---- the runtime API ------------------------------------------------------------------------- */

#define EMU_LOCK std::lock_guard<std::recursive_mutex> lk_(g_mu)
#define EMU_STICKY                                                                                 \
    do {                                                                                           \
        if (g_sticky != cudaSuccess) return g_sticky;                                              \
    } while (0)

extern "C" {

const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess:
        return "cudaSuccess";
    case cudaErrorInvalidValue:
        return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
        return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
        return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidPitchValue:
        return "cudaErrorInvalidPitchValue";
    case cudaErrorInvalidDevice:
        return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
        return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
        return "cudaErrorNotReady";
    case cudaErrorIllegalAddress:
        return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure:
        return "cudaErrorLaunchFailure";
    case cudaErrorHostMemoryAlreadyRegistered:
        return "cudaErrorHostMemoryAlreadyRegistered";
    case cudaErrorHostMemoryNotRegistered:
        return "cudaErrorHostMemoryNotRegistered";
    case cudaErrorInsufficientDriver:
        return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice:
        return "cudaErrorNoDevice";
    default:
        return "cudaErrorUnknown";
    }
}

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInvalidConfiguration:
        return "invalid configuration argument";
    case cudaErrorInvalidPitchValue:
        return "invalid pitch argument";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
        return "invalid resource handle";
    case cudaErrorNotReady:
        return "device not ready";
    case cudaErrorIllegalAddress:
        return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure:
        return "unspecified launch failure";
    case cudaErrorHostMemoryAlreadyRegistered:
        return "part or all of the requested memory range is already mapped";
    case cudaErrorHostMemoryNotRegistered:
        return "pointer does not correspond to a registered memory region";
    default:
        return "unknown error";
    }
}

cudaError_t cudaGetLastError(void) {
    EMU_LOCK;
    if (g_sticky != cudaSuccess) return g_sticky;
    cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) {
    EMU_LOCK;
    return g_sticky != cudaSuccess ? g_sticky : g_last;
}

cudaError_t cudaGetDeviceCount(int *n) {
    EMU_LOCK;
    if (!arena_init()) {
        *n = 0;
        return emu_fail(cudaErrorMemoryAllocation, "cannot reserve the device arena");
    }
    *n = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device) {
    EMU_LOCK;
    if (device != 0) return emu_fail(cudaErrorInvalidDevice, "device %d (there is one)", device);
    if (!arena_init()) return emu_fail(cudaErrorMemoryAllocation, "cannot reserve the arena");
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "igen CUDA emulator on the CPU (not a GPU)");
    p->totalGlobalMem = g_arena_size;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    p->canMapHostMemory = 1;
    p->asyncEngineCount = 2;
    p->unifiedAddressing = 1;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->sharedMemPerBlock = 48 * 1024;
    p->maxThreadsDim[0] = 1024;
    p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = 65535;
    p->maxGridSize[2] = 65535;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v) {
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) {
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    EMU_LOCK;
    EMU_STICKY;
    if (device != 0) return emu_fail(cudaErrorInvalidDevice, "cudaSetDevice(%d)", device);
    return arena_init() ? cudaSuccess
                        : emu_fail(cudaErrorMemoryAllocation, "cannot reserve the arena");
}

cudaError_t cudaDeviceSynchronize(void) {
    EMU_LOCK;
    EMU_STICKY;
    flush_all();
    return g_sticky;
}

cudaError_t cudaMalloc(void **out, size_t n) {
    EMU_LOCK;
    EMU_STICKY;
    *out = nullptr;
    if (!arena_init()) return emu_fail(cudaErrorMemoryAllocation, "cannot reserve the arena");
    if (n == 0) return cudaSuccess;
    size_t need = (n + 255) / 256 * 256;
    for (auto it = g_free.begin(); it != g_free.end(); ++it) {
        if (it->second < need) continue;
        size_t off = it->first, len = it->second;
        g_free.erase(it);
        if (len > need) g_free[off + need] = len - need;
        g_used[off] = n;
        size_t end = (off + need + k_huge - 1) / k_huge * k_huge;
        if (end > g_hw) {
            if (g_protect && g_dev_depth > 0) mprotect(g_arena, end, PROT_READ | PROT_WRITE);
            g_hw = end;
        }
        dev_enter();
        memset(g_arena + off, 0xff, n); /* never-written device memory reads as NaN */
        dev_leave();
        *out = g_arena + off;
        return cudaSuccess;
    }
    return emu_fail(cudaErrorMemoryAllocation, "cudaMalloc(%zu): out of emulated device memory", n);
}

cudaError_t cudaFree(void *p) {
    EMU_LOCK;
    EMU_STICKY;
    if (!p) return cudaSuccess;
    flush_all(); /* cudaFree synchronises the device */
    if (!in_arena(p)) return emu_fail(cudaErrorInvalidValue, "cudaFree(%p): not device memory", p);
    size_t off = (size_t)((char *)p - g_arena);
    auto it = g_used.find(off);
    if (it == g_used.end())
        return emu_fail(cudaErrorInvalidValue, "cudaFree(%p): not the start of an allocation", p);
    size_t len = (it->second + 255) / 256 * 256;
    g_used.erase(it);
    /* give whole pages back to the system */
    size_t a = (off + k_huge - 1) / k_huge * k_huge, b = (off + len) / k_huge * k_huge;
    if (b > a) madvise(g_arena + a, b - a, MADV_DONTNEED);
    auto nx = g_free.lower_bound(off);
    if (nx != g_free.end() && nx->first == off + len) {
        len += nx->second;
        g_free.erase(nx);
    }
    auto pv = g_free.lower_bound(off);
    if (pv != g_free.begin()) {
        --pv;
        if (pv->first + pv->second == off) {
            pv->second += len;
            return cudaSuccess;
        }
    }
    g_free[off] = len;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **out, size_t n, unsigned flags) {
    EMU_LOCK;
    EMU_STICKY;
    *out = nullptr;
    if (n == 0) return cudaSuccess;
    void *p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
    if (!p) return emu_fail(cudaErrorMemoryAllocation, "cudaHostAlloc(%zu)", n);
    /* with unified addressing every cudaHostAlloc allocation is device-accessible */
    g_pinned[(uintptr_t)p] = Pinned{n, true, true};
    *out = p;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **out, size_t n) {
    return cudaHostAlloc(out, n, 0);
}

cudaError_t cudaFreeHost(void *p) {
    EMU_LOCK;
    EMU_STICKY;
    if (!p) return cudaSuccess;
    flush_all();
    auto it = g_pinned.find((uintptr_t)p);
    if (it == g_pinned.end() || !it->second.owned)
        return emu_fail(cudaErrorInvalidValue, "cudaFreeHost(%p): not from cudaHostAlloc", p);
    g_pinned.erase(it);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaHostRegister(void *p, size_t n, unsigned flags) {
    EMU_LOCK;
    EMU_STICKY;
    if (!p || n == 0) return emu_fail(cudaErrorInvalidValue, "cudaHostRegister(%p, %zu)", p, n);
    if (in_arena(p)) return emu_fail(cudaErrorInvalidValue, "cudaHostRegister of device memory");
    uintptr_t a = (uintptr_t)p;
    auto it = g_pinned.upper_bound(a + n - 1);
    if (it != g_pinned.begin()) {
        --it;
        if (it->first + it->second.n > a)
            return emu_fail(cudaErrorHostMemoryAlreadyRegistered,
                            "cudaHostRegister(%p, %zu): overlaps a registered range", p, n);
    }
    g_pinned[a] = Pinned{n, (flags & cudaHostRegisterMapped) != 0, false};
    return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *p) {
    EMU_LOCK;
    EMU_STICKY;
    flush_all();
    auto it = g_pinned.find((uintptr_t)p);
    if (it == g_pinned.end() || it->second.owned)
        return emu_fail(cudaErrorHostMemoryNotRegistered, "cudaHostUnregister(%p)", p);
    g_pinned.erase(it);
    return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned flags) {
    EMU_LOCK;
    EMU_STICKY;
    *dev = nullptr;
    if (flags != 0) return emu_fail(cudaErrorInvalidValue, "cudaHostGetDevicePointer flags");
    const Pinned *pi = pinned_find(host, 1, nullptr);
    if (!pi || !pi->mapped)
        return emu_fail(cudaErrorInvalidValue, "cudaHostGetDevicePointer(%p): %s", host,
                        pi ? "registered without cudaHostRegisterMapped" : "not pinned memory");
    *dev = host;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned flags) {
    EMU_LOCK;
    EMU_STICKY;
    g_streams.push_back(std::make_unique<CUstream_st>());
    g_streams.back()->nonblocking = (flags & cudaStreamNonBlocking) != 0;
    *out = g_streams.back().get();
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *out) {
    return cudaStreamCreateWithFlags(out, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    EMU_LOCK;
    if (s == nullptr || !stream_ok(s))
        return emu_fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy(%p)", (void *)s);
    flush(s, UINT64_MAX); /* pending work completes first */
    s->destroyed = true;
    return g_sticky;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    EMU_LOCK;
    EMU_STICKY;
    if (!stream_ok(s))
        return emu_fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize(%p)", (void *)s);
    flush(stream_of(s), UINT64_MAX);
    return g_sticky;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned flags) {
    EMU_LOCK;
    EMU_STICKY;
    g_events.push_back(std::make_unique<CUevent_st>());
    g_events.back()->timing = (flags & cudaEventDisableTiming) == 0;
    *out = g_events.back().get();
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *out) {
    return cudaEventCreateWithFlags(out, cudaEventDefault);
}

static bool event_ok(cudaEvent_t e) {
    for (auto &p : g_events)
        if (p.get() == e) return !e->destroyed;
    return false;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
    EMU_LOCK;
    if (!event_ok(e)) return emu_fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy");
    e->destroyed = true; /* a pending record still completes */
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    EMU_LOCK;
    EMU_STICKY;
    if (!event_ok(e) || !stream_ok(s))
        return emu_fail(cudaErrorInvalidResourceHandle, "cudaEventRecord");
    CUstream_st *st = stream_of(s);
    e->recorded = true;
    e->queried = false;
    e->s = st;
    e->seq = enqueue(s, [e]() { e->t_ms = now_ms(); });
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    EMU_LOCK;
    EMU_STICKY;
    if (!event_ok(e) || !stream_ok(s))
        return emu_fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent");
    if (!e->recorded) return cudaSuccess;
    CUstream_st *es = e->s;
    uint64_t seq = e->seq;
    enqueue(s, [es, seq]() { flush(es, seq); });
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    EMU_LOCK;
    EMU_STICKY;
    if (!event_ok(e)) return emu_fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize");
    if (e->recorded) flush(e->s, e->seq);
    return g_sticky;
}

/* Not ready the first time a pending record is asked about (the work runs then), done after. */
cudaError_t cudaEventQuery(cudaEvent_t e) {
    EMU_LOCK;
    EMU_STICKY;
    if (!event_ok(e)) return emu_fail(cudaErrorInvalidResourceHandle, "cudaEventQuery");
    if (!e->recorded || e->s->done >= e->seq) return cudaSuccess;
    if (!e->queried) {
        e->queried = true;
        return cudaErrorNotReady;
    }
    flush(e->s, e->seq);
    return g_sticky;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    EMU_LOCK;
    EMU_STICKY;
    if (!event_ok(a) || !event_ok(b) || !a->timing || !b->timing)
        return emu_fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime");
    if (!a->recorded || !b->recorded || a->s->done < a->seq || b->s->done < b->seq)
        return cudaErrorNotReady;
    *ms = (float)(b->t_ms - a->t_ms);
    return cudaSuccess;
}

} /* extern "C" */

/* ---- copies ---------------------------------------------------------------------------------- */

namespace {

cudaError_t check_copy(const char *fn, void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
    Where d = where(dst, n), s = where(src, n);
    if (d == BAD_DEVICE || s == BAD_DEVICE)
        return emu_fail(cudaErrorInvalidValue, "%s(%p <- %p, %zu bytes): %s leaves its allocation",
                        fn, dst, src, n, d == BAD_DEVICE ? "the destination" : "the source");
    bool ok = true;
    switch (kind) {
    case cudaMemcpyHostToDevice:
        ok = device_accessible(d) && s != DEVICE;
        break;
    case cudaMemcpyDeviceToHost:
        ok = device_accessible(s) && d != DEVICE;
        break;
    case cudaMemcpyDeviceToDevice:
        ok = device_accessible(s) && device_accessible(d);
        break;
    case cudaMemcpyHostToHost:
        ok = d != DEVICE && s != DEVICE;
        break;
    case cudaMemcpyDefault:
        break;
    default:
        return emu_fail(cudaErrorInvalidValue, "%s: invalid cudaMemcpyKind %d", fn, (int)kind);
    }
    if (!ok)
        return emu_fail(cudaErrorInvalidValue,
                        "%s: kind %d, but the destination is %s and the "
                        "source is %s",
                        fn, (int)kind, where_name(d), where_name(s));
    return cudaSuccess;
}

/* A 2D copy: rows of `width` bytes. */
void copy2d(void *dst, size_t dp, const void *src, size_t sp, size_t width, size_t rows) {
    for (size_t r = 0; r < rows; r++)
        memcpy((char *)dst + r * dp, (const char *)src + r * sp, width);
}

/* The asynchronous copies: a pageable source is read now (CUDA stages it before returning), a
 * pageable destination makes the call wait for the copy; anything else happens when the stream
 * runs. */
cudaError_t copy_async(const char *fn, void *dst, size_t dp, const void *src, size_t sp,
                       size_t width, size_t rows, cudaMemcpyKind kind, cudaStream_t s) {
    if (!stream_ok(s)) return emu_fail(cudaErrorInvalidResourceHandle, "%s: invalid stream", fn);
    if (rows == 0 || width == 0) return cudaSuccess;
    if (dp < width || sp < width)
        return emu_fail(cudaErrorInvalidPitchValue, "%s: pitch below width", fn);
    size_t dspan = dp * (rows - 1) + width, sspan = sp * (rows - 1) + width;
    /* the direction check over the whole spans */
    Where d = where(dst, dspan), sw = where(src, sspan);
    cudaError_t e = check_copy(fn, dst, src, 0, kind);
    if (e == cudaSuccess && (d == BAD_DEVICE || sw == BAD_DEVICE))
        e = emu_fail(cudaErrorInvalidValue, "%s: %s leaves its allocation", fn,
                     d == BAD_DEVICE ? "the destination" : "the source");
    if (e != cudaSuccess) return e;
    if (sw == PAGEABLE) {
        auto snap = std::make_shared<std::vector<char>>(width * rows);
        copy2d(snap->data(), width, src, sp, width, rows);
        enqueue(s, [=]() { copy2d(dst, dp, snap->data(), width, width, rows); });
    } else {
        enqueue(s, [=]() { copy2d(dst, dp, src, sp, width, rows); });
    }
    if (d == PAGEABLE) flush(stream_of(s), UINT64_MAX);
    return cudaSuccess;
}

} // namespace

extern "C" {

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s) {
    EMU_LOCK;
    EMU_STICKY;
    return copy_async("cudaMemcpyAsync", dst, n, src, n, n, 1, kind, s);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dp, const void *src, size_t sp, size_t width,
                              size_t rows, cudaMemcpyKind kind, cudaStream_t s) {
    EMU_LOCK;
    EMU_STICKY;
    return copy_async("cudaMemcpy2DAsync", dst, dp, src, sp, width, rows, kind, s);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
    EMU_LOCK;
    EMU_STICKY;
    cudaError_t e = check_copy("cudaMemcpy", dst, src, n, kind);
    if (e != cudaSuccess) return e;
    flush_all();
    dev_enter();
    if (g_sticky == cudaSuccess && n) memcpy(dst, src, n);
    dev_leave();
    return g_sticky;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    EMU_LOCK;
    EMU_STICKY;
    if (!stream_ok(s)) return emu_fail(cudaErrorInvalidResourceHandle, "cudaMemsetAsync stream");
    if (n == 0) return cudaSuccess;
    Where w = where(p, n);
    if (!device_accessible(w))
        return emu_fail(cudaErrorInvalidValue, "cudaMemsetAsync(%p, %zu): %s", p, n, where_name(w));
    enqueue(s, [=]() { memset(p, v, n); });
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int v, size_t n) {
    cudaError_t e = cudaMemsetAsync(p, v, n, nullptr);
    return e;
}

/* ---- cuBLAS ---------------------------------------------------------------------------------- */

cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
    EMU_LOCK;
    if (!arena_init()) return CUBLAS_STATUS_NOT_INITIALIZED;
    *h = new cublasContext();
    (*h)->s = &g_legacy;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
    EMU_LOCK;
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    flush_all();
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
    EMU_LOCK;
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!stream_ok(s)) {
        emu_log("cublasSetStream: invalid stream %p", (void *)s);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    h->s = stream_of(s);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    return CUBLAS_STATUS_SUCCESS;
}

} /* extern "C" */

namespace {

size_t type_size(cudaDataType_t t) {
    return t == CUDA_R_32F ? 4 : 2;
}

float load_elem(const void *p, cudaDataType_t t, size_t i) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    if (t == CUDA_R_16F) return __half2float(((const __half *)p)[i]);
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

void store_elem(void *p, cudaDataType_t t, size_t i, float v) {
    if (t == CUDA_R_32F)
        ((float *)p)[i] = v;
    else if (t == CUDA_R_16F)
        ((__half *)p)[i] = __float2half_rn(v);
    else
        ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}

/* Column-major rows x cols at ld -> dense f32 rows x cols. */
/* Every f16 bit pattern's f32 value: widening whole weight matrices at each GEMM through
 * __half2float was most of the emulated decode time. */
const float *f16_table() {
    static std::vector<float> tab;
    if (tab.empty()) {
        tab.resize(65536);
        for (unsigned u = 0; u < 65536; u++)
            tab[u] = __half2float(__ushort_as_half((unsigned short)u));
    }
    return tab.data();
}

/* Column-major rows x cols at ld -> dense f32 rows x cols in `out` (exact: every f16 / bf16 is an
 * f32). `out` is reused from GEMM to GEMM (they run one at a time, under the lock), so its pages
 * are not faulted in afresh each time. */
void to_f32(const void *p, cudaDataType_t t, int rows, int cols, int ld, std::vector<float> &out) {
    out.resize((size_t)rows * (size_t)cols);
    const uint16_t *h = (const uint16_t *)p;
    const float *tab = t == CUDA_R_16F ? f16_table() : nullptr;
    for (int c = 0; c < cols; c++) {
        const uint16_t *col = h + (size_t)c * ld;
        float *o = out.data() + (size_t)c * rows;
        if (tab)
            for (int r = 0; r < rows; r++) o[r] = tab[col[r]];
        else
            for (int r = 0; r < rows; r++) {
                uint32_t u = (uint32_t)col[r] << 16; /* bf16: the top half of an f32 */
                memcpy(&o[r], &u, 4);
            }
    }
}

std::vector<float> g_gemm_a, g_gemm_b, g_gemm_t; /* the shim's scratch */

} // namespace

extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                       int m, int n, int k, const void *alpha, const void *A,
                                       cudaDataType_t at, int lda, const void *B, cudaDataType_t bt,
                                       int ldb, const void *beta, void *C, cudaDataType_t ct,
                                       int ldc, cublasComputeType_t comp, cublasGemmAlgo_t algo) {
    EMU_LOCK;
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (g_sticky != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
    auto bad = [&](const char *why) {
        emu_log("cublasGemmEx(m=%d n=%d k=%d lda=%d ldb=%d ldc=%d): %s", m, n, k, lda, ldb, ldc,
                why);
        return CUBLAS_STATUS_INVALID_VALUE;
    };
    bool tra = ta != CUBLAS_OP_N, trb = tb != CUBLAS_OP_N;
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T))
        return bad("transpose must be N or T");
    if (m < 0 || n < 0 || k < 0) return bad("negative size");
    int ar = tra ? k : m, ac = tra ? m : k, br = trb ? n : k, bc = trb ? k : n;
    if (lda < std::max(1, ar)) return bad("lda below the rows of A");
    if (ldb < std::max(1, br)) return bad("ldb below the rows of B");
    if (ldc < std::max(1, m)) return bad("ldc below m");
    if (comp != CUBLAS_COMPUTE_32F) {
        emu_log("cublasGemmEx: compute type %d not emulated (CUBLAS_COMPUTE_32F only)", (int)comp);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    bool types_ok = (at == bt) && (at == CUDA_R_32F || at == CUDA_R_16F || at == CUDA_R_16BF) &&
                    (ct == CUDA_R_32F || ct == at);
    if (!types_ok) {
        emu_log("cublasGemmEx: type combination A %d B %d C %d not supported", (int)at, (int)bt,
                (int)ct);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    /* the operands' extents, in bytes, must be device-accessible */
    auto span = [](int rows, int cols, int ld, cudaDataType_t t) {
        return cols == 0 ? (size_t)0 : ((size_t)(cols - 1) * ld + rows) * type_size(t);
    };
    const void *ops[3] = {A, B, C};
    size_t spans[3] = {span(ar, ac, lda, at), span(br, bc, ldb, bt), span(m, n, ldc, ct)};
    for (int i = 0; i < 3; i++) {
        if (spans[i] == 0) continue;
        Where w = where(ops[i], spans[i]);
        if (!device_accessible(w)) {
            emu_log("cublasGemmEx: operand %c (%p, %zu bytes) is %s", "ABC"[i], ops[i], spans[i],
                    where_name(w));
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    float al = *(const float *)alpha, be = *(const float *)beta; /* host pointer mode */
    CUstream_st *s = h->s;
    enqueue(s, [=]() {
        std::vector<float> &T = g_gemm_t;
        T.assign((size_t)m * n, 0.0f);
        if (k > 0) {
            /* f32 operands in place; f16 / bf16 ones widened (exactly) to f32 first */
            const float *Ap = (const float *)A, *Bp = (const float *)B;
            int la = lda, lb = ldb;
            if (at != CUDA_R_32F) {
                to_f32(A, at, ar, ac, lda, g_gemm_a);
                Ap = g_gemm_a.data();
                la = std::max(1, ar);
            }
            if (bt != CUDA_R_32F) {
                to_f32(B, bt, br, bc, ldb, g_gemm_b);
                Bp = g_gemm_b.data();
                lb = std::max(1, br);
            }
            /* one thread, as the rest of the device: OpenBLAS's workers, once woken, spin in
             * sched_yield between calls and took a core from the other test programs */
            int blas_threads = openblas_get_num_threads();
            if (blas_threads != 1) openblas_set_num_threads(1);
            cblas_sgemm(CblasColMajor, tra ? CblasTrans : CblasNoTrans,
                        trb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, Ap, la, Bp, lb, 0.0f,
                        T.data(), m);
            if (blas_threads != 1) openblas_set_num_threads(blas_threads);
        }
        for (int c = 0; c < n; c++)
            for (int r = 0; r < m; r++) {
                size_t i = (size_t)c * ldc + r;
                float v = al * T[(size_t)c * m + r];
                if (be != 0.0f) v += be * load_elem(C, ct, i);
                store_elem(C, ct, i, v);
            }
    });
    return CUBLAS_STATUS_SUCCESS;
}
