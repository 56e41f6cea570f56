/* Internal to core/model: the model struct and the helpers the format loaders share. */
#ifndef IG_MODEL_INTERNAL_H
#define IG_MODEL_INTERNAL_H

#include "core/model/io/gguf.h"
#include "core/model/io/safetensors.h"
#include "core/model/model.h"

struct ig_model {
    ig_model_config cfg;
    ig_model_format format;
    ig_dtype dtype; /* the storage type asked for (the fallback type with keep_stored) */
    int keep_stored;
    char *path;
    char name[128];
    ig_layer *layers;
    ig_weight tok_embd, pos_embd, lm_head;
    const float *final_norm_w, *final_norm_b;
    ig_tokenizer *tok;
    ig_safetensors *st;
    ig_gguf *gguf;
    struct ig_arena *arena; /* buffers converted or copied at load time (created on first use) */
    int copy_mapped;        /* copy the matrices the loaders could use in place */
    size_t mapped_bytes;    /* bytes of matrices used in place from a file mapping */
};

/* Allocates a buffer owned (and freed) by the model. */
void *ig_model_alloc(ig_model *m, size_t bytes, ig_error *err);
/* Checks the config for values the engine cannot run (zero sizes, heads not dividing, ...). */
ig_status ig_model_config_validate(const ig_model_config *c, const char *src, ig_error *err);

/* Stores a [rows][cols] f32 matrix in the model's storage type (m->dtype: a float conversion or a
 * quantization) into a buffer the model owns. file and name name the tensor in errors (a quantized
 * type needs cols to be a multiple of its block). */
ig_status ig_model_matrix_from_f32(ig_model *m, const char *file, const char *name,
                                   const float *src, int64_t rows, int64_t cols, ig_weight *w,
                                   ig_error *err);
/* The error for a matrix whose row length is not a multiple of the block of quantized type t. */
ig_status ig_model_block_error(const char *file, const char *name, ig_dtype t, int64_t cols,
                               ig_error *err);

ig_status ig_model_load_hf(ig_model *m, const char *dir, ig_error *err);
ig_status ig_model_load_gguf(ig_model *m, const char *file, ig_error *err);

#endif
