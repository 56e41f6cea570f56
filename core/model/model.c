/* Model lifetime, format detection, accessors and the default-model lookup. The format loaders
 * (model_hf.c, model_gguf.c) fill the struct; nothing here knows tensor names. */
#include "core/model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <sys/stat.h>

#include "core/base/arena.h"
#include "core/base/log.h"
#include "core/base/mapfile.h"
#include "core/model/model_internal.h"

#define IG_DEFAULT_MODEL_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"

const char *ig_arch_name(ig_arch a) {
    switch (a) {
    case IG_ARCH_OPT:
        return "opt";
    case IG_ARCH_LLAMA:
        return "llama";
    }
    return "?";
}

void *ig_model_alloc(ig_model *m, size_t bytes, ig_error *err) {
    if (!m->arena && ig_arena_create(&m->arena, err) != IG_OK) return NULL;
    return ig_arena_alloc(m->arena, bytes, err);
}

static int has_suffix(const char *s, const char *suf);

int ig_weights_mem_from_name(const char *name) {
    if (!strcmp(name, "auto")) return IG_WMEM_AUTO;
    if (!strcmp(name, "map")) return IG_WMEM_MAP;
    if (!strcmp(name, "copy")) return IG_WMEM_COPY;
    return -1;
}

/* Bytes this process may still take: MemAvailable, capped by the cgroup v2 limit less its current
 * use where one is set; 0 when unreadable. */
static size_t memory_available(void) {
    size_t avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) avail = (size_t)kb * 1024;
        fclose(f);
    }
    unsigned long long max = 0, cur = 0;
    f = fopen("/sys/fs/cgroup/memory.max", "r");
    int limited = f && fscanf(f, "%llu", &max) == 1; /* "max": no limit */
    if (f) fclose(f);
    f = fopen("/sys/fs/cgroup/memory.current", "r");
    if (limited && f && fscanf(f, "%llu", &cur) == 1 && cur <= max && (size_t)(max - cur) < avail)
        avail = (size_t)(max - cur);
    if (f) fclose(f);
    return avail;
}

/* The bytes of the files a load reads: a GGUF, or a directory's .safetensors files. */
static size_t model_file_bytes(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    if (!S_ISDIR(st.st_mode)) {
        /* a config.json or one shard named: the directory holds the model */
        if (has_suffix(path, ".gguf")) return (size_t)st.st_size;
        char *dir = strdup(path);
        if (!dir) return 0;
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            strcpy(dir, ".");
        size_t b = has_suffix(path, ".json") || has_suffix(path, ".safetensors")
                       ? model_file_bytes(dir)
                       : (size_t)st.st_size;
        free(dir);
        return b;
    }
    size_t total = 0;
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!has_suffix(e->d_name, ".safetensors")) continue;
        char p[4096];
        if (snprintf(p, sizeof p, "%s/%s", path, e->d_name) >= (int)sizeof p) continue;
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) total += (size_t)st.st_size;
    }
    closedir(d);
    return total;
}

ig_status ig_model_config_validate(const ig_model_config *c, const char *src, ig_error *err) {
    struct {
        const char *name;
        int v;
    } pos[] = {{"n_layer", c->n_layer},     {"d_model", c->d_model},   {"n_head", c->n_head},
               {"n_kv_head", c->n_kv_head}, {"head_dim", c->head_dim}, {"d_ffn", c->d_ffn},
               {"vocab", c->vocab},         {"max_pos", c->max_pos}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v <= 0 || pos[i].v > (1 << 24))
            return ig_error_set(err, IG_ERR_FORMAT, "%s: %s = %d is out of range (expected 1..%d)",
                                src, pos[i].name, pos[i].v, 1 << 24);
    if (c->n_head % c->n_kv_head != 0)
        return ig_error_set(err, IG_ERR_FORMAT,
                            "%s: %d attention heads are not a multiple of %d KV heads", src,
                            c->n_head, c->n_kv_head);
    if (c->arch == IG_ARCH_LLAMA && (c->rot_dim <= 0 || c->rot_dim > c->head_dim || c->rot_dim % 2))
        return ig_error_set(err, IG_ERR_FORMAT,
                            "%s: rotary dimension %d is invalid for head_dim %d (expected an even "
                            "number <= head_dim)",
                            src, c->rot_dim, c->head_dim);
    if (c->arch == IG_ARCH_LLAMA && !(c->rope_theta > 0))
        return ig_error_set(err, IG_ERR_FORMAT, "%s: rope theta %g must be positive", src,
                            (double)c->rope_theta);
    if (!(c->norm_eps > 0) || c->norm_eps > 1)
        return ig_error_set(err, IG_ERR_FORMAT, "%s: norm epsilon %g out of range (0, 1]", src,
                            (double)c->norm_eps);
    return IG_OK;
}

