/* core/: status messages, dtype conversions (exhaustive f16 round trip, rounding), mapped files,
 * the huge-page arena. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdint.h>

#include "core/base/arena.h"
#include "core/base/dtype.h"
#include "core/base/mapfile.h"
#include "core/base/status.h"
#include "tests/test_util.h"

static void test_error_set_and_prefix(void) {
    ig_error err;
    ig_error_clear(&err);
    ig_status rc = ig_error_set(&err, IG_ERR_FORMAT, "tensor %s: expected %d", "w", 3);
    CU_ASSERT_EQUAL(rc, IG_ERR_FORMAT);
    CU_ASSERT_STRING_EQUAL(err.msg, "tensor w: expected 3");
    ig_error_prefix(&err, "%s: ", "model.gguf");
    CU_ASSERT_STRING_EQUAL(err.msg, "model.gguf: tensor w: expected 3");
    CU_ASSERT_EQUAL(ig_error_set(NULL, IG_ERR_IO, "ignored"), IG_ERR_IO);
    CU_ASSERT_STRING_EQUAL(ig_status_to_string(IG_ERR_SHAPE), "wrong shape or type");
}

/* Messages quote input: control characters and bytes that are not UTF-8 never reach a terminal. */
static void test_error_term_safe(void) {
    ig_error err;
    ig_error_clear(&err);
    ig_error_set(&err, IG_ERR_FORMAT, "name '%s'", "a\x1b[31mred\nnext\tx\xff\xc2\x85y");
    CU_ASSERT_STRING_EQUAL(err.msg, "name 'a\\x1B[31mred\\nnext\\tx\\xFF\\xC2\\x85y'");
    /* valid UTF-8 text is kept as it is, and escaping is idempotent */
    ig_error_set(&err, IG_ERR_FORMAT, "caf\xc3\xa9 \xe6\x97\xa5 \\x41");
    CU_ASSERT_STRING_EQUAL(err.msg, "caf\xc3\xa9 \xe6\x97\xa5 \\x41");
    ig_error_prefix(&err, "%s: ", "f\x07.yaml");
    CU_ASSERT_STRING_EQUAL(err.msg, "f\\x07.yaml: caf\xc3\xa9 \xe6\x97\xa5 \\x41");
    char small[8];
    ig_text_term_safe("\x01\x01\x01\x01", small, sizeof small); /* cut whole escapes only */
    CU_ASSERT_STRING_EQUAL(small, "\\x01");
}

