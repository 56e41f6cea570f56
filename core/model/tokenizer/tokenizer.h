/* Tokenizers: byte-level BPE (GPT-2 style pre-tokenization; OPT, SmolLM2, Llama-3) and
 * SentencePiece-style BPE with byte fallback (Llama-1/2), loaded from a Hugging Face
 * tokenizer.json or from GGUF metadata. Encoding must reproduce Hugging Face `tokenizers` exactly.
 *
 * Conventions (see core/model/tokenizer/ for the why):
 * - A loaded tokenizer is immutable: encode/decode keep their scratch (and the per-word BPE cache)
 *   per call, so one tokenizer can serve several threads.
 * - Text must be valid UTF-8 (as a Rust &str); anything else is IG_ERR_INVALID_ARG, never a guess.
 * - tokenizer.json: model BPE only; normalizers Prepend/Replace/Sequence; pre-tokenizers ByteLevel,
 *   Digits, Split, Metaspace, Sequence; decoders ByteLevel, Metaspace, Replace, ByteFallback, Fuse,
 *   Strip, Sequence; post-processor TemplateProcessing (BOS = the special token before $A),
 *   ByteLevel, Sequence. Anything else is IG_ERR_UNSUPPORTED naming the JSON key. bos/eos come
 *   from tokenizer_config.json beside the file when present (else BOS from the template, EOS the
 *   first special one of </s>, <|endoftext|>, <|end_of_text|>, <|im_end|>, <eos>).
 * - GGUF: tokenizer.ggml.model "gpt2" (tokenizer.ggml.pre default/gpt2/gpt-2, smollm/starcoder,
 *   llama-bpe/llama3/llama-v3, qwen2; absent = default; any other value is an error naming the
 *   key and the value) or "llama" (merges by piece score, byte fallback, "\xe2\x96\x81" before
 *   every run of text when add_space_prefix, as Llama-2's tokenizer.json and llama.cpp do; this
 *   differs from transformers' own GGUF conversion, which uses Metaspace(prepend_scheme=first)).
 *   Token types 3 (control) and 4 (user-defined), and 2 (unknown) for "llama", are matched whole in
 *   the text. add_bos_token absent: on for "llama", off for "gpt2". */
#ifndef IG_TOKENIZER_H
#define IG_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/model/io/gguf.h"
#include "core/base/status.h"

typedef struct ig_tokenizer ig_tokenizer;

typedef enum ig_tokenizer_kind {
    IG_TOKENIZER_BYTE_BPE = 0, /* GPT-2 byte-level BPE */
    IG_TOKENIZER_SPM_BPE = 1,  /* SentencePiece BPE with byte fallback ("\xe2\x96\x81" for space) */
} ig_tokenizer_kind;

/* tokenizer.json of a Hugging Face model (path to the file, or to the directory holding it). */
ig_status ig_tokenizer_load_hf(const char *tokenizer_json_path, ig_tokenizer **out, ig_error *err);
/* tokenizer.ggml.* metadata of a GGUF file. */
ig_status ig_tokenizer_load_gguf(const ig_gguf *g, ig_tokenizer **out, ig_error *err);
void ig_tokenizer_free(ig_tokenizer *tok);

ig_tokenizer_kind ig_tokenizer_get_kind(const ig_tokenizer *tok);
int32_t ig_tokenizer_vocab_size(const ig_tokenizer *tok);
int32_t ig_tokenizer_bos(const ig_tokenizer *tok); /* -1 if the model has none */
int32_t ig_tokenizer_eos(const ig_tokenizer *tok); /* -1 if the model has none */
/* Whether the model's own convention prepends BOS when encoding a prompt. */
int ig_tokenizer_adds_bos(const ig_tokenizer *tok);

/* Encodes text (UTF-8, len bytes) into *ids (malloc'd, caller frees). Special/added tokens written
 * literally in the text are recognised as in Hugging Face. If add_bos is non-zero and the model has
 * a BOS token, it is prepended. */
ig_status ig_tokenizer_encode(const ig_tokenizer *tok, const char *text, size_t len, int add_bos,
                              int32_t **ids, size_t *n_ids, ig_error *err);

/* The bytes one token stands for (after byte-level / byte-fallback decoding), or NULL for an id out
 * of range. Special tokens return their text. Partial UTF-8 sequences are possible. */
const char *ig_tokenizer_token_bytes(const ig_tokenizer *tok, int32_t id, size_t *len);
/* Decodes a sequence of ids into a malloc'd NUL-terminated string (SentencePiece: a leading space
 * of the first token is dropped as Hugging Face does). */
ig_status ig_tokenizer_decode(const ig_tokenizer *tok, const int32_t *ids, size_t n, char **text,
                              ig_error *err);
/* Id of a token string in the vocabulary, or -1. */
int32_t ig_tokenizer_find(const ig_tokenizer *tok, const char *piece);
/* The token as the vocabulary spells it (byte-level: "\xc4\xa0the"; SentencePiece:
 * "\xe2\x96\x81the"), or NULL for an id out of range. Not NUL-terminated in general: use *len. */
const char *ig_tokenizer_token_text(const ig_tokenizer *tok, int32_t id, size_t *len);
/* Whether id is a special added token (control tokens such as BOS/EOS, <|im_start|>). */
int ig_tokenizer_is_special(const ig_tokenizer *tok, int32_t id);

#endif
