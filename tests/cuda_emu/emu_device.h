/* The device side of the CUDA emulator (see emu.md): what a kernel file from kernels/cuda/ needs
 * when it is compiled as host C++ after tests/cuda_emu/translate.py rewrote its <<<>>> launches.
 *
 * Execution model: a block's threads are cooperative fibers run on one host thread, blocks one
 * after another; __syncthreads and the warp intrinsics are barriers that switch fibers, so a
 * __shared__ variable is a static (one block runs at a time). A barrier that can never complete
 * (a thread left the kernel while others wait, a partial mask, threads of one warp at different
 * shuffles) is reported as an error of the launch, not hung. */
#ifndef IG_CUDA_EMU_DEVICE_H
#define IG_CUDA_EMU_DEVICE_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math_constants.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __shared__      static
#define __forceinline__ inline
#define __launch_bounds__(...)

/* ---- the scheduler's view (tests/cuda_emu/emu_runtime.cpp) ----------------------------------
 */

extern uint3 ig_emu_thread_idx, ig_emu_block_idx;
extern dim3 ig_emu_block_dim, ig_emu_grid_dim;
#define threadIdx ig_emu_thread_idx
#define blockIdx  ig_emu_block_idx
#define blockDim  ig_emu_block_dim
#define gridDim   ig_emu_grid_dim

void ig_emu_syncthreads(void);
/* One warp-wide exchange: every lane of the warp deposits `mine` (8 bytes) and, once all have,
 * gets lane `src`'s value back (its own when src is outside the warp). `mask` must name the whole
 * warp. */
uint64_t ig_emu_warp_exchange(unsigned mask, uint64_t mine, int src, const char *what);
unsigned ig_emu_warp_ballot(unsigned mask, int pred);
void *ig_emu_dynamic_smem(void);

/* A kernel launch, queued on `stream` (cudaGetLastError reports a bad configuration). */
void ig_emu_enqueue_kernel(const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                           std::function<void()> body, const void *const *ptrs, int n_ptrs);

/* ---- launches ---------------------------------------------------------------------------------
 */

/* The pointers a launch's arguments carry, checked at launch: pointer arguments, and the pointer
 * members of the structures kernels/cuda passes by value (listed in emu_runtime.cpp). */
struct ig_be_attn_rows; /* ig_cuda_attn_rows (cuda_kernels.h) */
void ig_emu_note_ptr(const ig_be_attn_rows &a, const void **out, int *n);
#define IG_EMU_MAX_STRUCT_PTRS 16
template <typename T> static inline void ig_emu_note_ptr(const T &, const void **, int *) {}
template <typename T> static inline void ig_emu_note_ptr(T *const &p, const void **out, int *n) {
    out[(*n)++] = (const void *)p;
}

/* kernel<<<grid, block, smem, stream>>>(args...): the arguments are converted to the kernel's
 * parameter types and copied now, as CUDA does at launch. */
template <typename... P, typename... A>
static inline void ig_emu_launch(const char *name, dim3 grid, dim3 block, size_t smem,
                                 cudaStream_t s, void (*kernel)(P...), A &&...args) {
    static_assert(sizeof...(P) == sizeof...(A), "kernel argument count");
    auto tup =
        std::make_shared<std::tuple<typename std::decay<P>::type...>>(std::forward<A>(args)...);
    const void *ptrs[sizeof...(P) + IG_EMU_MAX_STRUCT_PTRS];
    int n = 0;
    std::apply([&](const auto &...v) { (ig_emu_note_ptr(v, ptrs, &n), ...); }, *tup);
    ig_emu_enqueue_kernel(
        name, grid, block, smem, s, [kernel, tup]() { std::apply(kernel, *tup); }, ptrs, n);
}

/* ---- intrinsics --------------------------------------------------------------------------------
 */

#define __syncthreads() ig_emu_syncthreads()

