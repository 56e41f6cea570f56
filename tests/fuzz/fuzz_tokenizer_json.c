/* Fuzz harness: Hugging Face tokenizer.json (core/model/tokenizer, ig_tokenizer_load_hf). The input
 * is the file, alone in its directory (no tokenizer_config.json beside it). A tokenizer that loads
 * encodes a fixed text and the input's first bytes, and decodes them (ig_fuzz_use_tokenizer). */
#include <stdio.h>
#include <sys/stat.h>

#include "core/model/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

int ig_fuzz_tokenizer_json(const uint8_t *data, size_t size) {
    ig_fuzz_init();
    static int made;
    if (!made) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/hf", ig_fuzz_dir());
        mkdir(dir, 0755);
        made = 1;
    }
    char path[4200];
    ig_fuzz_write("hf/tokenizer.json", data, size, path, sizeof path);
    ig_tokenizer *tok = NULL;
    ig_error err;
    ig_error_clear(&err);
    if (ig_tokenizer_load_hf(path, &tok, &err) != IG_OK) {
        if (tok) ig_fuzz_fail("tokenizer_json", "ig_tokenizer_load_hf failed but returned one");
        return 0;
    }
    ig_fuzz_n_loaded++;
    ig_fuzz_use_tokenizer("tokenizer_json", tok, data, size);
    ig_tokenizer_free(tok);
    return 0;
}

IG_FUZZ_ENTRY(ig_fuzz_tokenizer_json)
