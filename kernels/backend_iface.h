/* The backend interface (docs/ARCHITECTURE.md, issue 18 step 2), in the manner of ggml's backends:
 * a backend is a table of functions (ig_be_iface) and a context; what it can do is data
 * (ig_be_caps), read by callers instead of #ifdef or backend-name tests. kernels/cpu fills one
 * table, kernels/cuda another, and kernels/cpu/ref_backend.c a third from the scalar references
 * (slow, for conformance tests). The same code, calling the ig_be_* functions below, runs on each.
 *
 * Memory. Every tensor pointer an op takes is a buffer of that backend (ig_be_alloc): host memory
 * on the CPU backends, device memory on CUDA; ig_be_upload / ig_be_download move bytes between it
 * and the host. Ops are queued in order on the backend's one stream and may return before they
 * finish (CUDA); ig_be_download and ig_be_sync wait for everything queued before them. Each op
 * validates its sizes first and returns IG_ERR_INVALID_ARG naming the argument; an empty op (no
 * rows) succeeds without work. A backend is used by one thread at a time (its scratch and its
 * stream are shared); the cpu table parallelises each batched op itself.
 *
 * Semantics are those of the CPU kernels named beside each op (kernels/cpu/cpu_kernels.h): the
 * tables agree exactly on integer results (counts, indices, with their rules for ties and NaN)
 * and within rounding on float ones (the CPU and CUDA tables bit for bit where cuda_kernels.h
 * says so). tests/test_backend.c runs every table on the same inputs.
 *
 * The table holds the ops of a layer (norms, RoPE, element-wise, linear, causal attention over a
 * KV cache, strided copies between buffers) and the selection ops a policy's speculation needs
 * (partial scores, threshold counts, top-k), and the policy path's gathers of selected rows and
 * attention over them, the KV codec, and queues (a second queue, events, asynchronous uploads,
 * host memory registered for the device). */
#ifndef IG_BACKEND_IFACE_H
#define IG_BACKEND_IFACE_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"
#include "core/base/status.h"
#include "kernels/linear_part.h"

/* 2: copy2d, attention_ws, attention, gather_rows, attention_rows, convert, the KV codec's
 * kvq_quantize / kvq_dequantize, and queues (fork, upload_async, events, host registration) added.
 * 3: attention_colsum_ws, attention_colsum (causal attention with each key's probability sums),
 * page_bounds (Quest's page scores), embed (rows of an embedding table by token id).
 * 4: linear_multi (several matrices over the same input in one call).
 * A table of an earlier version lacks slots and is refused. */
#define IG_BE_IFACE_VERSION 4

typedef struct ig_be ig_be;

/* Decode attention over selected rows (ig_be_attention_rows): one query token per sequence, for
 * `batch` sequences. Table t = b * n_kv_head + g holds rows of hd elements of kv_dtype (f32 or
 * f16) at k + t * table_stride + r * row_stride (elements), likewise v; its selection is n_sel[t]
 * rows, row j = idx ? idx[t * idx_stride + j] : j; then n_extra f32 rows at
 * k_extra[((b * n_extra + e) * n_kv_head + g) * hd] (the new tokens; NULL when n_extra = 0).
 * Every table must have a row (n_sel[t] + n_extra >= 1). Query head h of sequence b uses KV head
 * h / (n_head / n_kv_head). probs (optional): [batch][n_head][probs_stride], the selection's
 * probabilities then the extra rows', the rest of the row 0 (probs_stride >= the rows). Every
 * pointer is a buffer of the backend. */
typedef struct ig_be_attn_rows {
    int batch, n_head, n_kv_head, hd;
    float scale;
    ig_dtype kv_dtype;
    const void *k, *v;
    int64_t table_stride, row_stride;
    const int32_t *idx;
    int64_t idx_stride;
    const int32_t *n_sel;
    const float *k_extra, *v_extra;
    int n_extra;
    float *probs;
    int64_t probs_stride;
} ig_be_attn_rows;

