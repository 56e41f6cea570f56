/* The fuzz harnesses' shared part (tests/fuzz): the entry point of each harness, a per-process
 * scratch directory for parsers that only read paths, quiet logging, and the light use of whatever
 * loads. Linked into the libFuzzer programs (IG_FUZZ) and into tests/test_fuzz_regress, which feeds
 * the same functions without libFuzzer. Never prints per input. */
#ifndef IG_FUZZ_COMMON_H
#define IG_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "core/model/tokenizer/tokenizer.h"

/* The harnesses: each parses one input and returns 0 (libFuzzer's convention). A crash, a
 * sanitizer report, a leak or ig_fuzz_fail is a finding; a rejected input is not. */
int ig_fuzz_gguf(const uint8_t *data, size_t size);
int ig_fuzz_safetensors(const uint8_t *data, size_t size);
int ig_fuzz_tokenizer_json(const uint8_t *data, size_t size);
int ig_fuzz_gguf_tokenizer(const uint8_t *data, size_t size);
int ig_fuzz_exp_yaml(const uint8_t *data, size_t size);
int ig_fuzz_hwprof(const uint8_t *data, size_t size);
int ig_fuzz_modelshape(const uint8_t *data, size_t size);
int ig_fuzz_topo(const uint8_t *data, size_t size);

/* Once per process (later calls do nothing): logging at error level (igen logs no errors itself,
 * so nothing is printed), hwloc's error banners hidden, the scratch directory created (and removed
 * at exit) and IGEN_HOME pointed at tests/fixtures/exp/good, so that an experiment's relative
 * references ("../ref/x.yaml", "tiny.txt") resolve as they do beside the fixtures. */
void ig_fuzz_init(void);
/* Inputs that loaded (a topology input counts once per topology): the regression runner checks
 * that the fixtures do, so that a harness that rejects everything cannot pass unnoticed. */
extern unsigned long ig_fuzz_n_loaded;
/* The scratch directory (ig_fuzz_init first). */
const char *ig_fuzz_dir(void);
/* Writes data to <scratch>/name (replacing it) and puts the path in path[n]; aborts if it cannot,
 * so that a full disk never passes as inputs that were tested. */
void ig_fuzz_write(const char *name, const uint8_t *data, size_t size, char *path, size_t n);
/* A harness's own check failed: prints it and aborts (libFuzzer reports it as a crash). */
void ig_fuzz_fail(const char *harness, const char *what) __attribute__((noreturn));
/* Encodes a fixed text and a prefix of the input (with and without BOS), checks every id is in the
 * vocabulary, decodes them and looks at the vocabulary's ends, BOS and EOS. */
void ig_fuzz_use_tokenizer(const char *harness, const ig_tokenizer *tok, const uint8_t *data,
                           size_t size);

/* libFuzzer's entry point, calling the harness body `fn` (only in the libFuzzer build; the
 * regression test calls the bodies directly). */
#ifdef IG_FUZZ_MAIN
#define IG_FUZZ_ENTRY(fn)                                                                          \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);                                  \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {                                 \
        return fn(data, size);                                                                     \
    }
#else
#define IG_FUZZ_ENTRY(fn)
#endif

#endif
