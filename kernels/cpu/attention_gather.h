/* Decode attention over a policy's working set: for each KV head, the rows of its selected entries
 * (read in place from a strided table through an index list, or from a contiguous gathered copy),
 * followed by the new tokens' own rows. Optionally writes the softmax probabilities so that a
 * policy can accumulate attention statistics. The selected rows are f32, or encoded (f16, or
 * group-wise codes of kernels/cpu/kvquant.h) and decoded inside the kernel, row by row, to the same
 * floats ig_kvq_dequantize_rows / f16 widening give: attention over encoded rows equals attention
 * over their decoded copy, bit for bit, without writing that copy (a GPU's attention kernel reads
 * the encoded rows the same way). */
#ifndef IG_ATTENTION_GATHER_H
#define IG_ATTENTION_GATHER_H

#include <stddef.h>
#include <stdint.h>

typedef enum ig_rows_enc {
    IG_ROWS_F32 = 0, /* k_base / v_base, row_stride floats apart */
    IG_ROWS_F16 = 1, /* k_enc / v_enc, enc_row_bytes apart */
    IG_ROWS_KVQ = 2, /* k_enc / v_enc: enc_bits-bit codes in groups of enc_group (kvquant.h) */
} ig_rows_enc;

typedef struct ig_gather_attn {
    int n_head, n_kv_head, hd;
    float scale;
    /* per KV head g: n_sel[g] rows, row j at k_base[g] + (idx ? idx[g][j] : j) * row_stride */
    const float *const *k_base;
    const float *const *v_base;
    int64_t row_stride;        /* floats */
    const int32_t *const *idx; /* NULL: rows 0 .. n_sel[g]-1 */
    const int64_t *n_sel;
    /* n_extra rows after the selection, [n_extra][n_kv_head][hd] (the new tokens) */
    const float *k_extra;
    const float *v_extra;
    int n_extra;
    /* encoded selected rows (enc != IG_ROWS_F32): row j of KV head g at
     * k_enc[g] + (idx ? idx[g][j] : j) * enc_row_bytes; k_base, v_base and row_stride unused */
    ig_rows_enc enc;
    int enc_bits, enc_group;
    const unsigned char *const *k_enc;
    const unsigned char *const *v_enc;
    size_t enc_row_bytes;
} ig_gather_attn;

/* Floats of workspace for a call with at most max_rows rows per head (selection + extra): a
 * slice per head (encoded rows are attended a KV group's heads at a time). */
size_t ig_cpu_attention_gather_ws_floats(int n_head, int64_t max_rows);
/* q: [n_head][hd]; out: [n_head][hd]; probs (optional): [n_head][probs_stride], the selection's
 * probabilities first, then the extra rows'. */
void ig_cpu_attention_gather(const ig_gather_attn *a, const float *q, float *ws, size_t ws_floats,
                             float *probs, int64_t probs_stride, float *out);
/* Plain reference (double accumulation). */
void ig_ref_attention_gather(const ig_gather_attn *a, const float *q, float *probs,
                             int64_t probs_stride, float *out);

#endif