/* What a backend is and can do. */
typedef struct ig_be_caps {
    const char *name;  /* "cpu", "cpu-ref", "cuda" */
    int device_memory; /* 1: buffers are not host-addressable (use upload / download) */
    int async;         /* 1: ops return before they finish; download and sync wait */
    int reference;     /* 1: a slow reference for tests, never for runs */
} ig_be_caps;

typedef struct ig_be_iface {
    int version; /* IG_BE_IFACE_VERSION */
    void (*destroy)(ig_be *be);
    /* memory */
    void *(*alloc)(ig_be *be, size_t bytes, ig_error *err);
    void (*free)(ig_be *be, void *p);
    ig_status (*upload)(ig_be *be, void *dst, const void *host_src, size_t bytes, ig_error *err);
    ig_status (*download)(ig_be *be, void *host_dst, const void *src, size_t bytes, ig_error *err);
    ig_status (*upload2d)(ig_be *be, void *dst, size_t dpitch, const void *host_src, size_t spitch,
                          size_t width, size_t rows, ig_error *err);
    ig_status (*sync)(ig_be *be, ig_error *err);
    /* layer ops */
    ig_status (*linear)(ig_be *be, const float *x, int64_t M, int64_t K, const void *W, ig_dtype wt,
                        int64_t N, const float *bias, float *y, ig_error *err);
    ig_status (*rmsnorm)(ig_be *be, const float *x, const float *w, int64_t rows, int64_t dim,
                         float eps, float *y, ig_error *err);
    ig_status (*layernorm)(ig_be *be, const float *x, const float *w, const float *b, int64_t rows,
                           int64_t dim, float eps, float *y, ig_error *err);
    ig_status (*rope)(ig_be *be, float *x, int64_t n_tok, int n_heads, int head_dim, int rot_dim,
                      const int32_t *pos, const float *cos_tab, const float *sin_tab,
                      ig_error *err);
    ig_status (*silu_mul)(ig_be *be, const float *gate, const float *up, int64_t n, float *out,
                          ig_error *err);
    ig_status (*add)(ig_be *be, float *y, const float *x, int64_t n, ig_error *err);
    ig_status (*softmax)(ig_be *be, float *x, int64_t rows, int64_t n, ig_error *err);
    /* selection ops */
    ig_status (*partial_scores)(ig_be *be, const void *keys, ig_dtype kt, int64_t ld,
                                int64_t keys_stride, int kc, int64_t n, const float *q, int64_t ldq,
                                int64_t q_stride, int nq, float *out, int64_t ldo,
                                int64_t out_stride, float *col_max, int64_t cm_stride,
                                float *row_max, int tables, ig_error *err);
    ig_status (*count_greater)(ig_be *be, const float *x, int64_t ldx, int rows, int64_t n,
                               const int32_t *n_rows, const float *thr_base, float thr_add,
                               int32_t *counts, ig_error *err);
    ig_status (*topk)(ig_be *be, const float *x, int64_t ldx, int rows, int64_t n,
                      const int32_t *n_rows, int64_t k, const int32_t *k_rows, int32_t *idx,
                      int64_t ld_idx, int32_t *counts, ig_error *err);
    ig_status (*partial_scores_tab)(ig_be *be, const void *keys, ig_dtype kt, int64_t ld,
                                    const int64_t *tab, int kc_max, int64_t n_max, const float *q,
                                    int64_t ldq, int64_t q_stride, int nq, float *out, int64_t ldo,
                                    int64_t out_stride, float *col_max, int64_t cm_stride,
                                    float *row_max, int tables, ig_error *err);
    ig_status (*mask_scores)(ig_be *be, float *x, int64_t ldx, int rows, int64_t x_stride,
                             float *col_max, int64_t cm_stride, float *row_max, const int32_t *key,
                             int64_t key_stride, const int64_t *tab, int64_t n_max, int tables,
                             ig_error *err);
    ig_status (*relu)(ig_be *be, float *x, int64_t n, ig_error *err);
    /* copies and attention (the plain KV cache path of a layer) */
    ig_status (*copy2d)(ig_be *be, void *dst, size_t dpitch, const void *src, size_t spitch,
                        size_t width, size_t rows, ig_error *err);
    size_t (*attention_ws)(ig_be *be, int64_t n_q, int64_t n_ctx, int n_head, int hd);
    ig_status (*attention)(ig_be *be, const float *q, int64_t n_q, int64_t p0, const float *k,
                           const float *v, int64_t stride_tokens, int n_head, int n_kv_head, int hd,
                           float scale, float *ws, size_t ws_floats, float *out, ig_error *err);
    /* the policy path: selected rows moved and attended */
    ig_status (*gather_rows)(ig_be *be, void *dst, int64_t dst_table_stride, const void *src,
                             int64_t src_table_stride, int64_t src_row_stride,
                             const int32_t *src_table, size_t row_bytes, const int32_t *idx,
                             int64_t idx_stride, const int32_t *n_sel, int tables, ig_error *err);
    ig_status (*attention_rows)(ig_be *be, const ig_be_attn_rows *a, const float *q, float *out,
                                ig_error *err);
    /* the KV codec: f16 rows, and group-quantized rows (kernels/cpu/kvquant.h) */
    ig_status (*convert)(ig_be *be, const void *src, ig_dtype st, void *dst, ig_dtype dt, int64_t n,
                         ig_error *err);
    ig_status (*kvq_quantize)(ig_be *be, const float *x, int64_t rows, int hd, int bits, int group,
                              uint8_t *out, ig_error *err);
    ig_status (*kvq_dequantize)(ig_be *be, const uint8_t *in, int64_t rows, int hd, int bits,
                                int group, float *out, ig_error *err);
    /* queues: a second queue of the same device, asynchronous uploads, events, host memory
     * the device reads in place */
    ig_status (*fork)(ig_be *be, ig_be **out, ig_error *err);
    ig_status (*upload_async)(ig_be *be, void *dst, const void *host_src, size_t bytes,
                              ig_error *err);
    ig_status (*event_new)(ig_be *be, void **ev, ig_error *err);
    void (*event_free)(ig_be *be, void *ev);
    ig_status (*event_record)(ig_be *be, void *ev, ig_error *err);
    ig_status (*event_wait)(ig_be *be, void *ev, ig_error *err);
    ig_status (*host_register)(ig_be *be, void *p, size_t bytes, void **dev, ig_error *err);
    ig_status (*host_unregister)(ig_be *be, void *p, ig_error *err);
    /* 3: prefill attention that also reports what each key received (H2O's prompt scores) */
    size_t (*attention_colsum_ws)(ig_be *be, int64_t n_q, int64_t n_ctx, int n_head, int hd);
    ig_status (*attention_colsum)(ig_be *be, const float *q, int64_t n_q, int64_t p0,
                                  const float *k, const float *v, int64_t stride_tokens, int n_head,
                                  int n_kv_head, int hd, float scale, float *ws, size_t ws_floats,
                                  float *colsum, int64_t colsum_stride, float *out, ig_error *err);
    ig_status (*page_bounds)(ig_be *be, const float *q, int group, int hd, const float *kmin,
                             const float *kmax, const int32_t *rows, int64_t pages_stride,
                             const int32_t *src, const int32_t *n_pages, int gqa_sum, float *out,
                             int64_t ldo, int tables, ig_error *err);
    ig_status (*embed)(ig_be *be, const void *table, ig_dtype tt, int64_t rows, int64_t dim,
                       const int32_t *ids, int64_t n, float *out, ig_error *err);
    /* 4 */
    ig_status (*linear_multi)(ig_be *be, const float *x, int64_t M, int64_t K, ig_dtype wt,
                              const ig_linear_part *parts, int n_parts, ig_error *err);
} ig_be_iface;

