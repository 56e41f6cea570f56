/* A loaded model: its configuration (from config.json or GGUF metadata), its weights in the
 * engine's storage dtype, and its tokenizer. Loading validates every tensor's shape against the
 * config. Weights whose file dtype equals the storage dtype point into the memory-mapped file (no
 * copy). */
#ifndef IG_MODEL_H
#define IG_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"
#include "core/model/model_config.h"
#include "core/base/status.h"
#include "core/model/tokenizer/tokenizer.h"

/* A 2-D weight matrix [rows = out features][cols = in features], row-major, in `dtype`. */
typedef struct ig_weight {
    const void *data;
    ig_dtype dtype;
    int64_t rows, cols;
} ig_weight;

/* One transformer block. Vectors (norms, biases) are always f32; NULL where the arch has none. */
typedef struct ig_layer {
    const float *attn_norm_w, *attn_norm_b;
    ig_weight wq, wk, wv, wo;
    const float *bq, *bk, *bv, *bo;
    const float *ffn_norm_w, *ffn_norm_b;
    ig_weight w_gate; /* Llama only */
    ig_weight w_up;   /* OPT fc1 */
    ig_weight w_down; /* OPT fc2 */
    const float *b_up, *b_down;
} ig_layer;

/* Where the matrices the file stores in a type igen computes with live (see keep_stored). */
typedef enum ig_weights_mem {
    /* copy when the model's files take at most half of the memory available to this process
     * (MemAvailable, and the cgroup's limit where one is set), else map */
    IG_WMEM_AUTO = 0,
    IG_WMEM_MAP = 1,  /* read in place from the file mapping (page cache, 4 KiB pages) */
    IG_WMEM_COPY = 2, /* copied at load into the model's huge-page arena (core/base/arena.h) */
} ig_weights_mem;

typedef struct ig_model_load_opts {
    /* storage dtype of matrices: f32 (default), f16, bf16, or a quantized weight format (q4g64,
     * q8g64: FlexGen's group-wise formats; q4_0, q4_1, q8_0: ggml's), made at load from whatever
     * the file holds. Vectors (norms, biases) stay f32. */
    ig_dtype dtype;
    int quiet; /* no progress on stderr */
    /* 1: every matrix stays in the type the file stores it in where igen computes with that type
     * (f32, f16, bf16; GGUF's Q4_0, Q4_1, Q8_0), read in place from the mapping where possible;
     * other types (K-quants, Q5_x, ...) are converted to `dtype`. */
    int keep_stored;
    /* The matrices that need no conversion: mapped or copied (the converted ones are always in
     * the model's arena). Copied weights are read from huge pages where the kernel grants them,
     * which a decode step that streams every weight once feels
     * (docs/results/compressed_weights.md); mapped ones cost no load time or memory beyond the page
     * cache, for a model larger than memory whose weights a placement leaves on disk. */
    ig_weights_mem weights_mem;
} ig_model_load_opts;

/* "auto", "map", "copy"; -1 for another name. */
int ig_weights_mem_from_name(const char *name);

/* path: a GGUF file, or a Hugging Face directory (or its config.json / a .safetensors in it). */
ig_status ig_model_load(const char *path, const ig_model_load_opts *opts, ig_model **out,
                        ig_error *err);
void ig_model_free(ig_model *m);
/* A model of configuration c with seeded pseudo-random weights (FlexGen's dummy weights) stored in
 * dtype, named "dummy:NAME"; it has no tokenizer (ig_model_tokenizer returns NULL). */
ig_status ig_model_create_dummy(const ig_model_config *c, ig_dtype dtype, uint64_t seed,
                                const char *name, ig_model **out, ig_error *err);

const ig_model_config *ig_model_get_config(const ig_model *m);
const ig_layer *ig_model_layer(const ig_model *m, int i);
ig_weight ig_model_tok_embd(const ig_model *m); /* [vocab][d_model] */
ig_weight ig_model_pos_embd(const ig_model *m); /* OPT: [max_pos + offset][d_model]; else empty */
ig_weight ig_model_lm_head(const ig_model *m);  /* [vocab][d_model]; the embedding if tied */
const float *ig_model_final_norm_w(const ig_model *m);
const float *ig_model_final_norm_b(const ig_model *m);
const ig_tokenizer *ig_model_tokenizer(const ig_model *m);
ig_model_format ig_model_get_format(const ig_model *m);
const char *ig_model_path(const ig_model *m);
const char *ig_model_name(const ig_model *m); /* a short display name */
/* The storage type of the layer matrices (layer 0's W_q; with keep_stored the file's type). */
ig_dtype ig_model_dtype(const ig_model *m);
/* How the model's matrices are held, in words, e.g. "in memory 92.0 MiB (its mappings: 94.0 MiB
 * on huge pages)" or "mapped 84.1 MiB, in memory 7.9 MiB (its mappings: 8.0 MiB on huge pages)"
 * (whole huge pages, so up to 2 MiB a mapping above what is used); reads /proc/self/smaps: not
 * for a hot path. Written into buf, returned. */
const char *ig_model_weights_mem_desc(const ig_model *m, char *buf, size_t n);
/* Bytes of the model's matrices read in place from a file mapping; of its matrices and vectors in
 * its arena; of the arena's mappings on huge pages now. */
size_t ig_model_mapped_bytes(const ig_model *m);
size_t ig_model_arena_bytes(const ig_model *m);
size_t ig_model_huge_bytes(const ig_model *m);
/* 1 if the load copied the matrices it could have mapped (IG_WMEM_COPY, or AUTO that chose it). */
int ig_model_copies_mapped(const ig_model *m);
/* 1 if the model was loaded with keep_stored. */
int ig_model_keeps_stored(const ig_model *m);
/* The matrices' storage types in words: "f32", or with keep_stored e.g. "stored: q4_1 x 210, q8_0
 * x 1" (types counted over every matrix). Written into buf (n bytes); returns buf. */
const char *ig_model_dtype_desc(const ig_model *m, char *buf, size_t n);
/* Bytes of all matrices + vectors as stored, and the bytes one decode token reads (every matrix
 * once, one embedding row, the lm_head). */
size_t ig_model_weight_bytes(const ig_model *m);
size_t ig_model_decode_bytes_per_token(const ig_model *m);

/* The default model: $IGEN_MODEL, else $IGEN_HOME/models/<default>, else <source
 * dir>/models/<default> as installed by tools/setup.sh. Returns NULL (and sets err naming the
 * places looked at) if none. */
const char *ig_model_default_path(ig_error *err);

#endif
