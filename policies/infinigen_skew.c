/* InfiniGen skewing: rotations from calibration statistics and the skew file. The calibration pass
 * that gathers the statistics runs the engine, so it lives in the engine's layer
 * (core/engine/calibrate.c). */
#include "policies/infinigen_skew.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/policy.h"

/* ---- shapes ---- */

static uint64_t fnv1a(uint64_t h, uint32_t v) {
    for (int i = 0; i < 4; i++) {
        h ^= (v >> (8 * i)) & 0xffu;
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t ig_skew_shape_hash(const ig_model_config *c) {
    uint32_t f[] = {(uint32_t)c->arch,   (uint32_t)c->n_layer,   (uint32_t)c->d_model,
                    (uint32_t)c->n_head, (uint32_t)c->n_kv_head, (uint32_t)c->head_dim,
                    (uint32_t)c->d_ffn,  (uint32_t)c->vocab};
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) h = fnv1a(h, f[i]);
    return h;
}

/* ---- Jacobi eigen-decomposition ---- */

void ig_skew_sym_eigen(double *a, int n, double *evals, double *evecs) {
    size_t N = (size_t)n;
    for (size_t i = 0; i < N * N; i++) evecs[i] = 0;
    for (size_t i = 0; i < N; i++) evecs[i * N + i] = 1;
    double total = 0;
    for (size_t i = 0; i < N * N; i++) total += a[i] * a[i];
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0;
        for (size_t p = 0; p < N; p++)
            for (size_t q = p + 1; q < N; q++) off += a[p * N + q] * a[p * N + q];
        if (off <= 1e-30 * total || off == 0) break;
        for (size_t p = 0; p < N; p++)
            for (size_t q = p + 1; q < N; q++) {
                double apq = a[p * N + q];
                if (apq == 0) continue;
                double theta = (a[q * N + q] - a[p * N + p]) / (2 * apq);
                double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                /* A <- J^T A J, V <- V J with J the rotation by (c, s) in the (p, q) plane */
                for (size_t k = 0; k < N; k++) {
                    double akp = a[k * N + p], akq = a[k * N + q];
                    a[k * N + p] = c * akp - s * akq;
                    a[k * N + q] = s * akp + c * akq;
                }
                for (size_t k = 0; k < N; k++) {
                    double apk = a[p * N + k], aqk = a[q * N + k];
                    a[p * N + k] = c * apk - s * aqk;
                    a[q * N + k] = s * apk + c * aqk;
                }
                for (size_t k = 0; k < N; k++) {
                    double vkp = evecs[k * N + p], vkq = evecs[k * N + q];
                    evecs[k * N + p] = c * vkp - s * vkq;
                    evecs[k * N + q] = s * vkp + c * vkq;
                }
            }
    }
    for (size_t i = 0; i < N; i++) evals[i] = a[i * N + i];
    /* selection sort by decreasing eigenvalue, swapping eigenvector columns along */
    for (size_t i = 0; i < N; i++) {
        size_t best = i;
        for (size_t j = i + 1; j < N; j++)
            if (evals[j] > evals[best]) best = j;
        if (best == i) continue;
        double t = evals[i];
        evals[i] = evals[best];
        evals[best] = t;
        for (size_t k = 0; k < N; k++) {
            t = evecs[k * N + i];
            evecs[k * N + i] = evecs[k * N + best];
            evecs[k * N + best] = t;
        }
    }
}

#define MAX_HD IG_SKEW_MAX_HD