/* A backend instance: its table, its capabilities and its own state. */
struct ig_be {
    const ig_be_iface *iface;
    ig_be_caps caps;
    void *ctx;
};

/* The backends. threads: 0 = the CPU kernels' setting. The CUDA backend fails with
 * IG_ERR_UNSUPPORTED where CUDA is not compiled in and IG_ERR_DEVICE (the reason) where no GPU
 * answers; on the CUDA emulator it runs everywhere. */
ig_status ig_be_cpu_create(ig_be **out, ig_error *err);
ig_status ig_be_ref_create(ig_be **out, ig_error *err);
ig_status ig_be_cuda_create(int device, ig_be **out, ig_error *err);
void ig_be_free(ig_be *be);

/* What an engine will ask of a device table's linear, so that the table sizes its scratch once
 * instead of growing it during a run: up to max_rows rows of x, inputs and outputs up to max_cols
 * wide, uncompressed matrices stored as weight_type (f32, f16 or bf16; it also sets the GEMM
 * precision of compressed ones: f32 for f32, else f16), and whether some matrices stay
 * block-quantized. */
typedef struct ig_be_sizing {
    int64_t max_rows, max_cols;
    ig_dtype weight_type;
    int compressed;
} ig_be_sizing;
/* IG_OK when z can size a table (a weight type of f32, f16 or bf16, at least one row and one
 * column), IG_ERR_INVALID_ARG naming what is wrong otherwise. */