static int has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

static int file_has_gguf_magic(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char magic[4] = {0};
    size_t got = fread(magic, 1, 4, f);
    fclose(f);
    return got == 4 && !memcmp(magic, "GGUF", 4);
}

ig_status ig_model_load(const char *path, const ig_model_load_opts *opts, ig_model **out,
                        ig_error *err) {
    *out = NULL;
    ig_model_load_opts o = {IG_DTYPE_F32, 0, 0, IG_WMEM_AUTO};
    if (opts) o = *opts;
    if (!ig_dtype_is_weight_storage(o.dtype))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "storage dtype %s is not supported (expected f32, f16, bf16, q4g64, "
                            "q8g64, q4_0, q4_1 or q8_0)",
                            ig_dtype_name(o.dtype));
    if (o.keep_stored && !ig_dtype_is_float_storage(o.dtype))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "keeping the stored types needs a float fallback dtype, not %s",
                            ig_dtype_name(o.dtype));
    if (!ig_path_exists(path))
        return ig_error_set(err, IG_ERR_NOT_FOUND, "%s: no such file or directory", path);

    ig_model *m = ig_calloc(1, sizeof *m, err);
    if (!m) return IG_ERR_NOMEM;
    m->dtype = o.dtype;
    m->keep_stored = o.keep_stored;
    size_t file = model_file_bytes(path), avail = memory_available();
    if (o.weights_mem == IG_WMEM_AUTO) {
        m->copy_mapped = file > 0 && file <= avail / 2;
    } else {
        m->copy_mapped = o.weights_mem == IG_WMEM_COPY;
        if (m->copy_mapped && avail > 0 && file > avail) {
            ig_model_free(m);
            return ig_error_set(
                err, IG_ERR_CAPACITY,
                "%s: copying the weights (--weights-mem copy) needs up to %.1f GiB, "
                "%.1f GiB of memory is available (use --weights-mem map or auto)",
                path, (double)file / 1073741824.0, (double)avail / 1073741824.0);
        }
    }
    m->path = strdup(path);
    m->cfg.bos = m->cfg.eos = -1;

    ig_status rc;
    double t0 = ig_time_s();
    if (ig_path_is_dir(path)) {
        m->format = IG_FORMAT_HF;
        rc = ig_model_load_hf(m, path, err);
    } else if (has_suffix(path, ".gguf") || file_has_gguf_magic(path)) {
        m->format = IG_FORMAT_GGUF;
        rc = ig_model_load_gguf(m, path, err);
    } else if (has_suffix(path, "config.json") || has_suffix(path, ".safetensors") ||
               has_suffix(path, ".safetensors.index.json")) {
        char *dir = strdup(path);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            strcpy(dir, ".");
        m->format = IG_FORMAT_HF;
        rc = ig_model_load_hf(m, dir, err);
        free(dir);
    } else {
        rc = ig_error_set(err, IG_ERR_FORMAT,
                          "%s: not a model (expected a .gguf file or a Hugging Face directory "
                          "with config.json)",
                          path);
    }
    if (rc != IG_OK) {
        ig_model_free(m);
        return rc;
    }
    const char *base = strrchr(path, '/');
    base = base && base[1] ? base + 1 : path;
    snprintf(m->name, sizeof m->name, "%s", base);
    if (!o.quiet && ig_log_get_level() >= IG_LOG_INFO) { /* the description reads smaps */
        char desc[160], mem[160];
        IG_INFO("loaded %s (%s, %d layers, d_model %d, %d/%d heads, vocab %d, %s; %s) in %.2f s",
                path, ig_arch_name(m->cfg.arch), m->cfg.n_layer, m->cfg.d_model, m->cfg.n_head,
                m->cfg.n_kv_head, m->cfg.vocab, ig_model_dtype_desc(m, desc, sizeof desc),
                ig_model_weights_mem_desc(m, mem, sizeof mem), ig_time_s() - t0);
    }
    *out = m;
    return IG_OK;
}

