/* core/model/io/safetensors: single-file and sharded fixtures written by the safetensors package
 * (values follow formulas recomputed here), and crafted bad headers and indexes that must fail with
 * a message naming the file and the tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/io/safetensors.h"
#include "core/base/mapfile.h"
#include "tests/test_util.h"

static const char *tmp_path(const char *name) {
    static char path[4300];
    snprintf(path, sizeof path, "%s/%s", ig_test_tmpdir(), name);
    return path;
}

/* ---- the fixtures ---------------------------------------------------------------------------- */

static void check_shape(const ig_st_tensor *t, ig_dtype dtype, int ndim, const int64_t *shape) {
    CU_ASSERT_EQUAL(t->dtype, dtype);
    CU_ASSERT_EQUAL_FATAL(t->ndim, ndim);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        CU_ASSERT_EQUAL(t->shape[d], shape[d]);
        n *= shape[d];
    }
    CU_ASSERT_EQUAL(t->n_elements, n);
    CU_ASSERT_EQUAL(t->n_bytes, (size_t)n * ig_dtype_size(dtype));
}

static void check_single(const ig_safetensors *st) {
    CU_ASSERT_EQUAL(ig_safetensors_n_tensors(st), 10);
    for (size_t i = 0; i < ig_safetensors_n_tensors(st); i++) {
        const ig_st_tensor *t = ig_safetensors_tensor_at(st, i);
        CU_ASSERT_PTR_EQUAL(ig_safetensors_find(st, t->name), t);
        CU_ASSERT_PTR_NOT_NULL(strstr(t->file, "st_single/model.safetensors"));
    }
    CU_ASSERT_PTR_NULL(ig_safetensors_tensor_at(st, 10));
    CU_ASSERT_PTR_NULL(ig_safetensors_find(st, "f3"));
    CU_ASSERT_PTR_NULL(ig_safetensors_find(st, "__metadata__"));
    CU_ASSERT_STRING_EQUAL(ig_safetensors_metadata(st, "format"), "pt");
    CU_ASSERT_STRING_EQUAL(ig_safetensors_metadata(st, "producer"), "make_io_fixtures.py");
    CU_ASSERT_PTR_NULL(ig_safetensors_metadata(st, "missing"));

    const ig_st_tensor *t = ig_safetensors_find(st, "f32");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    check_shape(t, IG_DTYPE_F32, 2, (int64_t[]){2, 3});
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(ig_load_f32(t->dtype, t->data, i), i * 0.25f - 1);

    t = ig_safetensors_find(st, "f16");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    check_shape(t, IG_DTYPE_F16, 3, (int64_t[]){2, 2, 2});
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(ig_load_f32(t->dtype, t->data, i), i * 0.5f - 2);

    t = ig_safetensors_find(st, "bf16");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    check_shape(t, IG_DTYPE_BF16, 1, (int64_t[]){4});
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(ig_load_f32(t->dtype, t->data, i), i * 2.0f - 3);

    t = ig_safetensors_find(st, "i32");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    check_shape(t, IG_DTYPE_I32, 2, (int64_t[]){3, 2});
    int32_t i32[6];
    memcpy(i32, t->data, sizeof i32);
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(i32[i], i * -7 + 5);

    t = ig_safetensors_find(st, "i64");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    check_shape(t, IG_DTYPE_I64, 1, (int64_t[]){3});
    int64_t i64[3];
    memcpy(i64, t->data, sizeof i64);
    CU_ASSERT(i64[0] == -(INT64_C(1) << 40) && i64[1] == 0 && i64[2] == (INT64_C(1) << 40) + 3);

    t = ig_safetensors_find(st, "u8");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    check_shape(t, IG_DTYPE_U8, 1, (int64_t[]){4});
    CU_ASSERT(memcmp(t->data, "\x00\x01\xfe\xff", 4) == 0);

    t = ig_safetensors_find(st, "i8");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    check_shape(t, IG_DTYPE_I8, 1, (int64_t[]){4});
    CU_ASSERT(memcmp(t->data, "\x80\xff\x00\x7f", 4) == 0);

    t = ig_safetensors_find(st, "f64");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    check_shape(t, IG_DTYPE_F64, 2, (int64_t[]){1, 2});
    double f64[2];
    memcpy(f64, t->data, sizeof f64);
    CU_ASSERT(f64[0] == 1.0e-300 && f64[1] == -2.5);

    t = ig_safetensors_find(st, "scalar");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT(t->ndim == 0 && t->n_elements == 1 && t->n_bytes == 4);
    CU_ASSERT_EQUAL(ig_load_f32(IG_DTYPE_F32, t->data, 0), 4.5f);

    t = ig_safetensors_find(st, "empty");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    check_shape(t, IG_DTYPE_F32, 2, (int64_t[]){0, 3});
}