ig_status ig_be_sizing_check(const ig_be_sizing *z, ig_error *err);
/* ig_be_cuda_create with its scratch sized for z (owned by the table, freed with it); z is
 * checked first (ig_be_sizing_check), before any device is touched. */
ig_status ig_be_cuda_create_sized(int device, const ig_be_sizing *z, ig_be **out, ig_error *err);

/* IG_OK when a table is usable: its version is this build's and no slot is NULL. */
ig_status ig_be_iface_check(const ig_be_iface *iface, const char *name, ig_error *err);

/* ---- calls through the table (each one line: be->iface->op(be, ...)) ---- */

void *ig_be_alloc(ig_be *be, size_t bytes, ig_error *err);
void ig_be_release(ig_be *be, void *p);
ig_status ig_be_upload(ig_be *be, void *dst, const void *host_src, size_t bytes, ig_error *err);
ig_status ig_be_download(ig_be *be, void *host_dst, const void *src, size_t bytes, ig_error *err);
/* rows runs of `width` bytes: row r from host_src + r * spitch to dst + r * dpitch (one call for a
 * strided region, e.g. a column range of every row of a table). Waits like ig_be_upload. */
ig_status ig_be_upload2d(ig_be *be, void *dst, size_t dpitch, const void *host_src, size_t spitch,
                         size_t width, size_t rows, ig_error *err);
ig_status ig_be_sync(ig_be *be, ig_error *err);

/* y[M][N] = x[M][K] W^T (+ bias): ig_cpu_linear; W f32, f16, bf16 or block-quantized. */
ig_status ig_be_linear(ig_be *be, const float *x, int64_t M, int64_t K, const void *W, ig_dtype wt,
                       int64_t N, const float *bias, float *y, ig_error *err);
/* ig_be_linear for 1..IG_LINEAR_MULTI_MAX matrices of one type over the same x (a layer's q, k,
 * v or gate, up), each output what ig_be_linear gives for its matrix alone (on the CPU bitwise:
 * ig_cpu_linear_multi, one parallel region for small M). */
ig_status ig_be_linear_multi(ig_be *be, const float *x, int64_t M, int64_t K, ig_dtype wt,
                             const ig_linear_part *parts, int n_parts, ig_error *err);
ig_status ig_be_rmsnorm(ig_be *be, const float *x, const float *w, int64_t rows, int64_t dim,
                        float eps, float *y, ig_error *err);
ig_status ig_be_layernorm(ig_be *be, const float *x, const float *w, const float *b, int64_t rows,
                          int64_t dim, float eps, float *y, ig_error *err);
/* ig_cpu_rope; pos and the tables are backend buffers too. */
ig_status ig_be_rope(ig_be *be, float *x, int64_t n_tok, int n_heads, int head_dim, int rot_dim,
                     const int32_t *pos, const float *cos_tab, const float *sin_tab, ig_error *err);
ig_status ig_be_silu_mul(ig_be *be, const float *gate, const float *up, int64_t n, float *out,
                         ig_error *err);
ig_status ig_be_add(ig_be *be, float *y, const float *x, int64_t n, ig_error *err);
/* max(x, 0) in place over n values (ig_cpu_relu; OPT's MLP). */
ig_status ig_be_relu(ig_be *be, float *x, int64_t n, ig_error *err);
/* rows runs of `width` bytes from src + r * spitch to dst + r * dpitch, both buffers of the
 * backend (e.g. new key rows into a KV cache laid out [kv_head][token][hd]); queued like an op. */
