/* core/model/io/ggml_dequant: every supported ggml block format against gguf-py's dequantize
 * (golden values in tests/fixtures/io/quants.gguf, bit for bit), the parallel path against
 * block-by-block calls, and the type tables. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/io/gguf.h"
#include "core/model/io/ggml_dequant.h"
#include "tests/test_util.h"

/* Counts elements whose bit patterns differ (NaN payloads included) and reports the first one. */
static int count_bit_mismatches(const char *what, const float *got, const float *want, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (memcmp(&got[i], &want[i], 4) != 0) {
            if (!bad)
                fprintf(stderr, "\n  %s: element %lld is %.9g, gguf-py gives %.9g\n", what,
                        (long long)i, (double)got[i], (double)want[i]);
            bad++;
        }
    }
    return bad;
}

static void test_golden_fixture(void) {
    ig_gguf *g = NULL;
    ig_error err;
    if (ig_gguf_open(ig_test_fixture("io/quants.gguf"), &g, &err) != IG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        CU_FAIL_FATAL("cannot open the quants fixture");
    }
    uint64_t n_names = 0;
    ig_gguf_vtype et;
    CU_ASSERT_EQUAL_FATAL(ig_gguf_get_arr_info(g, "test.tensor_names", &et, &n_names, &err), IG_OK);
    CU_ASSERT_EQUAL(n_names, 13); /* F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K..Q6_K */
    int types_seen = 0;
    for (uint64_t k = 0; k < n_names; k++) {
        const char *s;
        size_t len;
        CU_ASSERT_EQUAL_FATAL(ig_gguf_get_arr_str(g, "test.tensor_names", k, &s, &len, &err),
                              IG_OK);
        char name[64], exp_name[80];
        snprintf(name, sizeof name, "%.*s", (int)len, s);
        snprintf(exp_name, sizeof exp_name, "%s.expected", name);
        const ig_gguf_tensor *t = ig_gguf_find_tensor(g, name);
        const ig_gguf_tensor *te = ig_gguf_find_tensor(g, exp_name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT_PTR_NOT_NULL_FATAL(te);
        CU_ASSERT_EQUAL(te->type, IG_GGML_F32);
        CU_ASSERT_EQUAL_FATAL(t->n_elements, te->n_elements);
        CU_ASSERT(ig_ggml_can_dequantize((int)t->type));
        types_seen |= 1 << (t->type == IG_GGML_BF16 ? 15 : (int)t->type);
        int64_t n = t->n_elements;
        float *want = malloc((size_t)n * 4), *got = malloc((size_t)n * 4);
        uint16_t *half = malloc((size_t)n * 2);
        CU_ASSERT_FATAL(want && got && half);
        CU_ASSERT_EQUAL(ig_gguf_tensor_read(g, te, IG_DTYPE_F32, want, &err), IG_OK);

        memset(got, 0xff, (size_t)n * 4);
        CU_ASSERT_EQUAL(ig_dequantize_f32((int)t->type, t->data, got, n), 0);
        CU_ASSERT_EQUAL(count_bit_mismatches(name, got, want, n), 0);

        memset(got, 0xff, (size_t)n * 4);
        CU_ASSERT_EQUAL(ig_gguf_tensor_read(g, t, IG_DTYPE_F32, got, &err), IG_OK);
        CU_ASSERT_EQUAL(count_bit_mismatches(name, got, want, n), 0);

        int bad = 0;
        CU_ASSERT_EQUAL(ig_gguf_tensor_read(g, t, IG_DTYPE_F16, half, &err), IG_OK);
        for (int64_t i = 0; i < n; i++) bad += half[i] != ig_f32_to_f16(want[i]);
        CU_ASSERT_EQUAL(ig_gguf_tensor_read(g, t, IG_DTYPE_BF16, half, &err), IG_OK);
        for (int64_t i = 0; i < n; i++) bad += half[i] != ig_f32_to_bf16(want[i]);
        CU_ASSERT_EQUAL(bad, 0);
        free(want);
        free(got);
        free(half);
    }
    /* Every supported type was covered: 0,1,2,3,6,7,8,10..14 and BF16 (bit 15). */
    CU_ASSERT_EQUAL(types_seen, 0xfdcf);
    ig_gguf_close(g);
}

/* Hand-made blocks with values worked out from the ggml layouts, independent of the fixture. */
static void test_hand_blocks(void) {
    /* Q4_0: d = 2.0 (f16 0x4000); byte j = (j+1) | (15-j) << 4: low nibble -> element j. */
    uint8_t q40[18];
    uint16_t d = 0x4000;
    memcpy(q40, &d, 2);
    for (int j = 0; j < 16; j++) q40[2 + j] = (uint8_t)(((j + 1) & 15) | ((15 - j) << 4));
    float y[256];
    CU_ASSERT_EQUAL(ig_dequantize_f32(IG_GGML_Q4_0, q40, y, 32), 0);
    CU_ASSERT_EQUAL(y[0], 2.0f * (1 - 8));
    CU_ASSERT_EQUAL(y[15], 2.0f * (0 - 8));
    CU_ASSERT_EQUAL(y[16], 2.0f * (15 - 8));
    CU_ASSERT_EQUAL(y[31], 2.0f * (0 - 8));

    /* Q5_1: d = 0.5, m = -1; all low nibbles 3, high nibbles 0; qh = bit 0 and bit 17 set. */
    uint8_t q51[24];
    uint16_t hd = 0x3800, hm = 0xbc00;
    memcpy(q51, &hd, 2);
    memcpy(q51 + 2, &hm, 2);
    uint32_t qh = (1u << 0) | (1u << 17);
    memcpy(q51 + 4, &qh, 4);
    memset(q51 + 8, 0x03, 16);
    CU_ASSERT_EQUAL(ig_dequantize_f32(IG_GGML_Q5_1, q51, y, 32), 0);
    CU_ASSERT_EQUAL(y[0], 0.5f * 19 - 1); /* 3 | 16 */
    CU_ASSERT_EQUAL(y[1], 0.5f * 3 - 1);
    CU_ASSERT_EQUAL(y[16], 0.5f * 0 - 1);
    CU_ASSERT_EQUAL(y[17], 0.5f * 16 - 1); /* high nibble 0, fifth bit from qh bit 17 */

    /* Q6_K: d = 1, scales all 1, ql = qh = 0 -> every q = -32. */
    uint8_t q6[210];
    memset(q6, 0, sizeof q6);
    for (int i = 0; i < 16; i++) q6[192 + i] = 1;
    uint16_t one = 0x3c00;
    memcpy(q6 + 208, &one, 2);
    CU_ASSERT_EQUAL(ig_dequantize_f32(IG_GGML_Q6_K, q6, y, 256), 0);
    CU_ASSERT_EQUAL(y[0], -32.0f);
    CU_ASSERT_EQUAL(y[255], -32.0f);
}

static void test_type_tables(void) {
    static const struct {
        int type;
        int64_t block;
        size_t bytes;
    } known[] = {
        {IG_GGML_F32, 1, 4},      {IG_GGML_F16, 1, 2},      {IG_GGML_BF16, 1, 2},
        {IG_GGML_Q4_0, 32, 18},   {IG_GGML_Q4_1, 32, 20},   {IG_GGML_Q5_0, 32, 22},
        {IG_GGML_Q5_1, 32, 24},   {IG_GGML_Q8_0, 32, 34},   {IG_GGML_Q2_K, 256, 84},
        {IG_GGML_Q3_K, 256, 110}, {IG_GGML_Q4_K, 256, 144}, {IG_GGML_Q5_K, 256, 176},
        {IG_GGML_Q6_K, 256, 210}, {IG_GGML_Q8_K, 256, 292},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        CU_ASSERT_EQUAL(ig_ggml_block_size(known[i].type), known[i].block);
        CU_ASSERT_EQUAL(ig_ggml_block_bytes(known[i].type), known[i].bytes);
        CU_ASSERT_EQUAL(ig_ggml_can_dequantize(known[i].type), known[i].type != IG_GGML_Q8_K);
    }
    static const int unknown[] = {-1, 4, 5, 31, 33, 42, 1000};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CU_ASSERT_EQUAL(ig_ggml_block_size(unknown[i]), 0);
        CU_ASSERT_EQUAL(ig_ggml_block_bytes(unknown[i]), 0);
        CU_ASSERT_FALSE(ig_ggml_can_dequantize(unknown[i]));
    }
    float y[32];
    uint8_t zeros[64] = {0};
    CU_ASSERT_EQUAL(ig_dequantize_f32(20 /* IQ4_NL: sized, not dequantized */, zeros, y, 32), -1);
    CU_ASSERT_EQUAL(ig_dequantize_f32(4, zeros, y, 32), -1);
    CU_ASSERT_EQUAL(ig_dequantize_f32(IG_GGML_Q4_0, zeros, y, 16), -1); /* not a whole block */
    CU_ASSERT_EQUAL(ig_dequantize_f32(IG_GGML_Q4_0, zeros, y, 0), 0);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint8_t rnd_byte(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint8_t)(rng_state >> 24);
}

