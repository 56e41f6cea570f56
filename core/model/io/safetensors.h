/* Hugging Face safetensors reader: a single file, or a sharded checkpoint through
 * model.safetensors.index.json. Files are memory-mapped and tensors are used in place. Header
 * lengths, offsets and shapes are validated against the file size and the dtype. */
#ifndef IG_SAFETENSORS_H
#define IG_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"
#include "core/base/status.h"

#define IG_ST_MAX_DIMS 8

typedef struct ig_safetensors ig_safetensors;

typedef struct ig_st_tensor {
    const char *name;
    ig_dtype dtype; /* F32, F16, BF16, I32, I64, U8, I8, F64 */
    int ndim;
    int64_t shape[IG_ST_MAX_DIMS]; /* row-major, shape[ndim-1] innermost */
    int64_t n_elements;
    size_t n_bytes;
    const void *data; /* into the mapping; valid until ig_safetensors_close */
    const char *file; /* the shard it lives in */
} ig_st_tensor;

/* path: a .safetensors file, a model.safetensors.index.json, or a directory holding either
 * (model.safetensors preferred, else model.safetensors.index.json). */
ig_status ig_safetensors_open(const char *path, ig_safetensors **out, ig_error *err);
void ig_safetensors_close(ig_safetensors *st);
size_t ig_safetensors_n_tensors(const ig_safetensors *st);
const ig_st_tensor *ig_safetensors_tensor_at(const ig_safetensors *st, size_t i);
const ig_st_tensor *ig_safetensors_find(const ig_safetensors *st, const char *name);
/* A value of the "__metadata__" string map of the (first, in name order) file, or NULL. */
const char *ig_safetensors_metadata(const ig_safetensors *st, const char *key);

#endif
