/* Fuzz harness: the safetensors reader (core/model/io/safetensors). An input starting with '{'
 * (after blanks) is a model.safetensors.index.json, read beside the shards of the tests/fixtures/io
 * and tiny_opt_sharded checkpoints (linked into the scratch directory once); anything else is one
 * .safetensors file. Once it opens, every tensor is looked up by name, its size checked against
 * its dtype and shape, and its bytes touched. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/model/io/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

static volatile unsigned char g_sink;

static void touch(const void *p, size_t n) {
    const unsigned char *b = p;
    unsigned char x = 0;
    for (size_t i = 0; i < n; i++) x ^= b[i];
    g_sink ^= x;
}

/* <scratch>/st: where an index is written, with the fixtures' shards beside it. */
static void make_index_dir(void) {
    static int done;
    if (done) return;
    done = 1;
    static const char *const shards[] = {
        "io/st_sharded/model-00001-of-00002.safetensors",
        "io/st_sharded/model-00002-of-00002.safetensors",
        "tiny_opt_sharded/model-00001-of-00003.safetensors",
        "tiny_opt_sharded/model-00002-of-00003.safetensors",
        "tiny_opt_sharded/model-00003-of-00003.safetensors",
    };
    char dir[4200], link[4400], target[4400];
    snprintf(dir, sizeof dir, "%s/st", ig_fuzz_dir());
    mkdir(dir, 0755);
    for (size_t i = 0; i < sizeof shards / sizeof shards[0]; i++) {
        snprintf(target, sizeof target, "%s/tests/fixtures/%s", IG_SOURCE_DIR, shards[i]);
        snprintf(link, sizeof link, "%s/%s", dir, strrchr(shards[i], '/') + 1);
        (void)symlink(target, link); /* a missing fixture only makes some indexes fail */
    }
}

static void use(const ig_safetensors *st) {
    size_t n = ig_safetensors_n_tensors(st);
    for (size_t i = 0; i < n; i++) {
        const ig_st_tensor *t = ig_safetensors_tensor_at(st, i);
        if (!t || !t->name) ig_fuzz_fail("safetensors", "no tensor below n_tensors");
        const ig_st_tensor *f = ig_safetensors_find(st, t->name);
        if (!f || strcmp(f->name, t->name) != 0)
            ig_fuzz_fail("safetensors", "a listed tensor is not found by its name");
        if (t->ndim < 0 || t->ndim > IG_ST_MAX_DIMS)
            ig_fuzz_fail("safetensors", "ndim out of range");
        int64_t el = 1;
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] < 0 || __builtin_mul_overflow(el, t->shape[d], &el))
                ig_fuzz_fail("safetensors", "a shape whose element count overflows");
        size_t bytes;
        if (el != t->n_elements ||
            __builtin_mul_overflow((size_t)el, ig_dtype_size(t->dtype), &bytes) ||
            bytes != t->n_bytes)
            ig_fuzz_fail("safetensors", "n_elements or n_bytes disagrees with shape and dtype");
        if (t->n_bytes && !t->data) ig_fuzz_fail("safetensors", "bytes but no data pointer");
        touch(t->data, t->n_bytes);
        if (!t->file) ig_fuzz_fail("safetensors", "a tensor without its file");
    }
    (void)ig_safetensors_tensor_at(st, n);
    (void)ig_safetensors_find(st, "no.such.tensor");
    const char *keys[] = {"format", "total_size", ""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = ig_safetensors_metadata(st, keys[i]);
        if (v) touch(v, strlen(v));
    }
}

int ig_fuzz_safetensors(const uint8_t *data, size_t size) {
    ig_fuzz_init();
    size_t k = 0;
    while (k < size && (data[k] == ' ' || data[k] == '\t' || data[k] == '\r' || data[k] == '\n'))
        k++;
    int index = k < size && data[k] == '{';
    char path[4200];
    if (index) {
        make_index_dir();
        ig_fuzz_write("st/model.safetensors.index.json", data, size, path, sizeof path);
    } else {
        ig_fuzz_write("in.safetensors", data, size, path, sizeof path);
    }
    ig_safetensors *st = NULL;
    ig_error err;
    ig_error_clear(&err);
    if (ig_safetensors_open(path, &st, &err) != IG_OK) {
        if (st) ig_fuzz_fail("safetensors", "ig_safetensors_open failed but returned a handle");
        return 0;
    }
    ig_fuzz_n_loaded++;
    use(st);
    ig_safetensors_close(st);
    return 0;
}

IG_FUZZ_ENTRY(ig_fuzz_safetensors)