ig_status ig_be_copy2d(ig_be *be, void *dst, size_t dpitch, const void *src, size_t spitch,
                       size_t width, size_t rows, ig_error *err);
/* Floats of workspace ig_be_attention needs for n_q queries over n_ctx >= p0 + n_q positions with
 * the backend's threads (ig_cpu_attention_ws_floats on the cpu table; 0 where the backend needs
 * none). A workspace sized for the largest call serves every smaller one. */
size_t ig_be_attention_ws(ig_be *be, int64_t n_q, int64_t n_ctx, int n_head, int hd);
/* Causal attention of n_q new queries of one sequence at positions p0 .. p0 + n_q - 1 over a cache
 * k, v [n_kv_head][stride_tokens][hd] whose rows 0 .. p0 + n_q - 1 are filled; q and out
 * [n_q][n_head][hd]; grouped-query heads (ig_cpu_attention). ws: a backend buffer of ws_floats
 * floats (ig_be_attention_ws; a smaller one on the cpu table runs on fewer threads, one too small
 * for one thread is refused). */
ig_status ig_be_attention(ig_be *be, const float *q, int64_t n_q, int64_t p0, const float *k,
                          const float *v, int64_t stride_tokens, int n_head, int n_kv_head, int hd,
                          float scale, float *ws, size_t ws_floats, float *out, ig_error *err);
/* Copies selected rows between buffers of the backend: table t (0 <= t < tables) reads source
 * table st = src_table ? src_table[t] : t at src + st * src_table_stride, row i of it at
 * + i * src_row_stride, and its n_sel[t] rows idx[t * idx_stride + j] go to dst +
 * t * dst_table_stride + j * row_bytes (packed). Strides in bytes; any row format (f32, f16, the
 * KV codec's rows). On the cuda table src may also be mapped pinned host memory (a KV home),
 * read over the bus (ig_cuda_gather_rows). */
ig_status ig_be_gather_rows(ig_be *be, void *dst, int64_t dst_table_stride, const void *src,
                            int64_t src_table_stride, int64_t src_row_stride,
                            const int32_t *src_table, size_t row_bytes, const int32_t *idx,
                            int64_t idx_stride, const int32_t *n_sel, int tables, ig_error *err);
/* Decode attention over selected rows (ig_be_attn_rows above): ig_cpu_attention_gather per
 * sequence on the cpu table, its double-precision reference on cpu-ref, ig_cuda_attention_rows on
 * cuda. q, out: [batch][n_head][hd]. The host tables refuse a table without rows or a probs row
 * too short; the cuda table cannot read n_sel before it runs and writes 0 there. */
ig_status ig_be_attention_rows(ig_be *be, const ig_be_attn_rows *a, const float *q, float *out,
                               ig_error *err);
/* n elements between f32, f16 and bf16, round to nearest even (ig_convert; ig_cuda_convert):
 * the same bits on every table. */
ig_status ig_be_convert(ig_be *be, const void *src, ig_dtype st, void *dst, ig_dtype dt, int64_t n,
                        ig_error *err);
/* The KV codec's group-quantized rows (kernels/cpu/kvquant.h: 8, 4 or 2 bits, groups with f16
 * min/scale): x [rows][hd] f32 -> out [rows][ig_kvq_row_bytes], and back; the same bytes and
 * floats on every table (ig_kvq_quantize_rows / ig_cuda_kvq_quantize_rows). An invalid (hd, bits,
 * group) is refused. */
ig_status ig_be_kvq_quantize(ig_be *be, const float *x, int64_t rows, int hd, int bits, int group,
                             uint8_t *out, ig_error *err);
ig_status ig_be_kvq_dequantize(ig_be *be, const uint8_t *in, int64_t rows, int hd, int bits,
                               int group, float *out, ig_error *err);