void ig_model_free(ig_model *m) {
    if (!m) return;
    ig_arena_free(m->arena);
    free(m->layers);
    ig_tokenizer_free(m->tok);
    if (m->st) ig_safetensors_close(m->st);
    if (m->gguf) ig_gguf_close(m->gguf);
    free(m->path);
    free(m);
}

const ig_model_config *ig_model_get_config(const ig_model *m) {
    return &m->cfg;
}
const ig_layer *ig_model_layer(const ig_model *m, int i) {
    return &m->layers[i];
}
ig_weight ig_model_tok_embd(const ig_model *m) {
    return m->tok_embd;
}
ig_weight ig_model_pos_embd(const ig_model *m) {
    return m->pos_embd;
}
ig_weight ig_model_lm_head(const ig_model *m) {
    return m->lm_head;
}
const float *ig_model_final_norm_w(const ig_model *m) {
    return m->final_norm_w;
}
const float *ig_model_final_norm_b(const ig_model *m) {
    return m->final_norm_b;
}
const ig_tokenizer *ig_model_tokenizer(const ig_model *m) {
    return m->tok;
}
ig_model_format ig_model_get_format(const ig_model *m) {
    return m->format;
}
const char *ig_model_path(const ig_model *m) {
    return m->path;
}
const char *ig_model_name(const ig_model *m) {
    return m->name;
}
ig_dtype ig_model_dtype(const ig_model *m) {
    if (m->cfg.n_layer > 0 && m->layers && m->layers[0].wq.data) return m->layers[0].wq.dtype;
    return m->dtype;
}

int ig_model_keeps_stored(const ig_model *m) {
    return m->keep_stored;
}

int ig_model_copies_mapped(const ig_model *m) {
    return m->copy_mapped;
}

size_t ig_model_mapped_bytes(const ig_model *m) {
    return m->mapped_bytes;
}

size_t ig_model_arena_bytes(const ig_model *m) {
    return ig_arena_used(m->arena);
}

size_t ig_model_huge_bytes(const ig_model *m) {
    return ig_arena_huge_bytes(m->arena);
}

const char *ig_model_weights_mem_desc(const ig_model *m, char *buf, size_t n) {
    const double mib = 1024.0 * 1024.0;
    double own = (double)ig_model_arena_bytes(m) / mib, huge = (double)ig_model_huge_bytes(m) / mib;
    if (m->mapped_bytes > 0)
        snprintf(buf, n,
                 "mapped %.1f MiB, in memory %.1f MiB (its mappings: %.1f MiB on huge pages)",
                 (double)m->mapped_bytes / mib, own, huge);
    else
        snprintf(buf, n, "in memory %.1f MiB (its mappings: %.1f MiB on huge pages)", own, huge);
    return buf;
}

static void count_type(const ig_weight *w, int counts[IG_DTYPE_COUNT]) {
    if (w->data && (int)w->dtype >= 0 && w->dtype < IG_DTYPE_COUNT) counts[w->dtype]++;
}

const char *ig_model_dtype_desc(const ig_model *m, char *buf, size_t n) {
    if (!n) return buf;
    if (!m->keep_stored) {
        snprintf(buf, n, "%s", ig_dtype_name(m->dtype));
        return buf;
    }
    int counts[IG_DTYPE_COUNT] = {0};
    count_type(&m->tok_embd, counts);
    count_type(&m->pos_embd, counts);
    if (!m->cfg.tied_embeddings) count_type(&m->lm_head, counts);
    for (int i = 0; i < m->cfg.n_layer; i++) {
        const ig_layer *l = &m->layers[i];
        const ig_weight *ws[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
        for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++) count_type(ws[k], counts);
    }
    size_t used = (size_t)snprintf(buf, n, "stored:");
    for (int t = 0; t < IG_DTYPE_COUNT && used < n; t++)
        if (counts[t])
            used += (size_t)snprintf(buf + used, n - used, " %s x %d", ig_dtype_name((ig_dtype)t),
                                     counts[t]);
    return buf;
}

