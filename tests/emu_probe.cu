/* Probe kernels for the CUDA emulator's self-test (tests/emu_probe.h, tests/test_emu_self.c).
 * Valid CUDA; built only through tests/cuda_emu/translate.py. The misuse kernels are wrong on
 * purpose: on a GPU they are undefined behaviour (a hang, or results that depend on the hardware);
 * the emulator must report each as a failed launch. */
#include "tests/emu_probe.h"

#define FULL_MASK 0xffffffffu

static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

/* ---- correct kernels ------------------------------------------------------------------------- */

__global__ void probe_scale_kernel(const float *x, float *y, float s, int n) {
    int stride = (int)(gridDim.x * blockDim.x);
    for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += stride) y[i] = s * x[i];
}

__global__ void probe_reverse_kernel(const float *x, float *y) {
    extern __shared__ float buf[];
    int t = (int)threadIdx.x, n = (int)blockDim.x;
    size_t base = (size_t)blockIdx.x * (size_t)n;
    buf[t] = x[base + (size_t)t];
    __syncthreads();
    y[base + (size_t)t] = buf[n - 1 - t];
}

__global__ void probe_block_sum_kernel(const float *x, float *out, int n) {
    __shared__ float part[32];
    int t = (int)threadIdx.x, lane = t & 31, w = t >> 5, nw = (int)(blockDim.x >> 5);
    int stride = (int)(gridDim.x * blockDim.x);
    float v = 0.0f;
    for (int i = (int)(blockIdx.x * blockDim.x) + t; i < n; i += stride) v += x[i];
    v = warp_sum(v);
    if (lane == 0) part[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? part[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) out[blockIdx.x] = v;
    }
}

/* probe_block_sum_kernel without its __syncthreads: a data race. */
__global__ void probe_racy_sum_kernel(const float *x, float *out) {
    __shared__ float part[32];
    int t = (int)threadIdx.x, lane = t & 31, w = t >> 5, nw = (int)(blockDim.x >> 5);
    float v = warp_sum(x[t]);
    if (lane == 0) part[w] = v;
    if (w == 0) {
        v = lane < nw ? part[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) out[0] = v;
    }
}

__global__ void probe_ticket_kernel(int *counter, int *out) {
    out[threadIdx.x] = atomicAdd(counter, 1);
}

/* ---- barrier misuse (one block of 64 threads) ------------------------------------------------ */

__global__ void probe_divergent_sync_kernel(float *y) {
    int t = (int)threadIdx.x;
    if (t < 32) __syncthreads();
    y[t] = (float)t;
}

__global__ void probe_early_exit_sync_kernel(float *y) {
    int t = (int)threadIdx.x;
    if (t == 0) return;
    y[t] = (float)t;
    __syncthreads();
    y[t] += 1.0f;
}

__global__ void probe_partial_warp_shfl_kernel(float *y) {
    int t = (int)threadIdx.x;
    if ((t & 31) >= 16) return;
    float v = (float)t;
    v += __shfl_xor_sync(FULL_MASK, v, 1);
    y[t] = v;
}

__global__ void probe_mixed_shfl_kernel(float *y) {
    int t = (int)threadIdx.x;
    float v = (float)t;
    if (t & 1)
        v = __shfl_down_sync(FULL_MASK, v, 1);
    else
        v = __shfl_xor_sync(FULL_MASK, v, 1);
    y[t] = v;
}

__global__ void probe_deadlock_kernel(float *y) {
    int t = (int)threadIdx.x;
    float v = (float)t;
    if ((t & 31) < 16) {
        __syncthreads();
        v = __shfl_xor_sync(FULL_MASK, v, 1);
    } else {
        v = __shfl_xor_sync(FULL_MASK, v, 1);
        __syncthreads();
    }
    y[t] = v;
}

/* ---- launchers ------------------------------------------------------------------------------- */

extern "C" void ig_probe_scale(const float *x, float *y, float s, int n, unsigned grid,
                               unsigned block, cudaStream_t st) {
    probe_scale_kernel<<<grid, block, 0, st>>>(x, y, s, n);
}

extern "C" void ig_probe_reverse(const float *x, float *y, unsigned blocks, unsigned block,
                                 size_t smem, cudaStream_t st) {
    probe_reverse_kernel<<<blocks, block, smem, st>>>(x, y);
}

extern "C" void ig_probe_block_sum(const float *x, float *out, int n, unsigned grid, unsigned block,
                                   cudaStream_t st) {
    probe_block_sum_kernel<<<grid, block, 0, st>>>(x, out, n);
}

extern "C" void ig_probe_racy_sum(const float *x, float *out, unsigned block, cudaStream_t st) {
    probe_racy_sum_kernel<<<1, block, 0, st>>>(x, out);
}

extern "C" void ig_probe_ticket(int *counter, int *out, unsigned block, cudaStream_t st) {
    probe_ticket_kernel<<<1, block, 0, st>>>(counter, out);
}

extern "C" const char *ig_probe_misuse_kernel(ig_probe_misuse which) {
    switch (which) {
    case IG_PROBE_DIVERGENT_SYNC:
        return "probe_divergent_sync_kernel";
    case IG_PROBE_EARLY_EXIT_SYNC:
        return "probe_early_exit_sync_kernel";
    case IG_PROBE_PARTIAL_WARP_SHFL:
        return "probe_partial_warp_shfl_kernel";
    case IG_PROBE_MIXED_SHFL:
        return "probe_mixed_shfl_kernel";
    case IG_PROBE_DEADLOCK:
        return "probe_deadlock_kernel";
    default:
        return "?";
    }
}

extern "C" void ig_probe_misuse_launch(ig_probe_misuse which, float *y, cudaStream_t st) {
    switch (which) {
    case IG_PROBE_DIVERGENT_SYNC:
        probe_divergent_sync_kernel<<<1, 64, 0, st>>>(y);
        break;
    case IG_PROBE_EARLY_EXIT_SYNC:
        probe_early_exit_sync_kernel<<<1, 64, 0, st>>>(y);
        break;
    case IG_PROBE_PARTIAL_WARP_SHFL:
        probe_partial_warp_shfl_kernel<<<1, 64, 0, st>>>(y);
        break;
    case IG_PROBE_MIXED_SHFL:
        probe_mixed_shfl_kernel<<<1, 64, 0, st>>>(y);
        break;
    case IG_PROBE_DEADLOCK:
        probe_deadlock_kernel<<<1, 64, 0, st>>>(y);
        break;
    default:
        break;
    }
}
