/* Quest's page scores (ig_be_page_bounds): for each (table, page) the bound of q . k over the
 * page's keys from their per-dimension min and max, reduced over the table's query heads. One
 * thread per (table, page); the dimensions summed in order as ig_cpu_page_bound does, the products
 * rounded before the max (no fused multiply-add across the select). */
#include "kernels/cuda/cuda_common.cuh"

static __global__ void page_bounds_kernel(const float *q, int group, int hd, const float *kmin,
                                          const float *kmax, const int32_t *rows,
                                          int64_t pages_stride, const int32_t *src,
                                          const int32_t *n_pages, int gqa_sum, float *out,
                                          int64_t ldo, int tables) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)tables * ldo;
         i += (int64_t)gridDim.x * blockDim.x) {
        int t = (int)(i / ldo);
        int64_t p = i % ldo, np = n_pages[t] < ldo ? n_pages[t] : ldo;
        if (p >= np) continue;
        int64_t pi = (int64_t)src[t] * pages_stride + p;
        float *o = out + (int64_t)t * ldo + p;
        if (rows[pi] == 0) {
            *o = -CUDART_INF_F;
            continue;
        }
        const float *mn = kmin + pi * hd, *mx = kmax + pi * hd;
        float best = gqa_sum ? 0.0f : -CUDART_INF_F;
        for (int h = 0; h < group; h++) {
            const float *qh = q + ((int64_t)t * group + h) * hd;
            float s = 0.0f;
            for (int d = 0; d < hd; d++) {
                float a = __fmul_rn(qh[d], mn[d]), b = __fmul_rn(qh[d], mx[d]);
                s = __fadd_rn(s, a > b ? a : b);
            }
            if (gqa_sum)
                best = __fadd_rn(best, s);
            else if (s > best)
                best = s;
        }
        *o = best;
    }
}

extern "C" ig_status ig_cuda_page_bounds(const float *q, int group, int hd, const float *kmin,
                                         const float *kmax, const int32_t *rows,
                                         int64_t pages_stride, const int32_t *src,
                                         const int32_t *n_pages, int gqa_sum, float *out,
                                         int64_t ldo, int tables, ig_cuda_stream_t s,
                                         ig_error *err) {
    const char *fn = "ig_cuda_page_bounds";
    IG_CU_ARG(tables >= 0 && group > 0 && hd > 0 && pages_stride >= 0 && ldo >= 0, err, fn);
    int64_t n = (int64_t)tables * ldo;
    if (n == 0) return IG_OK;
    page_bounds_kernel<<<ig_grid(n, 128), 128, 0, s>>>(q, group, hd, kmin, kmax, rows, pages_stride,
                                                       src, n_pages, gqa_sum, out, ldo, tables);
    return IG_CU_LAUNCHED(err, "page_bounds_kernel");
}
