/* The harnesses' shared part: scratch files, quiet logging, tokenizer use (see fuzz_common.h).
 * Keeps no state between inputs except the scratch directory, so that each input is judged alone.
 */
#include "tests/fuzz/fuzz_common.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/log.h"

#ifndef IG_SOURCE_DIR
#error "IG_SOURCE_DIR must name the source tree"
#endif

unsigned long ig_fuzz_n_loaded;

static char g_dir[4096];
static pid_t g_owner;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Only the process that made it removes it (libFuzzer's -fork children share the directory). */
static void remove_dir(void) {
    if (g_dir[0] && getpid() == g_owner) nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void ig_fuzz_init(void) {
    if (g_dir[0]) return;
    ig_log_set_level(IG_LOG_ERROR);
    setenv("HWLOC_HIDE_ERRORS", "2", 0);
    setenv("IGEN_HOME", IG_SOURCE_DIR "/tests/fixtures/exp/good", 1);
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/igen-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "fuzz: cannot create a scratch directory %s: %s\n", g_dir, strerror(errno));
        abort();
    }
    g_owner = getpid();
    atexit(remove_dir);
}

const char *ig_fuzz_dir(void) {
    return g_dir;
}

void ig_fuzz_write(const char *name, const uint8_t *data, size_t size, char *path, size_t n) {
    int len = snprintf(path, n, "%s/%s", g_dir, name);
    if (len < 0 || (size_t)len >= n) {
        fprintf(stderr, "fuzz: scratch path too long: %s/%s\n", g_dir, name);
        abort();
    }
    FILE *f = fopen(path, "wb");
    int ok = f != NULL;
    if (f) {
        ok = (size == 0 || fwrite(data, 1, size, f) == size) && !ferror(f);
        ok = fclose(f) == 0 && ok;
    }
    if (!ok) {
        fprintf(stderr, "fuzz: cannot write %s (%zu bytes): %s\n", path, size, strerror(errno));
        abort();
    }
}

void ig_fuzz_fail(const char *harness, const char *what) {
    fprintf(stderr, "fuzz_%s: check failed: %s\n", harness, what);
    abort();
}

static void encode_decode(const char *harness, const ig_tokenizer *tok, const char *text,
                          size_t len) {
    int32_t vocab = ig_tokenizer_vocab_size(tok);
    for (int bos = 0; bos < 2; bos++) {
        int32_t *ids = NULL;
        size_t n = 0;
        ig_error err;
        ig_error_clear(&err);
        if (ig_tokenizer_encode(tok, text, len, bos, &ids, &n, &err) != IG_OK) {
            free(ids);
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= vocab) {
                free(ids);
                ig_fuzz_fail(harness, "ig_tokenizer_encode returned an id outside the vocabulary");
            }
            size_t bl = 0;
            if (!ig_tokenizer_token_bytes(tok, ids[i], &bl) ||
                !ig_tokenizer_token_text(tok, ids[i], &bl)) {
                free(ids);
                ig_fuzz_fail(harness, "an encoded id is not in the vocabulary (no bytes or text)");
            }
        }
        char *out = NULL;
        if (ig_tokenizer_decode(tok, ids, n, &out, &err) == IG_OK && !out) {
            free(ids);
            ig_fuzz_fail(harness, "ig_tokenizer_decode succeeded without a string");
        }
        free(out);
        free(ids);
    }
}

void ig_fuzz_use_tokenizer(const char *harness, const ig_tokenizer *tok, const uint8_t *data,
                           size_t size) {
    static const char text[] = "Hello, world!  It's 2024: caf\xc3\xa9 \xe2\x96\x81x\t\n<s></s>"
                               "<|endoftext|><|im_start|> 12345 \xf0\x9f\x98\x80 \xe6\x97\xa5";
    encode_decode(harness, tok, text, sizeof text - 1);
    /* The input's first bytes as text: invalid UTF-8 must be refused, never matched. */
    encode_decode(harness, tok, (const char *)data, size < 64 ? size : 64);
    int32_t vocab = ig_tokenizer_vocab_size(tok);
    if (vocab < 0) ig_fuzz_fail(harness, "negative vocabulary size");
    int32_t probe[] = {0, vocab - 1, vocab / 2, ig_tokenizer_bos(tok), ig_tokenizer_eos(tok)};
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
        int32_t id = probe[i];
        if (id < 0 || id >= vocab) continue;
        size_t len = 0;
        const char *t = ig_tokenizer_token_text(tok, id, &len);
        if (!t) continue; /* an id the vocabulary leaves unused (sparse ids are allowed) */
        volatile unsigned char sink = 0;
        for (size_t k = 0; k < len; k++) sink ^= (unsigned char)t[k];
        (void)sink;
        (void)ig_tokenizer_token_bytes(tok, id, &len);
        (void)ig_tokenizer_is_special(tok, id);
    }
    size_t len = 0;
    if (ig_tokenizer_token_text(tok, -1, &len) || ig_tokenizer_token_text(tok, vocab, &len))
        ig_fuzz_fail(harness, "ig_tokenizer_token_text accepted an id outside the vocabulary");
    (void)ig_tokenizer_find(tok, "a");
    (void)ig_tokenizer_get_kind(tok);
    (void)ig_tokenizer_adds_bos(tok);
    int32_t ends[2] = {0, vocab - 1};
    char *out = NULL;
    ig_error err;
    ig_error_clear(&err);
    if (vocab > 0 && ig_tokenizer_decode(tok, ends, 2, &out, &err) == IG_OK) free(out);
}
