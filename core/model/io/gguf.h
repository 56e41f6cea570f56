/* GGUF v2/v3 reader: metadata key/values, tensor directory, and dequantization into engine dtypes.
 * The file is memory-mapped; every offset and length is checked against the file size before use,
 * so a truncated or corrupt file gives an error naming the file and the key or tensor, never a
 * crash. */
#ifndef IG_GGUF_H
#define IG_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"
#include "core/base/status.h"

/* GGUF metadata value types (as in the GGUF specification). */
typedef enum ig_gguf_vtype {
    IG_GGUF_U8 = 0,
    IG_GGUF_I8 = 1,
    IG_GGUF_U16 = 2,
    IG_GGUF_I16 = 3,
    IG_GGUF_U32 = 4,
    IG_GGUF_I32 = 5,
    IG_GGUF_F32 = 6,
    IG_GGUF_BOOL = 7,
    IG_GGUF_STRING = 8,
    IG_GGUF_ARRAY = 9,
    IG_GGUF_U64 = 10,
    IG_GGUF_I64 = 11,
    IG_GGUF_F64 = 12,
} ig_gguf_vtype;

/* ggml tensor types (numbering of ggml.h). */
typedef enum ig_ggml_type {
    IG_GGML_F32 = 0,
    IG_GGML_F16 = 1,
    IG_GGML_Q4_0 = 2,
    IG_GGML_Q4_1 = 3,
    IG_GGML_Q5_0 = 6,
    IG_GGML_Q5_1 = 7,
    IG_GGML_Q8_0 = 8,
    IG_GGML_Q8_1 = 9,
    IG_GGML_Q2_K = 10,
    IG_GGML_Q3_K = 11,
    IG_GGML_Q4_K = 12,
    IG_GGML_Q5_K = 13,
    IG_GGML_Q6_K = 14,
    IG_GGML_Q8_K = 15,
    IG_GGML_BF16 = 30,
} ig_ggml_type;

typedef struct ig_gguf ig_gguf;

typedef struct ig_gguf_tensor {
    const char *name;
    ig_ggml_type type;
    int n_dims;
    int64_t ne[4];      /* ggml order: ne[0] is the contiguous (innermost) dimension */
    int64_t n_elements; /* product of ne */
    uint64_t offset;    /* from the start of the data section */
    size_t n_bytes;
    const void *data; /* into the mapping; valid until ig_gguf_close */
} ig_gguf_tensor;

ig_status ig_gguf_open(const char *path, ig_gguf **out, ig_error *err);
void ig_gguf_close(ig_gguf *g);
const char *ig_gguf_path(const ig_gguf *g);
uint32_t ig_gguf_version(const ig_gguf *g);

/* Metadata. Every getter fails with IG_ERR_NOT_FOUND (key absent) or IG_ERR_FORMAT (wrong type),
 * with a message naming the file, the key, the expected and the found type. Integer getters accept
 * any integer type whose value fits. */
int64_t ig_gguf_find_key(const ig_gguf *g, const char *key); /* index or -1 */
size_t ig_gguf_n_kv(const ig_gguf *g);
const char *ig_gguf_key_name(const ig_gguf *g, int64_t idx);
ig_gguf_vtype ig_gguf_key_type(const ig_gguf *g, int64_t idx);
ig_status ig_gguf_get_u32(const ig_gguf *g, const char *key, uint32_t *out, ig_error *err);
ig_status ig_gguf_get_i64(const ig_gguf *g, const char *key, int64_t *out, ig_error *err);
ig_status ig_gguf_get_f32(const ig_gguf *g, const char *key, float *out, ig_error *err);
ig_status ig_gguf_get_bool(const ig_gguf *g, const char *key, int *out, ig_error *err);
/* Strings are not NUL-terminated in the file: *out points into the mapping, *len is its length. */
ig_status ig_gguf_get_str(const ig_gguf *g, const char *key, const char **out, size_t *len,
                          ig_error *err);
/* Arrays: element type and count; string arrays are read by index, numeric ones as raw data. */
ig_status ig_gguf_get_arr_info(const ig_gguf *g, const char *key, ig_gguf_vtype *elem_type,
                               uint64_t *n, ig_error *err);
ig_status ig_gguf_get_arr_str(const ig_gguf *g, const char *key, uint64_t i, const char **out,
                              size_t *len, ig_error *err);
/* Pointer to the packed elements of a numeric array (unaligned: read with memcpy). */
ig_status ig_gguf_get_arr_data(const ig_gguf *g, const char *key, const void **out, ig_error *err);

/* Tensors. */
size_t ig_gguf_n_tensors(const ig_gguf *g);
const ig_gguf_tensor *ig_gguf_tensor_at(const ig_gguf *g, size_t i);
const ig_gguf_tensor *ig_gguf_find_tensor(const ig_gguf *g, const char *name); /* NULL if absent */
const char *ig_ggml_type_name(ig_ggml_type t);
/* Dequantizes (or converts) a whole tensor into dst (n_elements values of dst_type: f32/f16/bf16).
 */
ig_status ig_gguf_tensor_read(const ig_gguf *g, const ig_gguf_tensor *t, ig_dtype dst_type,
                              void *dst, ig_error *err);

#endif