/* Queues. A backend's ops run in order on its queue; ig_be_fork makes a sibling table on a new
 * queue of the same device (buffers of either are buffers of both), to overlap copies with
 * compute. Free a fork before the table it came from. On the host tables every op has finished
 * when it returns, so events order nothing there and are tokens. */
ig_status ig_be_fork(ig_be *be, ig_be **out, ig_error *err);
/* Queues the copy of `bytes` host bytes to dst and returns at once where the backend is
 * asynchronous: host_src must stay unchanged until the queue has passed this point (an event, a
 * sync). Pinned host memory makes it truly asynchronous on CUDA. */
ig_status ig_be_upload_async(ig_be *be, void *dst, const void *host_src, size_t bytes,
                             ig_error *err);
/* An event: recorded on one queue at the point reached so far, waited for by another (the waiting
 * queue's later ops run after everything before the record; the host does not block). An event
 * is re-recorded freely; free it with the table that made it. */
ig_status ig_be_event_new(ig_be *be, void **ev, ig_error *err);
void ig_be_event_free(ig_be *be, void *ev);
ig_status ig_be_event_record(ig_be *be, void *ev, ig_error *err);
ig_status ig_be_event_wait(ig_be *be, void *ev, ig_error *err);
/* Host memory [p, p + bytes) made readable by the device in place (CUDA: page-locked and mapped,
 * cudaHostRegister, keeping its NUMA placement); *dev is the address ops use for it (p itself on
 * the host tables). Undo with ig_be_host_unregister before the memory is freed, after the queues
 * reading it are synchronised. */
ig_status ig_be_host_register(ig_be *be, void *p, size_t bytes, void **dev, ig_error *err);
ig_status ig_be_host_unregister(ig_be *be, void *p, ig_error *err);
/* ig_be_attention that also adds, for each query head h and key j < p0 + n_q, the sum over this
 * call's queries of their softmax probability of key j into colsum[h * colsum_stride + j]
 * (colsum_stride >= p0 + n_q; ig_cpu_attention_colsum): H2O's heavy-hitter scores of a prompt.
 * out is what ig_be_attention computes on the same table (bitwise on the host tables); the sums
 * agree across tables to float rounding (the cpu table: bitwise for any thread count). ws: a
 * buffer of the backend of ig_be_attention_colsum_ws floats (the cpu table refuses one too small
 * for one thread; cuda keeps each query's softmax maximum and sum there). */
size_t ig_be_attention_colsum_ws(ig_be *be, int64_t n_q, int64_t n_ctx, int n_head, int hd);
ig_status ig_be_attention_colsum(ig_be *be, const float *q, int64_t n_q, int64_t p0, const float *k,
                                 const float *v, int64_t stride_tokens, int n_head, int n_kv_head,
                                 int hd, float scale, float *ws, size_t ws_floats, float *colsum,
                                 int64_t colsum_stride, float *out, ig_error *err);
/* rows x n in place, ig_cpu_softmax per row. */
ig_status ig_be_softmax(ig_be *be, float *x, int64_t rows, int64_t n, ig_error *err);
/* ig_cpu_partial_scores over `tables` tables (strides in elements; the layout of
 * ig_cuda_partial_scores): table t's keys at keys + t * keys_stride, queries at q + t * q_stride,
 * scores at out + t * out_stride, col_max (optional) + t * cm_stride, row_max + t * nq. */
ig_status ig_be_partial_scores(ig_be *be, const void *keys, ig_dtype kt, int64_t ld,
                               int64_t keys_stride, int kc, int64_t n, const float *q, int64_t ldq,
                               int64_t q_stride, int nq, float *out, int64_t ldo,
                               int64_t out_stride, float *col_max, int64_t cm_stride,
                               float *row_max, int tables, ig_error *err);
/* As ig_be_partial_scores, each table with its own keys, column count and length, read from the
 * backend buffer tab [tables][3]: table t's keys at keys + tab[3t] elements, its kc = tab[3t + 1]
 * columns (clamped to 0 .. kc_max) and n = tab[3t + 2] entries (clamped to 0 .. n_max); its scores
 * and col_max are written for its n entries only, row_max over them (-inf when n = 0). One call
 * for tables of different sizes at arbitrary places (InfiniGen's (sequence, KV head) tables of a
 * layer); bit for bit ig_be_partial_scores on each table alone. */
