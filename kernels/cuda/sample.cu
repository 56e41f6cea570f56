/* Token sampling on the device: argmax (ig_sample_argmax's rule) and temperature + nucleus
 * sampling with the host's uniform draw (ig_sample's rule), one block per row, no workspace and no
 * sort (see cuda_kernels.h). */
#include "kernels/cuda/cuda_common.cuh"

#define SAMPLE_BLOCK 1024

/* (value, index) better than the other under ig_sample_argmax: non-NaN over NaN, larger value,
 * then lower index. */
static __device__ __forceinline__ bool arg_better(float a, int64_t ia, float b, int64_t ib) {
    bool an = a != a, bn = b != b;
    if (an != bn) return bn;
    if (!an && a != b) return a > b;
    return ia < ib;
}

static __device__ int64_t block_argmax(const float *xr, int64_t n, float *shv, int64_t *shi) {
    float bv = CUDART_NAN_F;
    int64_t bi = INT64_MAX;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        if (arg_better(xr[i], i, bv, bi)) {
            bv = xr[i];
            bi = i;
        }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (arg_better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) {
        shv[wid] = bv;
        shi[wid] = bi;
    }
    __syncthreads();
    bv = CUDART_NAN_F;
    bi = INT64_MAX;
    for (int w = 0; w < nw; w++)
        if (arg_better(shv[w], shi[w], bv, bi)) {
            bv = shv[w];
            bi = shi[w];
        }
    return bi == INT64_MAX ? 0 : bi; /* every entry NaN: index 0 wins the ties */
}

static __global__ void __launch_bounds__(SAMPLE_BLOCK)
    argmax_kernel(const float *logits, int64_t ld, int64_t n, int32_t *out) {
    __shared__ float shv[32];
    __shared__ int64_t shi[32];
    int64_t best = block_argmax(logits + (int64_t)blockIdx.x * ld, n, shv, shi);
    if (threadIdx.x == 0) out[blockIdx.x] = (int32_t)best;
}

/* ---- nucleus sampling ---- */

/* exp(l / T - mx) as the CPU computes its argument (f32 division then subtraction), the exp in
 * double rounded once to f32; NaN weighs 0. */
static __device__ __forceinline__ float weight(float l, float T, float mx) {
    float x = __fsub_rn(__fdiv_rn(l, T), mx);
    float e = (float)exp((double)x);
    return e != e ? 0.0f : e;
}
/* Rank key: logits in descending order, NaN as -inf. */
static __device__ __forceinline__ uint32_t rank_key(float l) {
    return ig_order_key(l != l ? -CUDART_INF_F : l);
}

static __device__ double block_sum_d(double v, double *sh) {
    return ig_block_reduce(v, sh, ig_op_add(), 0.0);
}

/* Inclusive scan of v over the block in thread order; *total = the block's sum. sh: 32. */
static __device__ double block_scan_d(double v, double *sh, double *total) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 1; o < 32; o <<= 1) {
        double y = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += y;
    }
    __syncthreads();
    if (lane == 31) sh[wid] = v;
    __syncthreads();
    double before = 0, all = 0;
    for (int w = 0; w < nw; w++) {
        before += w < wid ? sh[w] : 0.0;
        all += sh[w];
    }
    *total = all;
    return before + v;
}

/* Mass of the tokens whose rank key is above K. */
static __device__ double mass_above(const float *xr, int64_t n, float T, float mx, uint32_t K,
                                    double *sh) {
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        if (rank_key(xr[i]) > K) s += weight(xr[i], T, mx);
    return block_sum_d(s, sh);
}

/* The smallest key K with mass_above(K) < lim (strict = 1) or <= lim (strict = 0); *S = that
 * mass. mass_above(0) is the total (every key is >= 1) and mass_above(2^32 - 1) = 0. */
static __device__ uint32_t bisect_key(const float *xr, int64_t n, float T, float mx, double lim,
                                      int strict, double *S, double *sh) {
    uint32_t lo = 0u, hi = 0xffffffffu;
    double s_hi = 0;
    while (hi - lo > 1u) {
        uint32_t mid = lo + (hi - lo) / 2u;
        double s = mass_above(xr, n, T, mx, mid, sh);
        if (strict ? s < lim : s <= lim) {
            hi = mid;
            s_hi = s;
        } else {
            lo = mid;
        }
    }
    *S = s_hi;
    return hi;
}

/* Walks the tokens in index order (those with rank key Tk, or all when all = 1), with masses
 * cumulated from base:
 *  - kept (when keep_lim is finite): a token is kept iff base + mass before it < keep_lim;
 *    *kept_mass = base + the kept tokens' mass, *last_kept = the last kept token with weight;
 *  - drawn: the first kept token with weight whose base + inclusive mass > r (-1 if none). */