static void test_single(void) {
    ig_safetensors *st = NULL;
    ig_error err;
    /* A directory picks model.safetensors; the file itself works too. */
    CU_ASSERT_EQUAL_FATAL(ig_safetensors_open(ig_test_fixture("io/st_single"), &st, &err), IG_OK);
    check_single(st);
    ig_safetensors_close(st);
    CU_ASSERT_EQUAL_FATAL(
        ig_safetensors_open(ig_test_fixture("io/st_single/model.safetensors"), &st, &err), IG_OK);
    check_single(st);
    ig_safetensors_close(st);
}

static void check_sharded(const ig_safetensors *st) {
    CU_ASSERT_EQUAL(ig_safetensors_n_tensors(st), 4);
    const ig_st_tensor *t = ig_safetensors_find(st, "layers.0.weight");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_PTR_NOT_NULL(strstr(t->file, "model-00001-of-00002.safetensors"));
    check_shape(t, IG_DTYPE_F32, 2, (int64_t[]){3, 4});
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(ig_load_f32(t->dtype, t->data, i), i - 6.0f);

    t = ig_safetensors_find(st, "layers.0.bias");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_PTR_NOT_NULL(strstr(t->file, "model-00001-of-00002.safetensors"));
    check_shape(t, IG_DTYPE_F16, 1, (int64_t[]){3});
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(ig_load_f32(t->dtype, t->data, i), i * 0.5f);

    t = ig_safetensors_find(st, "layers.1.weight");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_PTR_NOT_NULL(strstr(t->file, "model-00002-of-00002.safetensors"));
    check_shape(t, IG_DTYPE_BF16, 2, (int64_t[]){2, 4});
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(ig_load_f32(t->dtype, t->data, i), i * -0.25f);

    t = ig_safetensors_find(st, "embed.ids");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_PTR_NOT_NULL(strstr(t->file, "model-00002-of-00002.safetensors"));
    check_shape(t, IG_DTYPE_I64, 1, (int64_t[]){5});
    int64_t ids[5];
    memcpy(ids, t->data, sizeof ids);
    for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(ids[i], i);
    /* __metadata__ comes from the first shard. */
    CU_ASSERT_STRING_EQUAL(ig_safetensors_metadata(st, "shard"),
                           "model-00001-of-00002.safetensors");
}

static void test_sharded(void) {
    ig_safetensors *st = NULL;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_safetensors_open(ig_test_fixture("io/st_sharded"), &st, &err), IG_OK);
    check_sharded(st);
    ig_safetensors_close(st);
    CU_ASSERT_EQUAL_FATAL(
        ig_safetensors_open(ig_test_fixture("io/st_sharded/model.safetensors.index.json"), &st,
                            &err),
        IG_OK);
    check_sharded(st);
    ig_safetensors_close(st);
}

/* ---- crafted bad files ----------------------------------------------------------------------- */

/* Writes an 8-byte length (header_len, or the real length when ~0), the header and data_len bytes.
 */
static void write_st(const char *path, const char *header, uint64_t header_len, size_t data_len) {
    FILE *f = fopen(path, "wb");
    IG_ASSERT(f);
    uint64_t hl = header_len == ~0ull ? strlen(header) : header_len;
    fwrite(&hl, 8, 1, f);
    fwrite(header, 1, strlen(header), f);
    for (size_t i = 0; i < data_len; i++) fputc((int)i, f);
    fclose(f);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    IG_ASSERT(f);
    fputs(text, f);
    fclose(f);
}

/* Opens path and checks the failure: status (if want_rc != 0) and message substrings. */
static void expect_fail(const char *path, ig_status want_rc, const char *must_name,
                        const char *sub1, const char *sub2) {
    ig_safetensors *st = NULL;
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = ig_safetensors_open(path, &st, &err);
    CU_ASSERT_NOT_EQUAL(rc, IG_OK);
    CU_ASSERT_PTR_NULL(st);
    if (want_rc) CU_ASSERT_EQUAL(rc, want_rc);
    int ok = strstr(err.msg, must_name) && (!sub1 || strstr(err.msg, sub1)) &&
             (!sub2 || strstr(err.msg, sub2));
    CU_ASSERT(ok);
    if (!ok || rc == IG_OK) fprintf(stderr, "\n  unexpected: rc=%d msg=%s\n", rc, err.msg);
    ig_safetensors_close(st);
}

#define W_OK_ENTRY "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}"