template <typename T> static inline uint64_t ig_emu_bits(T v) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    return u;
}
template <typename T> static inline T ig_emu_from_bits(uint64_t u) {
    T v;
    memcpy(&v, &u, sizeof v);
    return v;
}
static inline int ig_emu_lane(void) {
    return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31;
}
template <typename T> static inline T __shfl_xor_sync(unsigned m, T v, int o, int w = 32) {
    int l = ig_emu_lane();
    int src = (l & ~(w - 1)) | ((l ^ o) & (w - 1));
    return ig_emu_from_bits<T>(ig_emu_warp_exchange(m, ig_emu_bits(v), src, "__shfl_xor_sync"));
}
template <typename T> static inline T __shfl_sync(unsigned m, T v, int src, int w = 32) {
    int l = ig_emu_lane();
    int s = (l & ~(w - 1)) | (src & (w - 1));
    return ig_emu_from_bits<T>(ig_emu_warp_exchange(m, ig_emu_bits(v), s, "__shfl_sync"));
}
template <typename T> static inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32) {
    int l = ig_emu_lane(), base = l & ~(w - 1);
    int s = l - (int)d < base ? l : l - (int)d;
    return ig_emu_from_bits<T>(ig_emu_warp_exchange(m, ig_emu_bits(v), s, "__shfl_up_sync"));
}
template <typename T> static inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) {
    int l = ig_emu_lane(), base = l & ~(w - 1);
    int s = l + (int)d >= base + w ? l : l + (int)d;
    return ig_emu_from_bits<T>(ig_emu_warp_exchange(m, ig_emu_bits(v), s, "__shfl_down_sync"));
}
static inline unsigned __ballot_sync(unsigned m, int p) {
    return ig_emu_warp_ballot(m, p);
}
static inline int __any_sync(unsigned m, int p) {
    return ig_emu_warp_ballot(m, p) != 0;
}
static inline int __all_sync(unsigned m, int p) {
    return ig_emu_warp_ballot(m, p) == m;
}
static inline void __syncwarp(unsigned m = 0xffffffffu) {
    (void)ig_emu_warp_ballot(m, 0);
}

static inline int __popc(unsigned x) {
    return __builtin_popcount(x);
}
static inline int __popcll(unsigned long long x) {
    return __builtin_popcountll(x);
}
static inline int __clz(unsigned x) {
    return x ? __builtin_clz(x) : 32;
}
static inline int __ffs(unsigned x) {
    return __builtin_ffs((int)x);
}
static inline float __int_as_float(int x) {
    return ig_emu_from_bits<float>((uint32_t)x);
}
static inline double __longlong_as_double(long long x) {
    return ig_emu_from_bits<double>((uint64_t)x);
}
static inline long long __double_as_longlong(double x) {
    return (long long)ig_emu_bits(x);
}
static inline float __uint_as_float(unsigned x) {
    return ig_emu_from_bits<float>(x);
}
static inline int __float_as_int(float x) {
    int i;
    memcpy(&i, &x, 4);
    return i;
}
static inline unsigned __float_as_uint(float x) {
    unsigned i;
    memcpy(&i, &x, 4);
    return i;
}
/* The _rn arithmetic: single IEEE operations (the emulator is built with -ffp-contract=off). */
static inline float __fadd_rn(float a, float b) {
    return a + b;
}
static inline float __fsub_rn(float a, float b) {
    return a - b;
}
static inline float __fmul_rn(float a, float b) {
    return a * b;
}
static inline float __fdiv_rn(float a, float b) {
    return a / b;
}
static inline float __fmaf_rn(float a, float b, float c) {
    return fmaf(a, b, c);
}
static inline float rsqrtf(float x) {
    return 1.0f / sqrtf(x);
}
static inline float __fdividef(float a, float b) {
    return a / b;
}
static inline void __threadfence(void) {}
static inline void __threadfence_block(void) {}
template <typename T> static inline T __ldg(const T *p) {
    return *p;
}

/* Atomics: threads are cooperative fibers that switch only at barriers, so a plain
 * read-modify-write is atomic. */
template <typename T> static inline T atomicAdd(T *p, T v) {
    T o = *p;
    *p = o + v;
    return o;
}
template <typename T> static inline T atomicMax(T *p, T v) {
    T o = *p;
    if (v > o) *p = v;
    return o;
}
template <typename T> static inline T atomicMin(T *p, T v) {
    T o = *p;
    if (v < o) *p = v;
    return o;
}
template <typename T> static inline T atomicExch(T *p, T v) {
    T o = *p;
    *p = v;
    return o;
}
template <typename T> static inline T atomicCAS(T *p, T cmp, T v) {
    T o = *p;
    if (o == cmp) *p = v;
    return o;
}

#endif