ig_status ig_be_partial_scores_tab(ig_be *be, const void *keys, ig_dtype kt, int64_t ld,
                                   const int64_t *tab, int kc_max, int64_t n_max, const float *q,
                                   int64_t ldq, int64_t q_stride, int nq, float *out, int64_t ldo,
                                   int64_t out_stride, float *col_max, int64_t cm_stride,
                                   float *row_max, int tables, ig_error *err);
/* Masks the entries of score tables whose key is negative (InfiniGen's pool: entries it freed,
 * position -1). Table t has n_t = tab[3t + 2] entries (clamped to 0 .. n_max; tab as for
 * ig_be_partial_scores_tab), `rows` score rows x + t * x_stride + h * ldx, optional col_max +
 * t * cm_stride and keys key + t * key_stride. For e < n_t with key[e] < 0: x[h][e] = -inf for
 * every row and col_max[e] = -inf; then row_max[t * rows + h] = the largest x[h][e] over the
 * other entries (NaN never larger; -inf when none). Exact on every backend. */
ig_status ig_be_mask_scores(ig_be *be, float *x, int64_t ldx, int rows, int64_t x_stride,
                            float *col_max, int64_t cm_stride, float *row_max, const int32_t *key,
                            int64_t key_stride, const int64_t *tab, int64_t n_max, int tables,
                            ig_error *err);
/* Per row r of x (x + r * ldx, n_rows ? n_rows[r] : n elements): counts[r] = the elements strictly
 * greater than (thr_base ? thr_base[r] : 0) + thr_add (ig_cpu_count_greater). */
ig_status ig_be_count_greater(ig_be *be, const float *x, int64_t ldx, int rows, int64_t n,
                              const int32_t *n_rows, const float *thr_base, float thr_add,
                              int32_t *counts, ig_error *err);
/* Quest's page scores of `tables` (sequence, KV head) tables. Table t reads its pages from page
 * table src[t]: page p (0 <= p < n_pages[t] <= ldo) has rows[src[t] * pages_stride + p] keys
 * seen and per-dimension key bounds kmin, kmax + (src[t] * pages_stride + p) * hd (n_pages[t]
 * above ldo is taken as ldo); its query heads
 * are q + (t * group + h) * hd, h < group. out[t * ldo + p] = the max (gqa_sum: the sum) over h
 * of ig_cpu_page_bound(q_h, kmin_p, kmax_p, hd), or -inf for a page without keys. The cpu table
 * gives ig_cpu_page_bound's bits, the others agree to float rounding. Every pointer is a buffer
 * of the backend. */
ig_status ig_be_page_bounds(ig_be *be, const float *q, int group, int hd, const float *kmin,
                            const float *kmax, const int32_t *rows, int64_t pages_stride,
                            const int32_t *src, const int32_t *n_pages, int gqa_sum, float *out,
                            int64_t ldo, int tables, ig_error *err);
/* Embedding rows: out[i][0..dim) = row ids[i] of `table` ([rows][dim] of tt: f32, f16, bf16 or
 * block-quantized) as f32, each row as ig_dequant_row_ref gives it (bitwise on every table). ids
 * in [0, rows): the host tables refuse one outside, the cuda table (which cannot read ids before
 * it runs) writes a row of NaN for it. Every pointer is a buffer of the backend. */
ig_status ig_be_embed(ig_be *be, const void *table, ig_dtype tt, int64_t rows, int64_t dim,
                      const int32_t *ids, int64_t n, float *out, ig_error *err);
/* Per row, the k_r = k_rows ? k_rows[r] : k largest, ties to the lower index, NaN below every
 * number, written ascending to idx + r * ld_idx; counts[r] = min(max(k_r, 0), n_r) (ig_cpu_topk).
 */
ig_status ig_be_topk(ig_be *be, const float *x, int64_t ldx, int rows, int64_t n,
                     const int32_t *n_rows, int64_t k, const int32_t *k_rows, int32_t *idx,
                     int64_t ld_idx, int32_t *counts, ig_error *err);

#endif
