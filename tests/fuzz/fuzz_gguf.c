/* Fuzz harness: the GGUF reader (core/model/io/gguf). The input is a GGUF file; once it opens,
 * every key is read with the getters its type allows, every tensor's bytes are touched and small
 * tensors are dequantized to f32 and f16. The reader promises errors, never crashes, for any file.
 */
#include <stdlib.h>
#include <string.h>

#include "core/model/io/gguf.h"
#include "tests/fuzz/fuzz_common.h"

/* Largest tensor (elements) dequantized per input: enough for every fixture's small tensors. */
#define MAX_READ_ELEMS ((int64_t)1 << 12)

static size_t elem_size(ig_gguf_vtype t) {
    switch (t) {
    case IG_GGUF_U8:
    case IG_GGUF_I8:
    case IG_GGUF_BOOL:
        return 1;
    case IG_GGUF_U16:
    case IG_GGUF_I16:
        return 2;
    case IG_GGUF_U32:
    case IG_GGUF_I32:
    case IG_GGUF_F32:
        return 4;
    case IG_GGUF_U64:
    case IG_GGUF_I64:
    case IG_GGUF_F64:
        return 8;
    default:
        return 0;
    }
}

static volatile unsigned char g_sink;

static void touch(const void *p, size_t n) {
    const unsigned char *b = p;
    unsigned char x = 0;
    for (size_t i = 0; i < n; i++) x ^= b[i];
    g_sink ^= x;
}

static void use_key(const ig_gguf *g, int64_t i) {
    const char *key = ig_gguf_key_name(g, i);
    if (!key) ig_fuzz_fail("gguf", "ig_gguf_key_name: no name for an index below ig_gguf_n_kv");
    if (ig_gguf_find_key(g, key) < 0) ig_fuzz_fail("gguf", "a listed key is not found by name");
    ig_error err;
    ig_error_clear(&err);
    uint32_t u32;
    int64_t i64;
    float f32;
    int b;
    const char *s;
    size_t len;
    (void)ig_gguf_get_u32(g, key, &u32, &err);
    (void)ig_gguf_get_i64(g, key, &i64, &err);
    (void)ig_gguf_get_f32(g, key, &f32, &err);
    (void)ig_gguf_get_bool(g, key, &b, &err);
    if (ig_gguf_get_str(g, key, &s, &len, &err) == IG_OK) touch(s, len);
    ig_gguf_vtype et;
    uint64_t n;
    if (ig_gguf_key_type(g, i) != IG_GGUF_ARRAY ||
        ig_gguf_get_arr_info(g, key, &et, &n, &err) != IG_OK)
        return;
    if (et == IG_GGUF_STRING) {
        /* the first and last few entries, and one past the end (must be refused) */
        for (uint64_t k = 0; k < n && k < 8; k++)
            if (ig_gguf_get_arr_str(g, key, k, &s, &len, &err) == IG_OK) touch(s, len);
        for (uint64_t k = n > 8 ? n - 8 : 0; k < n; k++)
            if (ig_gguf_get_arr_str(g, key, k, &s, &len, &err) == IG_OK) touch(s, len);
        if (ig_gguf_get_arr_str(g, key, n, &s, &len, &err) == IG_OK)
            ig_fuzz_fail("gguf", "ig_gguf_get_arr_str accepted an index past the array's end");
        return;
    }
    const void *data;
    size_t es = elem_size(et);
    if (es && n > 0 && ig_gguf_get_arr_data(g, key, &data, &err) == IG_OK) {
        touch(data, es);
        touch((const unsigned char *)data + (n - 1) * es, es);
    }
}

static void use_tensor(const ig_gguf *g, const ig_gguf_tensor *t) {
    if (!t || !t->name)
        ig_fuzz_fail("gguf", "ig_gguf_tensor_at: no tensor below ig_gguf_n_tensors");
    const ig_gguf_tensor *f = ig_gguf_find_tensor(g, t->name);
    if (!f || strcmp(f->name, t->name) != 0)
        ig_fuzz_fail("gguf", "a listed tensor is not found by name");
    (void)ig_ggml_type_name(t->type);
    if (t->n_bytes && !t->data) ig_fuzz_fail("gguf", "a tensor with bytes has no data pointer");
    touch(t->data, t->n_bytes);
    if (t->n_elements <= 0 || t->n_elements > MAX_READ_ELEMS) return;
    ig_error err;
    ig_error_clear(&err);
    float *f32 = malloc((size_t)t->n_elements * sizeof *f32);
    uint16_t *f16 = malloc((size_t)t->n_elements * sizeof *f16);
    if (f32 && f16) {
        (void)ig_gguf_tensor_read(g, t, IG_DTYPE_F32, f32, &err);
        (void)ig_gguf_tensor_read(g, t, IG_DTYPE_F16, f16, &err);
        (void)ig_gguf_tensor_read(g, t, IG_DTYPE_BF16, f16, &err);
    }
    free(f32);
    free(f16);
}

int ig_fuzz_gguf(const uint8_t *data, size_t size) {
    ig_fuzz_init();
    char path[4200];
    ig_fuzz_write("in.gguf", data, size, path, sizeof path);
    ig_gguf *g = NULL;
    ig_error err;
    ig_error_clear(&err);
    if (ig_gguf_open(path, &g, &err) != IG_OK) {
        if (g) ig_fuzz_fail("gguf", "ig_gguf_open failed but returned a handle");
        return 0;
    }
    ig_fuzz_n_loaded++;
    (void)ig_gguf_version(g);
    (void)ig_gguf_path(g);
    size_t n_kv = ig_gguf_n_kv(g);
    for (size_t i = 0; i < n_kv; i++) use_key(g, (int64_t)i);
    (void)ig_gguf_find_key(g, "general.architecture");
    size_t n_t = ig_gguf_n_tensors(g);
    for (size_t i = 0; i < n_t; i++) use_tensor(g, ig_gguf_tensor_at(g, i));
    (void)ig_gguf_find_tensor(g, "no.such.tensor");
    ig_gguf_close(g);
    return 0;
}

IG_FUZZ_ENTRY(ig_fuzz_gguf)
