/* The transfer of selected KV rows: host-resident home tables (mapped pinned memory) -> a packed
 * device working set, in one kernel per call.
 *
 * Why a kernel reading mapped pinned memory rather than cudaMemcpy2DAsync batches: a policy's
 * selection is scattered (InfiniGen's top-n, H2O's heavy hitters), so the runs of consecutive rows
 * are short, often single rows of 36-512 bytes. cudaMemcpy2DAsync moves one uniformly strided
 * matrix per call: a scattered selection becomes one call per run, each a few microseconds of
 * launch and DMA setup, thousands per layer (batch x KV heads x rows). The kernel instead has
 * every thread move one 16-byte piece of one selected row (falling back to 4- or 1-byte pieces
 * when rows are not so aligned), so tens of thousands of PCIe reads are in flight at once and the
 * link, not the per-copy overhead, sets the rate; the index lists never leave the device. It
 * costs SM time while it runs (small next to attention) and needs the home registered as mapped
 * (cudaHostRegisterMapped / cudaHostAllocMapped). */
#include "kernels/cuda/cuda_common.cuh"

#define GATHER_BLOCK 256

template <typename V>
static __global__ void
gather_rows_kernel(char *dst, int64_t dst_table_stride, const char *src, int64_t src_table_stride,
                   int64_t src_row_stride, const int32_t *src_table, int64_t pieces_per_row,
                   const int32_t *idx, int64_t idx_stride, const int32_t *n_sel) {
    int64_t t = blockIdx.y;
    int64_t st = src_table ? (int64_t)src_table[t] : t;
    int64_t total = (int64_t)n_sel[t] * pieces_per_row;
    const int32_t *it = idx + t * idx_stride;
    V *d = (V *)(dst + t * dst_table_stride);
    const char *s = src + st * src_table_stride;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < total;
         p += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = p / pieces_per_row, c = p % pieces_per_row;
        const V *row = (const V *)(s + (int64_t)it[j] * src_row_stride);
        d[j * pieces_per_row + c] = row[c];
    }
}

extern "C" ig_status ig_cuda_gather_rows(void *dst, int64_t dst_table_stride, const void *src,
                                         int64_t src_table_stride, int64_t src_row_stride,
                                         const int32_t *src_table, size_t row_bytes,
                                         const int32_t *idx, int64_t idx_stride,
                                         const int32_t *n_sel, int tables, ig_cuda_stream_t s,
                                         ig_error *err) {
    const char *fn = "ig_cuda_gather_rows";
    IG_CU_ARG(tables >= 0 && tables <= 65535 && row_bytes > 0, err, fn);
    IG_CU_ARG(idx_stride >= 0 && src_row_stride >= (int64_t)row_bytes, err, fn);
    IG_CU_ARG(dst_table_stride >= idx_stride * (int64_t)row_bytes, err, fn);
    if (tables == 0 || idx_stride == 0) return IG_OK;
    IG_CU_ARG(idx != NULL && n_sel != NULL, err, fn);
    /* the widest piece that divides every address and stride */
    uint64_t a = (uint64_t)(uintptr_t)dst | (uint64_t)(uintptr_t)src | (uint64_t)dst_table_stride |
                 (uint64_t)src_table_stride | (uint64_t)src_row_stride | (uint64_t)row_bytes;
    int w = (a % 16 == 0) ? 16 : (a % 4 == 0) ? 4 : 1;
    int64_t ppr = (int64_t)row_bytes / w;
    int64_t blocks = ig_cuda_blocks_1d(idx_stride * ppr, GATHER_BLOCK);
    if (blocks > 65535) blocks = 65535; /* grid-stride beyond that */
    dim3 grid((unsigned)blocks, (unsigned)tables);
    char *d = (char *)dst;
    const char *sr = (const char *)src;
    if (w == 16)
        gather_rows_kernel<uint4>
            <<<grid, GATHER_BLOCK, 0, s>>>(d, dst_table_stride, sr, src_table_stride,
                                           src_row_stride, src_table, ppr, idx, idx_stride, n_sel);
    else if (w == 4)
        gather_rows_kernel<uint32_t>
            <<<grid, GATHER_BLOCK, 0, s>>>(d, dst_table_stride, sr, src_table_stride,
                                           src_row_stride, src_table, ppr, idx, idx_stride, n_sel);
    else
        gather_rows_kernel<uint8_t>
            <<<grid, GATHER_BLOCK, 0, s>>>(d, dst_table_stride, sr, src_table_stride,
                                           src_row_stride, src_table, ppr, idx, idx_stride, n_sel);
    return IG_CU_LAUNCHED(err, "gather_rows_kernel");
}