static __device__ void walk(const float *xr, int64_t n, float T, float mx, int all, uint32_t Tk,
                            double base, double keep_lim, double r, double *kept_mass,
                            int64_t *last_kept, int64_t *drawn, double *sh, int64_t *shi) {
    double run = base, kept = base;
    int64_t last = -1, first = INT64_MAX;
    for (int64_t i0 = 0; i0 < n; i0 += blockDim.x) {
        int64_t i = i0 + threadIdx.x;
        int in = i < n && (all || rank_key(xr[i]) == Tk);
        float w = in ? weight(xr[i], T, mx) : 0.0f;
        double tot;
        double incl = block_scan_d((double)w, sh, &tot);
        double excl = incl - (double)w;
        int k = in && run + excl < keep_lim;
        if (k) kept += w; /* per thread; summed below */
        if (k && w > 0.0f) last = i > last ? i : last;
        if (k && w > 0.0f && run + incl > r && i < first) first = i;
        run += tot;
        /* stop as soon as some thread found the draw (uniform: a block reduction) */
        int64_t f = first;
        for (int o = 16; o > 0; o >>= 1) {
            int64_t of = __shfl_xor_sync(0xffffffffu, f, o);
            f = of < f ? of : f;
        }
        __syncthreads();
        if ((threadIdx.x & 31) == 0) shi[threadIdx.x >> 5] = f;
        __syncthreads();
        for (int wv = 0; wv < (int)(blockDim.x >> 5); wv++) f = shi[wv] < f ? shi[wv] : f;
        if (f != INT64_MAX && !kept_mass) break;
    }
    if (kept_mass) *kept_mass = base + block_sum_d(kept - base, sh);
    if (last_kept) {
        __syncthreads();
        int64_t l = last;
        for (int o = 16; o > 0; o >>= 1) {
            int64_t ol = __shfl_xor_sync(0xffffffffu, l, o);
            l = ol > l ? ol : l;
        }
        if ((threadIdx.x & 31) == 0) shi[threadIdx.x >> 5] = l;
        __syncthreads();
        for (int wv = 0; wv < (int)(blockDim.x >> 5); wv++) l = shi[wv] > l ? shi[wv] : l;
        *last_kept = l;
    }
    if (drawn) {
        __syncthreads();
        int64_t f = first;
        for (int o = 16; o > 0; o >>= 1) {
            int64_t of = __shfl_xor_sync(0xffffffffu, f, o);
            f = of < f ? of : f;
        }
        if ((threadIdx.x & 31) == 0) shi[threadIdx.x >> 5] = f;
        __syncthreads();
        for (int wv = 0; wv < (int)(blockDim.x >> 5); wv++) f = shi[wv] < f ? shi[wv] : f;
        *drawn = f == INT64_MAX ? -1 : f;
    }
    __syncthreads();
}

static __global__ void __launch_bounds__(SAMPLE_BLOCK)
    sample_kernel(const float *logits, int64_t ld, int64_t n, float T, float top_p, const double *u,
                  int32_t *out) {
    __shared__ float shv[32];
    __shared__ int64_t shi[32];
    __shared__ double shd[32];
    const float *xr = logits + (int64_t)blockIdx.x * ld;
    int64_t best = block_argmax(xr, n, shv, shi);
    int64_t tok = best;
    float mx = __fdiv_rn(xr[best], T);
    if (!(T > 0.0f) || !(top_p > 0.0f) || !isfinite(mx)) {
        if (threadIdx.x == 0) out[blockIdx.x] = (int32_t)best;
        return;
    }
    double ur = u[blockIdx.x];
    double total = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) total += weight(xr[i], T, mx);
    total = block_sum_d(total, shd);
    if (!(top_p < 1.0f)) {
        /* every token, in index order */
        int64_t drawn, last;
        walk(xr, n, T, mx, 1, 0u, 0.0, CUDART_INF, ur * total, NULL, &last, &drawn, shd, shi);
        if (drawn < 0) {
            /* the fallback needs the last token with weight: walk everything again */
            double km;
            walk(xr, n, T, mx, 1, 0u, 0.0, CUDART_INF, CUDART_INF, &km, &last, NULL, shd, shi);
            drawn = last >= 0 ? last : best;
        }
        tok = drawn;
    } else {
        double target = (double)top_p * total, S0, S1, kept_mass;
        uint32_t T0 = bisect_key(xr, n, T, mx, target, 1, &S0, shd);
        int64_t last_kept;
        walk(xr, n, T, mx, 0, T0, S0, target, CUDART_INF, &kept_mass, &last_kept, NULL, shd, shi);
        double r = ur * kept_mass;
        uint32_t T1 = bisect_key(xr, n, T, mx, r, 0, &S1, shd);
        if (T1 < T0) { /* rounding put the draw past the kept set: draw among T0's ties */
            T1 = T0;
            S1 = S0;
        }
        int64_t drawn;
        walk(xr, n, T, mx, 0, T1, S1, T1 == T0 ? target : CUDART_INF, r, NULL, NULL, &drawn, shd,
             shi);
        tok = drawn >= 0 ? drawn : (last_kept >= 0 ? last_kept : best);
    }
    if (threadIdx.x == 0) out[blockIdx.x] = (int32_t)tok;
}

extern "C" ig_status ig_cuda_argmax(const float *logits, int64_t ld, int rows, int64_t n,
                                    int32_t *out, ig_cuda_stream_t s, ig_error *err) {
    IG_CU_ARG(rows >= 0 && n > 0 && n <= 2147483647 && ld >= n, err, "ig_cuda_argmax");
    if (rows == 0) return IG_OK;
    argmax_kernel<<<(unsigned)rows, SAMPLE_BLOCK, 0, s>>>(logits, ld, n, out);
    return IG_CU_LAUNCHED(err, "argmax_kernel");
}

extern "C" ig_status ig_cuda_sample(const float *logits, int64_t ld, int rows, int64_t n,
                                    float temperature, float top_p, const double *u, int32_t *out,
                                    ig_cuda_stream_t s, ig_error *err) {
    IG_CU_ARG(rows >= 0 && n > 0 && n <= 2147483647 && ld >= n, err, "ig_cuda_sample");
    int greedy = !(temperature > 0.0f) || !(top_p > 0.0f);
    if (rows == 0) return IG_OK;
    IG_CU_ARG(greedy || u != NULL, err, "ig_cuda_sample");
    if (greedy) return ig_cuda_argmax(logits, ld, rows, n, out, s, err);
    sample_kernel<<<(unsigned)rows, SAMPLE_BLOCK, 0, s>>>(logits, ld, n, temperature, top_p, u,
                                                          out);
    return IG_CU_LAUNCHED(err, "sample_kernel");
}
