/* Probe kernels for the CUDA emulator's self-test (tests/test_emu_self.c): correct kernels, and
 * kernels that misuse barriers on purpose. tests/emu_probe.cu is valid CUDA, but it is built only
 * through tests/cuda_emu/translate.py, into test_emu_self. Every launcher only queues its kernel
 * on `st` (launch errors: cudaGetLastError; faults: the next synchronisation). */
#ifndef IG_TESTS_EMU_PROBE_H
#define IG_TESTS_EMU_PROBE_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[i] = s * x[i] for i < n (a grid-stride loop: any grid and block). */
void ig_probe_scale(const float *x, float *y, float s, int n, unsigned grid, unsigned block,
                    cudaStream_t st);

/* Each of `blocks` blocks of `block` threads reverses its segment of x through dynamic shared
 * memory: y[b * block + t] = x[b * block + block - 1 - t]. smem: the dynamic shared memory asked
 * for (block * sizeof(float) is enough). */
void ig_probe_reverse(const float *x, float *y, unsigned blocks, unsigned block, size_t smem,
                      cudaStream_t st);

/* out[b] = the sum of x[i] over the i < n that block b visits (grid-stride), by warp shuffles
 * (__shfl_xor_sync), shared memory and __syncthreads. block: a multiple of 32, at most 1024. */
void ig_probe_block_sum(const float *x, float *out, int n, unsigned grid, unsigned block,
                        cudaStream_t st);

/* The same sum in one block with the __syncthreads between the warps' partial sums and their
 * reduction left out (a race: warp 0 may read other warps' partial sums before they are written).
 * out[0] = the result. */
void ig_probe_racy_sum(const float *x, float *out, unsigned block, cudaStream_t st);

/* One block of `block` threads: out[t] = atomicAdd(counter, 1), the order in which the threads
 * ran (the kernel has no barrier). */
void ig_probe_ticket(int *counter, int *out, unsigned block, cudaStream_t st);

/* Kernels that misuse barriers, one block of 64 threads each; y: 64 floats of device memory. */
typedef enum ig_probe_misuse {
    IG_PROBE_DIVERGENT_SYNC,    /* only threads < 32 reach __syncthreads */
    IG_PROBE_EARLY_EXIT_SYNC,   /* thread 0 returns, the others reach __syncthreads */
    IG_PROBE_PARTIAL_WARP_SHFL, /* lanes >= 16 return, the others __shfl_xor_sync(0xffffffff) */
    IG_PROBE_MIXED_SHFL,        /* even lanes __shfl_xor_sync, odd lanes __shfl_down_sync */
    IG_PROBE_DEADLOCK,          /* lanes < 16 __syncthreads then shuffle, the others the reverse */
    IG_PROBE_N_MISUSE
} ig_probe_misuse;
/* The kernel's name (as the emulator reports it). */
const char *ig_probe_misuse_kernel(ig_probe_misuse which);
void ig_probe_misuse_launch(ig_probe_misuse which, float *y, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
