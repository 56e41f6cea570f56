/* Fuzz harness: a tokenizer from GGUF metadata (core/model/tokenizer/tokenizer_gguf.c), as
 * core/model loads it: ig_gguf_open, then ig_tokenizer_load_gguf on the opened file. A tokenizer
 * that loads encodes and decodes as in the tokenizer.json harness (ig_fuzz_use_tokenizer). */
#include "core/model/io/gguf.h"
#include "core/model/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

int ig_fuzz_gguf_tokenizer(const uint8_t *data, size_t size) {
    ig_fuzz_init();
    char path[4200];
    ig_fuzz_write("tok.gguf", data, size, path, sizeof path);
    ig_gguf *g = NULL;
    ig_error err;
    ig_error_clear(&err);
    if (ig_gguf_open(path, &g, &err) != IG_OK) return 0;
    ig_tokenizer *tok = NULL;
    if (ig_tokenizer_load_gguf(g, &tok, &err) == IG_OK) {
        ig_fuzz_n_loaded++;
        ig_fuzz_use_tokenizer("gguf_tokenizer", tok, data, size);
        ig_tokenizer_free(tok);
    } else if (tok) {
        ig_fuzz_fail("gguf_tokenizer", "ig_tokenizer_load_gguf failed but returned one");
    }
    ig_gguf_close(g);
    return 0;
}

IG_FUZZ_ENTRY(ig_fuzz_gguf_tokenizer)