static void test_bad_headers(void) {
    char path[4300];
    snprintf(path, sizeof path, "%s", tmp_path("bad.safetensors"));

    /* Sanity: the well-formed version of the crafted file opens. */
    write_st(path, "{" W_OK_ENTRY "}", ~0ull, 24);
    ig_safetensors *st = NULL;
    ig_error err;
    CU_ASSERT_EQUAL(ig_safetensors_open(path, &st, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_safetensors_n_tensors(st), 1);
    ig_safetensors_close(st);

    write_text(path, "abc");
    expect_fail(path, IG_ERR_FORMAT, path, "too small", NULL);
    write_st(path, "{" W_OK_ENTRY "}", 1000000, 24);
    expect_fail(path, IG_ERR_FORMAT, path, "header length 1000000 runs past end of file", NULL);
    write_st(path, "{" W_OK_ENTRY "}", ~0ull - 1, 24);
    expect_fail(path, IG_ERR_FORMAT, path, "header length", NULL);
    write_st(path, "{\"w\":{\"dtype\":\"F32\",", ~0ull, 24);
    expect_fail(path, IG_ERR_FORMAT, path, "not valid JSON", NULL);
    write_st(path, "{\"w\" [1,2]}", ~0ull, 24);
    expect_fail(path, IG_ERR_FORMAT, path, "not valid JSON", NULL);
    write_st(path, "{" W_OK_ENTRY "}  xyz", ~0ull, 24);
    expect_fail(path, IG_ERR_FORMAT, path, "trailing data", NULL);
    write_st(path, "[1, 2]", ~0ull, 24);
    expect_fail(path, IG_ERR_FORMAT, path, "not a JSON object", NULL);

    write_st(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,48]}}", ~0ull,
             24);
    expect_fail(path, IG_ERR_FORMAT, path, "tensor 'w'", "extend past the end of the data section");
    write_st(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[24,0]}}", ~0ull,
             24);
    expect_fail(path, IG_ERR_FORMAT, path, "tensor 'w'", "reversed");
    write_st(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[-8,16]}}", ~0ull,
             24);
    expect_fail(path, IG_ERR_FORMAT, path, "tensor 'w'", "non-negative");
    write_st(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,24]}}", ~0ull,
             24);
    expect_fail(path, IG_ERR_FORMAT, path, "tensor 'w'", "hold 24 bytes, but shape [2, 2] of F32");
    write_st(path,
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,"
             "24]}}",
             ~0ull, 24);
    expect_fail(path, IG_ERR_FORMAT, path, "tensor 'w'", NULL);
    write_st(path, "{\"w\":{\"dtype\":\"I16\",\"shape\":[2,3],\"data_offsets\":[0,12]}}", ~0ull,
             24);
    expect_fail(path, IG_ERR_UNSUPPORTED, path, "tensor 'w'", "dtype 'I16' is not supported");
    write_st(path, "{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", ~0ull,
             24);
    expect_fail(path, IG_ERR_UNSUPPORTED, path, "tensor 'w'", "'F8_E4M3'");
    write_st(path,
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
             ~0ull, 24);
    expect_fail(path, IG_ERR_UNSUPPORTED, path, "tensor 'w'", "9 dimensions");
    write_st(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,4]}}", ~0ull, 24);
    expect_fail(path, IG_ERR_FORMAT, path, "tensor 'w'", "shape[0]");
    write_st(path, "{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", ~0ull, 24);
    expect_fail(path, IG_ERR_FORMAT, path, "tensor 'w'", "\"dtype\"");
    write_st(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", ~0ull, 24);
    expect_fail(path, IG_ERR_FORMAT, path, "tensor 'w'", "data_offsets");
    write_st(path, "{\"w\":[1]}", ~0ull, 24);
    expect_fail(path, IG_ERR_FORMAT, path, "tensor 'w'", NULL);
    write_st(path, "{\"__metadata__\":{\"a\":1}," W_OK_ENTRY "}", ~0ull, 24);
    expect_fail(path, IG_ERR_FORMAT, path, "__metadata__", "'a'");
    remove(path);

    expect_fail("/nonexistent/model.safetensors", IG_ERR_IO, "/nonexistent/model.safetensors", NULL,
                NULL);
}

/* Each byte of the single-file fixture flipped in turn: either it opens or it fails with a message
 * naming the file; ASan checks every access. */