void ig_skew_rotation_from_gram(double *gq, double *gk, int hd, float *A, float *sigma_q,
                                float *sigma_k) {
    IG_ASSERT(hd > 0 && hd <= MAX_HD);
    size_t n = (size_t)hd;
    double *vq = malloc(n * n * sizeof(double)), *vk = malloc(n * n * sizeof(double));
    double lq[MAX_HD], lk[MAX_HD], prod[MAX_HD];
    int order[MAX_HD];
    IG_ASSERT(vq && vk);
    ig_skew_sym_eigen(gq, hd, lq, vq);
    ig_skew_sym_eigen(gk, hd, lk, vk);
    for (int i = 0; i < hd; i++) {
        lq[i] = sqrt(lq[i] > 0 ? lq[i] : 0); /* singular values of Q and K, decreasing */
        lk[i] = sqrt(lk[i] > 0 ? lk[i] : 0);
        prod[i] = lq[i] * lk[i];
        order[i] = i;
    }
    /* the artifact orders the basis by sigma_q * sigma_k (rank-wise pairs); stable on ties */
    for (int i = 1; i < hd; i++) {
        int o = order[i], j = i;
        while (j > 0 && prod[order[j - 1]] < prod[o]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = o;
    }
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < n; c++) A[r * n + c] = (float)vq[r * n + (size_t)order[c]];
    for (int i = 0; i < hd; i++) {
        if (sigma_q) sigma_q[i] = (float)lq[order[i]];
        if (sigma_k) sigma_k[i] = (float)lk[i];
    }
    free(vq);
    free(vk);
}

/* ---- construction ---- */

ig_status ig_skew_alloc(const ig_model_config *c, const char *name, ig_skew **out, ig_error *err) {
    *out = NULL;
    ig_skew *s = ig_calloc(1, sizeof *s, err);
    if (!s) return IG_ERR_NOMEM;
    s->arch = (int)c->arch;
    s->n_layer = c->n_layer;
    s->d_model = c->d_model;
    s->n_head = c->n_head;
    s->n_kv_head = c->n_kv_head;
    s->head_dim = c->head_dim;
    s->shape_hash = ig_skew_shape_hash(c);
    snprintf(s->model_name, sizeof s->model_name, "%s", name ? name : "");
    size_t lg = (size_t)c->n_layer * (size_t)c->n_kv_head, hd = (size_t)c->head_dim;
    s->A = ig_calloc(lg * hd * hd, sizeof(float), err);
    s->sigma_q = ig_calloc(lg * hd, sizeof(float), err);
    s->sigma_k = ig_calloc(lg * hd, sizeof(float), err);
    if (!s->A || !s->sigma_q || !s->sigma_k) {
        ig_skew_free(s);
        return IG_ERR_NOMEM;
    }
    *out = s;
    return IG_OK;
}

ig_status ig_skew_identity(const ig_model_config *c, ig_skew **out, ig_error *err) {
    IG_TRY(ig_skew_alloc(c, "identity", out, err));
    size_t lg = (size_t)c->n_layer * (size_t)c->n_kv_head, hd = (size_t)c->head_dim;
    for (size_t i = 0; i < lg; i++)
        for (size_t r = 0; r < hd; r++) (*out)->A[(i * hd + r) * hd + r] = 1;
    return IG_OK;
}

void ig_skew_free(ig_skew *s) {
    if (!s) return;
    free(s->A);
    free(s->sigma_q);
    free(s->sigma_k);
    free(s);
}

/* ---- the file: little-endian header, then f32 arrays ---- */

#define HEADER_BYTES (8 + 10 * 4 + 8 + 64)

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static size_t payload_floats(const ig_skew *s) {
    size_t lg = (size_t)s->n_layer * (size_t)s->n_kv_head, hd = (size_t)s->head_dim;
    return lg * hd * hd + 2 * lg * hd;
}

/* Header: magic, then u32 version, arch, n_layer, d_model, n_head, n_kv_head, head_dim,
 * calib_tokens, 2 reserved (0); u64 shape hash; the model's name (64 bytes, NUL-padded). */
