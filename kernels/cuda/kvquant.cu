/* The KV quantization codec of kernels/cpu/kvquant.h on the device, byte for byte: group-wise
 * asymmetric min-max codes (8, 4 or 2 bits), f16 min rounded down and f16 scale rounded up, codes
 * by round-half-even of (x - min) / scale. Every f32 operation is an explicitly rounded intrinsic
 * (no FMA contraction) so quantize gives the CPU's bytes and dequantize its floats exactly. */
#include "kernels/cuda/cuda_common.cuh"

static __device__ __forceinline__ uint16_t f16_bits(float x) {
    return __half_as_ushort(__float2half_rn(x));
}
static __device__ __forceinline__ float f16_val(uint16_t h) {
    return __half2float(__ushort_as_half(h));
}
/* x rounded to binary16 toward -inf (up = 0) or +inf (up = 1): nearest, then one step (the CPU
 * reference's ref_f16_directed). */
static __device__ __forceinline__ uint16_t f16_directed(float x, int up) {
    uint16_t h = f16_bits(x);
    float f = f16_val(h);
    if (!up && f > x) h = h == 0x0000 ? 0x8001 : (h & 0x8000) ? h + 1 : h - 1;
    if (up && f < x) h = h == 0x8000 ? 0x0001 : (h & 0x8000) ? h - 1 : h + 1;
    return h;
}
static __device__ __forceinline__ float clamp_f16(float x) {
    return fminf(fmaxf(x, -65504.0f), 65504.0f); /* NaN -> -65504, as the CPU */
}

/* One thread per (row, group block). */
static __global__ void kvq_quantize_kernel(const float *x, int64_t blocks, int hd, int bits,
                                           int group, uint8_t *out) {
    int nb = hd / group, bb = 4 + group * bits / 8, L = (1 << bits) - 1;
    for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < blocks;
         q += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = q / nb;
        int b = (int)(q % nb);
        const float *xg = x + r * hd + (int64_t)b * group;
        uint8_t *blk = out + r * (int64_t)nb * bb + (int64_t)b * bb;
        float lo = CUDART_INF_F, hi = -CUDART_INF_F;
        for (int i = 0; i < group; i++) {
            float c = clamp_f16(xg[i]);
            lo = fminf(lo, c);
            hi = fmaxf(hi, c);
        }
        lo = __fadd_rn(lo, 0.0f); /* -0 -> +0 */
        hi = __fadd_rn(hi, 0.0f);
        uint16_t mh = f16_directed(lo, 0);
        float mn = f16_val(mh);
        uint16_t sh = f16_directed(__fdiv_rn(__fsub_rn(hi, mn), (float)L), 1);
        float sc = f16_val(sh);
        float inv = sc > 0.0f ? __fdiv_rn(1.0f, sc) : 0.0f;
        blk[0] = (uint8_t)(mh & 0xff);
        blk[1] = (uint8_t)(mh >> 8);
        blk[2] = (uint8_t)(sh & 0xff);
        blk[3] = (uint8_t)(sh >> 8);
        unsigned acc = 0;
        int filled = 0, byte = 4;
        for (int i = 0; i < group; i++) {
            float t = __fmul_rn(__fsub_rn(clamp_f16(xg[i]), mn), inv);
            unsigned code = (unsigned)rintf(fminf(fmaxf(t, 0.0f), (float)L));
            acc |= code << filled;
            filled += bits;
            if (filled == 8) {
                blk[byte++] = (uint8_t)acc;
                acc = 0;
                filled = 0;
            }
        }
    }
}

/* One thread per value. */
static __global__ void kvq_dequantize_kernel(const uint8_t *in, int64_t values, int hd, int bits,
                                             int group, float *out) {
    int nb = hd / group, bb = 4 + group * bits / 8;
    unsigned m = (1u << bits) - 1u;
    for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < values;
         v += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = v / hd;
        int d = (int)(v % hd), b = d / group, i = d % group;
        const uint8_t *blk = in + r * (int64_t)nb * bb + (int64_t)b * bb;
        float mn = f16_val((uint16_t)(blk[0] | blk[1] << 8));
        float sc = f16_val((uint16_t)(blk[2] | blk[3] << 8));
        unsigned code = (blk[4 + i * bits / 8] >> (i * bits % 8)) & m;
        out[v] = __fmaf_rn((float)code, sc, mn);
    }
}

static int kvq_valid(int hd, int bits, int group) {
    return (bits == 8 || bits == 4 || bits == 2) && group > 0 && hd > 0 && hd % group == 0 &&
           (group * bits) % 8 == 0;
}

extern "C" ig_status ig_cuda_kvq_quantize_rows(const float *x, int64_t n_rows, int hd, int bits,
                                               int group, uint8_t *out, ig_cuda_stream_t s,
                                               ig_error *err) {
    IG_CU_ARG(n_rows >= 0, err, "ig_cuda_kvq_quantize_rows");
    IG_CU_ARG(kvq_valid(hd, bits, group), err, "ig_cuda_kvq_quantize_rows");
    int64_t blocks = n_rows * (hd / group);
    if (blocks == 0) return IG_OK;
    kvq_quantize_kernel<<<ig_grid(blocks, 128), 128, 0, s>>>(x, blocks, hd, bits, group, out);
    return IG_CU_LAUNCHED(err, "kvq_quantize_kernel");
}

extern "C" ig_status ig_cuda_kvq_dequantize_rows(const uint8_t *in, int64_t n_rows, int hd,
                                                 int bits, int group, float *out,
                                                 ig_cuda_stream_t s, ig_error *err) {
    IG_CU_ARG(n_rows >= 0, err, "ig_cuda_kvq_dequantize_rows");
    IG_CU_ARG(kvq_valid(hd, bits, group), err, "ig_cuda_kvq_dequantize_rows");
    int64_t values = n_rows * hd;
    if (values == 0) return IG_OK;
    kvq_dequantize_kernel<<<ig_grid(values, 256), 256, 0, s>>>(in, values, hd, bits, group, out);
    return IG_CU_LAUNCHED(err, "kvq_dequantize_kernel");
}