static void test_byte_flips(void) {
    char *orig = NULL;
    size_t len = 0;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(
        ig_read_file(ig_test_fixture("io/st_single/model.safetensors"), &orig, &len, &err), IG_OK);
    char path[4300];
    snprintf(path, sizeof path, "%s", tmp_path("flip.safetensors"));
    int bad_msgs = 0;
    for (size_t i = 0; i < len; i++) {
        orig[i] ^= 0x21;
        FILE *f = fopen(path, "wb");
        IG_ASSERT(f);
        fwrite(orig, 1, len, f);
        fclose(f);
        orig[i] ^= 0x21;
        ig_safetensors *st = NULL;
        ig_error_clear(&err);
        if (ig_safetensors_open(path, &st, &err) == IG_OK) {
            for (size_t t = 0; t < ig_safetensors_n_tensors(st); t++) {
                const ig_st_tensor *ti = ig_safetensors_tensor_at(st, t);
                volatile uint8_t sink = 0;
                for (size_t k = 0; k < ti->n_bytes; k++) sink ^= ((const uint8_t *)ti->data)[k];
                (void)sink;
            }
            ig_safetensors_close(st);
        } else if (!strstr(err.msg, path)) {
            bad_msgs++;
        }
    }
    remove(path);
    free(orig);
    CU_ASSERT_EQUAL(bad_msgs, 0);
}

static void test_bad_index(void) {
    char dir[4300], p1[4400], p2[4400], idx[4400];
    snprintf(dir, sizeof dir, "%s", ig_test_tmpdir());
    snprintf(p1, sizeof p1, "%s/a.safetensors", dir);
    snprintf(p2, sizeof p2, "%s/b.safetensors", dir);
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    write_st(p1, "{" W_OK_ENTRY "}", ~0ull, 24);
    write_st(p2, "{\"v\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]}}", ~0ull, 3);

    /* Sanity: a correct index over the two shards opens (and the directory finds it). */
    write_text(idx, "{\"weight_map\":{\"w\":\"a.safetensors\",\"v\":\"b.safetensors\"}}");
    ig_safetensors *st = NULL;
    ig_error err;
    CU_ASSERT_EQUAL(ig_safetensors_open(dir, &st, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_safetensors_n_tensors(st), 2);
    ig_safetensors_close(st);

    write_text(idx, "{\"weight_map\":{\"w\":\"a.safetensors\",\"v\":\"missing.safetensors\"}}");
    expect_fail(idx, IG_ERR_IO, idx, "missing.safetensors", "cannot open");
    write_text(idx, "{\"weight_map\":{\"w\":\"b.safetensors\",\"v\":\"b.safetensors\"}}");
    expect_fail(idx, IG_ERR_FORMAT, idx, "tensor 'w'", "does not hold it");
    write_text(idx, "{\"weight_map\":{\"w\":\"a.safetensors\",\"v\":\"a.safetensors\","
                    "\"x\":\"b.safetensors\"}}");
    expect_fail(idx, IG_ERR_FORMAT, idx, "tensor 'v'", "but found in");
    write_text(idx, "{\"weight_map\":{\"w\":\"a.safetensors\",\"v\":3}}");
    expect_fail(idx, IG_ERR_FORMAT, idx, "tensor 'v'", NULL);
    write_text(idx, "{\"metadata\":{}}");
    expect_fail(idx, IG_ERR_FORMAT, idx, "weight_map", NULL);
    write_text(idx, "{\"weight_map\":{\"w\":\"a.safetensors\",");
    expect_fail(idx, IG_ERR_FORMAT, idx, "not valid JSON", NULL);

    /* The same tensor name in two shards. */
    write_st(p2, "{" W_OK_ENTRY "}", ~0ull, 24);
    write_text(idx, "{\"weight_map\":{\"w\":\"a.safetensors\",\"x\":\"b.safetensors\"}}");
    expect_fail(idx, IG_ERR_FORMAT, "a.safetensors", "tensor 'w'", "b.safetensors");

    /* A bad shard: the message names the index, the shard and the tensor. */
    write_st(p2, "{\"v\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,9]}}", ~0ull, 3);
    write_text(idx, "{\"weight_map\":{\"w\":\"a.safetensors\",\"v\":\"b.safetensors\"}}");
    expect_fail(idx, IG_ERR_FORMAT, idx, "b.safetensors", "tensor 'v'");
    remove(p1);
    remove(p2);
    remove(idx);
    expect_fail(dir, IG_ERR_NOT_FOUND, dir, "neither", NULL);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("safetensors", NULL, NULL);
    CU_add_test(s, "single", test_single);
    CU_add_test(s, "sharded", test_sharded);
    CU_add_test(s, "bad_headers", test_bad_headers);
    CU_add_test(s, "byte_flips", test_byte_flips);
    CU_add_test(s, "bad_index", test_bad_index);
}