static void write_header(const ig_skew *s, unsigned char *h) {
    memset(h, 0, HEADER_BYTES);
    memcpy(h, IG_SKEW_MAGIC, 8);
    uint32_t f[10] = {IG_SKEW_VERSION,
                      (uint32_t)s->arch,
                      (uint32_t)s->n_layer,
                      (uint32_t)s->d_model,
                      (uint32_t)s->n_head,
                      (uint32_t)s->n_kv_head,
                      (uint32_t)s->head_dim,
                      (uint32_t)s->calib_tokens,
                      0,
                      0};
    for (int i = 0; i < 10; i++) put_u32(h + 8 + 4 * i, f[i]);
    put_u32(h + 48, (uint32_t)s->shape_hash);
    put_u32(h + 52, (uint32_t)(s->shape_hash >> 32));
    memcpy(h + 56, s->model_name, strnlen(s->model_name, 63));
}

static ig_status write_all(FILE *f, const void *p, size_t n, const char *path, ig_error *err) {
    if (fwrite(p, 1, n, f) != n)
        return ig_error_set(err, IG_ERR_IO, "cannot write %s: write failed", path);
    return IG_OK;
}

ig_status ig_skew_save(const ig_skew *s, const char *path, ig_error *err) {
    FILE *f = fopen(path, "wb");
    if (!f) return ig_error_set(err, IG_ERR_IO, "cannot create %s", path);
    unsigned char h[HEADER_BYTES];
    write_header(s, h);
    size_t lg = (size_t)s->n_layer * (size_t)s->n_kv_head, hd = (size_t)s->head_dim;
    ig_status rc = write_all(f, h, sizeof h, path, err);
    /* f32 arrays in the machine's byte order, checked to be little-endian */
    const uint32_t probe = 1;
    if (rc == IG_OK && *(const unsigned char *)&probe != 1)
        rc = ig_error_set(err, IG_ERR_UNSUPPORTED, "skew files are written on little-endian hosts");
    if (rc == IG_OK) rc = write_all(f, s->A, lg * hd * hd * sizeof(float), path, err);
    if (rc == IG_OK) rc = write_all(f, s->sigma_q, lg * hd * sizeof(float), path, err);
    if (rc == IG_OK) rc = write_all(f, s->sigma_k, lg * hd * sizeof(float), path, err);
    if (fclose(f) != 0 && rc == IG_OK)
        rc = ig_error_set(err, IG_ERR_IO, "cannot write %s: close failed", path);
    if (rc != IG_OK) remove(path);
    return rc;
}