/* The OpenMP path over a large buffer equals block-by-block calls (which stay serial). */
static void test_parallel_matches_blocks(void) {
    static const int types[] = {IG_GGML_F16,  IG_GGML_BF16, IG_GGML_Q4_0, IG_GGML_Q4_1,
                                IG_GGML_Q5_0, IG_GGML_Q5_1, IG_GGML_Q8_0, IG_GGML_Q2_K,
                                IG_GGML_Q3_K, IG_GGML_Q4_K, IG_GGML_Q5_K, IG_GGML_Q6_K};
    const int64_t n = 1 << 18;
    float *whole = malloc((size_t)n * 4), *blocks = malloc((size_t)n * 4);
    CU_ASSERT_FATAL(whole && blocks);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        int t = types[k];
        int64_t bs = ig_ggml_block_size(t);
        size_t bb = ig_ggml_block_bytes(t);
        size_t nbytes = (size_t)(n / bs) * bb;
        uint8_t *src = malloc(nbytes);
        CU_ASSERT_FATAL(src != NULL);
        for (size_t i = 0; i < nbytes; i++) src[i] = rnd_byte();
        CU_ASSERT_EQUAL(ig_dequantize_f32(t, src, whole, n), 0);
        for (int64_t b = 0; b < n / bs; b++)
            ig_dequantize_f32(t, src + (size_t)b * bb, blocks + b * bs, bs);
        CU_ASSERT_EQUAL(memcmp(whole, blocks, (size_t)n * 4), 0);
        free(src);
    }
    free(whole);
    free(blocks);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("dequant", NULL, NULL);
    CU_add_test(s, "golden_fixture", test_golden_fixture);
    CU_add_test(s, "hand_blocks", test_hand_blocks);
    CU_add_test(s, "type_tables", test_type_tables);
    CU_add_test(s, "parallel_matches_blocks", test_parallel_matches_blocks);
}
