/* InfiniGen's offline skewing: per (layer, KV head) an orthogonal rotation A of the head's
 * query/key space, from the SVD of the query matrix observed on a calibration text, so that after q
 * -> qA and k -> kA (q.k unchanged) a few columns carry most of the magnitude. This module computes
 * A (Jacobi eigen-decomposition of Q^T Q) and reads/writes the skew file; the calibration pass is
 * core/engine/calibrate.h. It never changes the model's weights; the infinigen policy applies A
 * itself.
 *
 * Grouped-query attention: q.k is invariant only if the query head and the key head it reads use
 * the same rotation, so A is per KV head, computed from the stacked queries of the KV head's group
 * of query heads (for multi-head models that is simply per head). */
#ifndef IG_INFINIGEN_SKEW_H
#define IG_INFINIGEN_SKEW_H

#include <stdint.h>

#include "core/model/model_config.h"
#include "core/base/status.h"

#define IG_SKEW_MAGIC   "IGSKEW\r\n" /* 8 bytes; the CR LF catches text-mode mangling */
#define IG_SKEW_VERSION 1

/* A skew file in memory. */
typedef struct ig_skew {
    int arch; /* ig_arch of the model it was made for */
    int n_layer, d_model, n_head, n_kv_head, head_dim;
    int calib_tokens;    /* tokens of the calibration text used */
    uint64_t shape_hash; /* ig_skew_shape_hash of the model */
    char model_name[64];
    /* [n_layer][n_kv_head][head_dim][head_dim], row-major: A[r][c], column c is the c-th new basis
     * vector, columns ordered by decreasing sigma_q[c] * sigma_k[c] (the artifact's order). */
    float *A;
    float
        *sigma_q; /* [n_layer][n_kv_head][head_dim] singular values of the stacked Q, decreasing */
    float *sigma_k; /* [n_layer][n_kv_head][head_dim] singular values of K, decreasing */
} ig_skew;

/* FNV-1a over the shape fields of a config (arch, layers, widths, heads, vocab). */
uint64_t ig_skew_shape_hash(const ig_model_config *c);

/* Jacobi eigen-decomposition of a symmetric n x n matrix a (row-major, destroyed). evals[n] in
 * decreasing order; evecs[n][n] row-major with column i the unit eigenvector of evals[i]. */
void ig_skew_sym_eigen(double *a, int n, double *evals, double *evecs);

/* The rotation of one KV head from the Gram matrices gq = Q^T Q (stacked query rows of the group)
 * and gk = K^T K (hd x hd, row-major; destroyed). A [hd][hd] = right singular vectors of Q ordered
 * by decreasing sigma_q * sigma_k; sigma_q/sigma_k [hd] (may be NULL). */
void ig_skew_rotation_from_gram(double *gq, double *gk, int hd, float *A, float *sigma_q,
                                float *sigma_k);

/* An identity rotation for every (layer, KV head) of a model (unskewed runs). */
ig_status ig_skew_identity(const ig_model_config *c, ig_skew **out, ig_error *err);

/* Heads up to this width (the calibration's and the rotation's stack buffers). */
#define IG_SKEW_MAX_HD 512

/* A zeroed skew (A, sigma_q, sigma_k allocated) for a model of shape c, named `name`. */
ig_status ig_skew_alloc(const ig_model_config *c, const char *name, ig_skew **out, ig_error *err);

/* The calibration pass that fills a skew from a text runs an engine: core/engine/calibrate.h. */

ig_status ig_skew_save(const ig_skew *s, const char *path, ig_error *err);
ig_status ig_skew_load(const char *path, ig_skew **out, ig_error *err);
/* Fails (IG_ERR_SHAPE) with a message naming every field that differs (architecture, n_layer,
 * n_head, n_kv_head, head_dim, d_model) when the file was made for another model. */
ig_status ig_skew_check(const ig_skew *s, const ig_model_config *c, const char *path,
                        ig_error *err);
void ig_skew_free(ig_skew *s);

/* Rotation of (layer, KV head g). */
static inline const float *ig_skew_A(const ig_skew *s, int layer, int g) {
    return s->A + ((size_t)layer * (size_t)s->n_kv_head + (size_t)g) * (size_t)s->head_dim *
                      (size_t)s->head_dim;
}

#endif