ig_status ig_skew_load(const char *path, ig_skew **out, ig_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ig_error_set(err, IG_ERR_IO, "cannot open skew file %s", path);
    unsigned char h[HEADER_BYTES];
    ig_status rc = IG_OK;
    ig_skew *s = NULL;
    if (fread(h, 1, sizeof h, f) != sizeof h || memcmp(h, IG_SKEW_MAGIC, 8) != 0) {
        rc = ig_error_set(err, IG_ERR_FORMAT,
                          "%s is not an igen skew file (make one with 'igen calibrate')", path);
        goto done;
    }
    uint32_t f32[10];
    for (int i = 0; i < 10; i++) f32[i] = get_u32(h + 8 + 4 * i);
    if (f32[0] != IG_SKEW_VERSION) {
        rc = ig_error_set(err, IG_ERR_FORMAT, "%s: skew file version %u (this build reads %d)",
                          path, f32[0], IG_SKEW_VERSION);
        goto done;
    }
    for (int i = 2; i <= 6; i++)
        if (f32[i] == 0 || f32[i] > (1u << 20) || (i == 6 && f32[i] > MAX_HD)) {
            rc = ig_error_set(err, IG_ERR_FORMAT, "%s: implausible shape in the header", path);
            goto done;
        }
    s = ig_calloc(1, sizeof *s, err);
    if (!s) {
        rc = IG_ERR_NOMEM;
        goto done;
    }
    s->arch = (int)f32[1];
    s->n_layer = (int)f32[2];
    s->d_model = (int)f32[3];
    s->n_head = (int)f32[4];
    s->n_kv_head = (int)f32[5];
    s->head_dim = (int)f32[6];
    s->calib_tokens = (int)f32[7];
    s->shape_hash = (uint64_t)get_u32(h + 48) | (uint64_t)get_u32(h + 52) << 32;
    memcpy(s->model_name, h + 56, 63);
    s->model_name[63] = '\0';
    size_t lg = (size_t)s->n_layer * (size_t)s->n_kv_head, hd = (size_t)s->head_dim;
    size_t nf = payload_floats(s);
    if (fseek(f, 0, SEEK_END) != 0 || (size_t)ftell(f) != HEADER_BYTES + nf * sizeof(float)) {
        rc = ig_error_set(err, IG_ERR_FORMAT,
                          "%s: %ld bytes, expected %zu for %d layers x %d KV heads x %d dims "
                          "(truncated or corrupt)",
                          path, ftell(f), HEADER_BYTES + nf * sizeof(float), s->n_layer,
                          s->n_kv_head, s->head_dim);
        goto done;
    }
    fseek(f, HEADER_BYTES, SEEK_SET);
    s->A = ig_malloc(lg * hd * hd * sizeof(float), err);
    s->sigma_q = ig_malloc(lg * hd * sizeof(float), err);
    s->sigma_k = ig_malloc(lg * hd * sizeof(float), err);
    if (!s->A || !s->sigma_q || !s->sigma_k) {
        rc = IG_ERR_NOMEM;
        goto done;
    }
    if (fread(s->A, sizeof(float), lg * hd * hd, f) != lg * hd * hd ||
        fread(s->sigma_q, sizeof(float), lg * hd, f) != lg * hd ||
        fread(s->sigma_k, sizeof(float), lg * hd, f) != lg * hd) {
        rc = ig_error_set(err, IG_ERR_IO, "%s: read failed", path);
        goto done;
    }
    for (size_t i = 0; i < lg * hd * hd; i++)
        if (!isfinite(s->A[i])) {
            rc = ig_error_set(err, IG_ERR_FORMAT, "%s: non-finite rotation entry", path);
            goto done;
        }
    *out = s;
    s = NULL;
done:
    fclose(f);
    ig_skew_free(s);
    return rc;
}

ig_status ig_skew_check(const ig_skew *s, const ig_model_config *c, const char *path,
                        ig_error *err) {
    char diff[512] = "";
    size_t used = 0;
#define IG_SKEW_FIELD(name, file_v, model_v)                                                       \
    if ((file_v) != (model_v) && used < sizeof diff)                                               \
        used += (size_t)snprintf(diff + used, sizeof diff - used, "%s%s %d (this model: %d)",      \
                                 used ? ", " : "", name, (int)(file_v), (int)(model_v));
    if (s->arch != (int)c->arch && used < sizeof diff)
        used +=
            (size_t)snprintf(diff + used, sizeof diff - used, "architecture %s (this model: %s)",
                             ig_arch_name((ig_arch)s->arch), ig_arch_name(c->arch));
    IG_SKEW_FIELD("n_layer", s->n_layer, c->n_layer)
    IG_SKEW_FIELD("n_head", s->n_head, c->n_head)
    IG_SKEW_FIELD("n_kv_head", s->n_kv_head, c->n_kv_head)
    IG_SKEW_FIELD("head_dim", s->head_dim, c->head_dim)
    IG_SKEW_FIELD("d_model", s->d_model, c->d_model)
#undef IG_SKEW_FIELD
    if (!used && s->shape_hash != ig_skew_shape_hash(c))
        snprintf(diff, sizeof diff,
                 "same attention shapes but another FFN width or vocabulary (shape hash)");
    if (diff[0])
        return ig_error_set(err, IG_ERR_SHAPE,
                            "skew file %s was made for another model (%s): %s; run 'igen "
                            "calibrate' for this model",
                            path, s->model_name[0] ? s->model_name : "unnamed", diff);
    return IG_OK;
}