ig_status ig_model_block_error(const char *file, const char *name, ig_dtype t, int64_t cols,
                               ig_error *err) {
    return ig_error_set(err, IG_ERR_SHAPE,
                        "%s: tensor '%s': rows of %lld values cannot be stored as %s (blocks of "
                        "%lld values along a row)",
                        file, name, (long long)cols, ig_dtype_name(t),
                        (long long)ig_dtype_block_elems(t));
}

ig_status ig_model_matrix_from_f32(ig_model *m, const char *file, const char *name,
                                   const float *src, int64_t rows, int64_t cols, ig_weight *w,
                                   ig_error *err) {
    ig_dtype t = m->dtype;
    if (!ig_dtype_row_ok(t, cols)) return ig_model_block_error(file, name, t, cols, err);
    size_t rb = ig_dtype_row_bytes(t, cols);
    void *buf = ig_model_alloc(m, rb * (size_t)rows, err);
    if (!buf) return IG_ERR_NOMEM;
    if (ig_dtype_is_quant(t))
        ig_quantize_rows(t, src, rows, cols, buf);
    else
        ig_convert(t, buf, IG_DTYPE_F32, src, (size_t)rows * (size_t)cols);
    *w = (ig_weight){buf, t, rows, cols};
    return IG_OK;
}

static size_t wbytes(ig_weight w) {
    return w.data ? (size_t)w.rows * ig_dtype_row_bytes(w.dtype, w.cols) : 0;
}

static size_t layer_matrix_bytes(const ig_layer *l) {
    return wbytes(l->wq) + wbytes(l->wk) + wbytes(l->wv) + wbytes(l->wo) + wbytes(l->w_gate) +
           wbytes(l->w_up) + wbytes(l->w_down);
}

static size_t layer_vector_bytes(const ig_model_config *c) {
    size_t d = (size_t)c->d_model, kv = (size_t)c->n_kv_head * (size_t)c->head_dim;
    size_t qd = (size_t)c->n_head * (size_t)c->head_dim, f = (size_t)c->d_ffn;
    size_t n = 2 * d; /* two norm weights */
    if (c->arch == IG_ARCH_OPT) n += 2 * d;
    if (c->attn_bias) n += qd + 2 * kv + d;
    if (c->mlp_bias) n += f + d;
    return n * sizeof(float);
}

size_t ig_model_weight_bytes(const ig_model *m) {
    size_t n = wbytes(m->tok_embd) + wbytes(m->pos_embd);
    if (!m->cfg.tied_embeddings) n += wbytes(m->lm_head);
    for (int i = 0; i < m->cfg.n_layer; i++)
        n += layer_matrix_bytes(&m->layers[i]) + layer_vector_bytes(&m->cfg);
    return n;
}

size_t ig_model_decode_bytes_per_token(const ig_model *m) {
    size_t row = ig_dtype_row_bytes(m->tok_embd.dtype, m->cfg.d_model);
    size_t n = row + wbytes(m->lm_head); /* one embedding row + the whole lm_head */
    if (m->pos_embd.data) n += row;
    for (int i = 0; i < m->cfg.n_layer; i++)
        n += layer_matrix_bytes(&m->layers[i]) + layer_vector_bytes(&m->cfg);
    return n;
}

const char *ig_model_default_path(ig_error *err) {
    static char buf[4096];
    const char *env = getenv("IGEN_MODEL");
    if (env && *env) {
        if (ig_path_exists(env)) return env;
        ig_error_set(err, IG_ERR_NOT_FOUND, "IGEN_MODEL=%s: no such file or directory", env);
        return NULL;
    }
    const char *home = getenv("IGEN_HOME");
    if (home && *home) {
        snprintf(buf, sizeof buf, "%s/models/%s", home, IG_DEFAULT_MODEL_FILE);
        if (ig_path_exists(buf)) return buf;
    }
    snprintf(buf, sizeof buf, "%s/models/%s", IG_SOURCE_DIR, IG_DEFAULT_MODEL_FILE);
    if (ig_path_exists(buf)) return buf;
    ig_error_set(err, IG_ERR_NOT_FOUND,
                 "no default model: %s not found (run tools/setup.sh, or pass --model PATH, or set "
                 "IGEN_MODEL)",
                 buf);
    return NULL;
}