static void test_f16_round_trip_exhaustive(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ig_f16_to_f32((uint16_t)h);
        uint16_t back = ig_f32_to_f16(f);
        int is_nan = ((h & 0x7c00u) == 0x7c00u) && (h & 0x3ffu);
        if (is_nan) {
            if (!isnan(f) || (back & 0x7c00u) != 0x7c00u || !(back & 0x3ffu)) bad++;
        } else if (back != h) {
            bad++;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
}

static void test_f16_rounding(void) {
    /* 1 + 2^-11 is exactly halfway between 1 and 1 + 2^-10: ties to even -> 1. */
    CU_ASSERT_EQUAL(ig_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);
    /* 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even) -> 1+2^-9. */
    CU_ASSERT_EQUAL(ig_f32_to_f16(1.0f + 3.0f * ldexpf(1.0f, -11)), 0x3c02);
    CU_ASSERT_EQUAL(ig_f32_to_f16(65504.0f), 0x7bff);
    CU_ASSERT_EQUAL(ig_f32_to_f16(65520.0f), 0x7c00);          /* rounds to inf */
    CU_ASSERT_EQUAL(ig_f32_to_f16(ldexpf(1.0f, -24)), 0x0001); /* smallest subnormal */
    CU_ASSERT_EQUAL(ig_f32_to_f16(ldexpf(1.0f, -25)), 0x0000); /* tie to even -> 0 */
    CU_ASSERT_EQUAL(ig_f32_to_f16(ldexpf(1.5f, -25)), 0x0001);
    CU_ASSERT_EQUAL(ig_f32_to_f16(-2.0f), 0xc000);
}

static void test_bf16(void) {
    CU_ASSERT_EQUAL(ig_f32_to_bf16(1.0f), 0x3f80);
    CU_ASSERT_EQUAL(ig_bf16_to_f32(0x3f80), 1.0f);
    /* 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7 -> ties to even (1). */
    CU_ASSERT_EQUAL(ig_f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80);
    CU_ASSERT_EQUAL(ig_f32_to_bf16(1.0f + 3.0f * ldexpf(1.0f, -8)), 0x3f82);
    CU_ASSERT(isnan(ig_bf16_to_f32(ig_f32_to_bf16(NAN))));
}

static void test_convert_and_names(void) {
    float src[5] = {0.5f, -1.25f, 3.0f, 1e-3f, 100.0f};
    uint16_t h[5];
    float back[5];
    ig_convert(IG_DTYPE_F16, h, IG_DTYPE_F32, src, 5);
    ig_convert(IG_DTYPE_F32, back, IG_DTYPE_F16, h, 5);
    for (int i = 0; i < 5; i++) CU_ASSERT(fabsf(back[i] - src[i]) <= fabsf(src[i]) * 1e-3f);
    CU_ASSERT_EQUAL(ig_dtype_from_name("bfloat16"), IG_DTYPE_BF16);
    CU_ASSERT_EQUAL(ig_dtype_from_name("f8"), -1);
    CU_ASSERT_EQUAL(ig_dtype_size(IG_DTYPE_F16), 2);
}

static void test_mapfile(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/map.bin", ig_test_tmpdir());
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("hello", f);
    fclose(f);
    ig_mapfile *mf = NULL;
    ig_error err;
    CU_ASSERT_EQUAL_FATAL(ig_mapfile_open(path, &mf, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_mapfile_size(mf), 5);
    CU_ASSERT(memcmp(ig_mapfile_data(mf), "hello", 5) == 0);
    ig_mapfile_close(mf);
    remove(path);
    CU_ASSERT_EQUAL(ig_mapfile_open("/nonexistent/x.gguf", &mf, &err), IG_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/nonexistent/x.gguf"));
}

/* Buffers of the arena: 64-byte aligned, zeroed, disjoint (each filled with its own byte, all
 * read back after every buffer was written), small ones sharing a chunk and large ones past the
 * chunk size alike; used bytes are the rounded sizes; an impossible size fails with a message. */
static void test_arena(void) {
    ig_arena *a = NULL;
    ig_error err;
    ig_error_clear(&err);
    CU_ASSERT_FATAL(ig_arena_create(&a, &err) == IG_OK);
    enum { N = 40 };
    size_t sizes[N];
    unsigned char *bufs[N];
    size_t expect_used = 0;
    for (int i = 0; i < N; i++) {
        /* 0 bytes, odd sizes, and every 9th one 20 MiB (over half a 32 MiB chunk) */
        sizes[i] = i % 9 == 8 ? ((size_t)20 << 20) + 3 : (size_t)i * 4099 % 300001;
        bufs[i] = ig_arena_alloc(a, sizes[i], &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(bufs[i]);
        CU_ASSERT_EQUAL((uintptr_t)bufs[i] % 64, 0);
        int zero = 1;
        for (size_t k = 0; k < sizes[i]; k++) zero &= bufs[i][k] == 0;
        CU_ASSERT(zero);
        memset(bufs[i], i + 1, sizes[i]);
        expect_used += sizes[i] ? (sizes[i] + 63) / 64 * 64 : 64;
    }
    for (int i = 0; i < N; i++) {
        int same = 1;
        for (size_t k = 0; k < sizes[i]; k++) same &= bufs[i][k] == (unsigned char)(i + 1);
        CU_ASSERT(same);
    }
    CU_ASSERT_EQUAL(ig_arena_used(a), expect_used);
    CU_ASSERT(ig_arena_huge_bytes(a) % ((size_t)2 << 20) == 0); /* whole huge pages, if any */
    CU_ASSERT_PTR_NULL(ig_arena_alloc(a, SIZE_MAX - 10, &err));
    CU_ASSERT(strstr(err.msg, "out of memory") != NULL);
    CU_ASSERT_EQUAL(ig_arena_used(a), expect_used);
    ig_arena_free(a);
    ig_arena_free(NULL);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("core", NULL, NULL);
    CU_add_test(s, "error_set_and_prefix", test_error_set_and_prefix);
    CU_add_test(s, "error_term_safe", test_error_term_safe);
    CU_add_test(s, "f16_round_trip_exhaustive", test_f16_round_trip_exhaustive);
    CU_add_test(s, "f16_rounding", test_f16_rounding);
    CU_add_test(s, "bf16", test_bf16);
    CU_add_test(s, "convert_and_names", test_convert_and_names);
    CU_add_test(s, "mapfile", test_mapfile);
    CU_add_test(s, "arena", test_arena);
}
