/* Internals shared by the tokenizer's files: the ig_tokenizer struct, hash maps, the PCRE2 patterns
 * (rewritten to match Oniguruma's Unicode classes), and the pipeline steps the two loaders fill in.
 * Nothing here is public API; nothing here may depend on the GGUF reader or json-c. */
#ifndef IG_TOKENIZER_INTERNAL_H
#define IG_TOKENIZER_INTERNAL_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/status.h"
#include "core/model/tokenizer/tokenizer.h"

/* Most token ids a tokenizer.json may leave unused below its largest id. */
#define IG_TOK_MAX_UNUSED_IDS 65536

/* ---- growable byte buffer ---- */
typedef struct ig_tok_buf {
    char *p;
    size_t n, cap;
} ig_tok_buf;
int ig_tok_buf_reserve(ig_tok_buf *b, size_t extra); /* 0 ok, -1 out of memory */
int ig_tok_buf_append(ig_tok_buf *b, const void *p, size_t n);
void ig_tok_buf_free(ig_tok_buf *b);

/* ---- string -> int32 map (owns copies of its keys; put overwrites, as a Rust HashMap insert) ----
 */
typedef struct ig_tok_strmap {
    ig_tok_buf pool;
    uint32_t *off, *len, *hash;
    int32_t *val;
    size_t n, cap;
    uint32_t *slots; /* entry index + 1; 0 = empty */
    size_t n_slots;  /* power of two */
} ig_tok_strmap;
int ig_tok_strmap_put(ig_tok_strmap *m, const char *key, size_t len, int32_t val);
int32_t ig_tok_strmap_get(const ig_tok_strmap *m, const char *key, size_t len); /* -1 if absent */
void ig_tok_strmap_free(ig_tok_strmap *m);
uint32_t ig_tok_hash(const char *p, size_t n);

/* ---- (left id, right id) -> (rank, merged id) ---- */
typedef struct ig_tok_pairmap {
    uint64_t *keys; /* UINT64_MAX = empty */
    uint32_t *rank;
    int32_t *merged;
    size_t n, n_slots;
} ig_tok_pairmap;
int ig_tok_pairmap_put(ig_tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged);
int ig_tok_pairmap_get(const ig_tok_pairmap *m, int32_t a, int32_t b, uint32_t *rank,
                       int32_t *merged); /* 1 found, 0 not */
void ig_tok_pairmap_free(ig_tok_pairmap *m);

/* ---- UTF-8 ---- */
/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 if it is not valid. */
size_t ig_tok_utf8_valid_len(const unsigned char *s, size_t n);
/* Offset of the first invalid byte, or n if all of s is valid UTF-8. */
size_t ig_tok_utf8_check(const char *s, size_t n);
/* Appends s to b as Rust's String::from_utf8_lossy does (each maximal invalid subpart -> U+FFFD).
 */
int ig_tok_utf8_lossy_append(ig_tok_buf *b, const char *s, size_t n);
size_t ig_tok_utf8_encode(uint32_t cp, char out[4]);
/* Decodes one code point of valid UTF-8; returns its length. */
size_t ig_tok_utf8_decode(const char *s, uint32_t *cp);
/* Unicode White_Space (what Oniguruma's and Rust's \s match). */
int ig_tok_is_white_space(uint32_t cp);

/* GPT-2 byte <-> char mapping: the char (code point) each byte is spelled with, and back. */
uint32_t ig_tok_byte_to_cp(uint8_t b);
int ig_tok_cp_to_byte(uint32_t cp); /* -1 if cp is not in the byte alphabet */

/* ---- patterns: a PCRE2 regex or a literal string ---- */
typedef struct ig_tok_pattern {
    pcre2_code *re; /* NULL for a literal */
    char *lit;      /* literal (not NUL-terminated in general), lit_len bytes */
    size_t lit_len;
} ig_tok_pattern;
/* Compiles an Oniguruma-syntax regex of tokenizers (\s, \p{L}, \p{N} rewritten to Unicode 16
 * classes as Oniguruma has them) or a literal. what names it in error messages. */
ig_status ig_tok_pattern_init(ig_tok_pattern *p, const char *src, size_t len, int is_regex,
                              const char *what, ig_error *err);
void ig_tok_pattern_free(ig_tok_pattern *p);

/* (start, end, is_match) segments covering a string, as tokenizers' Pattern::find_matches. */
typedef struct ig_tok_seg {
    size_t start, end;
    int is_match;
} ig_tok_seg;
typedef struct ig_tok_segvec {
    ig_tok_seg *v;
    size_t n, cap;
} ig_tok_segvec;
ig_status ig_tok_find_matches(const ig_tok_pattern *p, const char *s, size_t n,
                              pcre2_match_data *md, ig_tok_segvec *out, ig_error *err);

/* ---- pipeline steps ---- */
typedef enum ig_tok_split_behavior {
    IG_TOK_SPLIT_REMOVED,
    IG_TOK_SPLIT_ISOLATED,
    IG_TOK_SPLIT_MERGED_PREV,
    IG_TOK_SPLIT_MERGED_NEXT,
    IG_TOK_SPLIT_CONTIGUOUS,
} ig_tok_split_behavior;

typedef enum ig_tok_norm_type {
    IG_TOK_NORM_PREPEND, /* text: prepended to a non-empty string */
    IG_TOK_NORM_REPLACE, /* pattern -> text */
} ig_tok_norm_type;

typedef struct ig_tok_norm {
    ig_tok_norm_type type;
    ig_tok_pattern pattern;
    char *text;
    size_t text_len;
} ig_tok_norm;

typedef enum ig_tok_pretok_type {
    IG_TOK_PRE_SPLIT,     /* pattern + behavior + invert (Digits is a Split on numeric chars) */
    IG_TOK_PRE_BYTELEVEL, /* add_prefix_space, optional GPT-2 regex; must be the last step */
    IG_TOK_PRE_METASPACE, /* replacement, prepend scheme, split */
} ig_tok_pretok_type;

typedef enum ig_tok_prepend_scheme {
    IG_TOK_PREPEND_ALWAYS,
    IG_TOK_PREPEND_FIRST,
    IG_TOK_PREPEND_NEVER,
} ig_tok_prepend_scheme;

typedef struct ig_tok_pretok {
    ig_tok_pretok_type type;
    ig_tok_pattern pattern; /* Split; ByteLevel with use_regex */
    int has_pattern;
    ig_tok_split_behavior behavior;
    int invert;
    int add_prefix_space;          /* ByteLevel */
    char replacement[5];           /* Metaspace, UTF-8, NUL-terminated */
    ig_tok_prepend_scheme prepend; /* Metaspace */
    int split;                     /* Metaspace */
} ig_tok_pretok;

typedef enum ig_tok_dec_type {
    IG_TOK_DEC_BYTELEVEL,
    IG_TOK_DEC_METASPACE,
    IG_TOK_DEC_REPLACE,
    IG_TOK_DEC_BYTEFALLBACK,
    IG_TOK_DEC_FUSE,
    IG_TOK_DEC_STRIP,
} ig_tok_dec_type;

typedef struct ig_tok_dec {
    ig_tok_dec_type type;
    ig_tok_pattern pattern; /* Replace */
    char *text;             /* Replace content */
    size_t text_len;
    char replacement[5];            /* Metaspace */
    ig_tok_prepend_scheme prepend;  /* Metaspace */
    uint32_t strip_cp;              /* Strip content */
    size_t strip_start, strip_stop; /* Strip */
} ig_tok_dec;

typedef struct ig_tok_added {
    int32_t id;
    char *content; /* as written in the text */
    size_t len;
    char *norm; /* content after the normalizers (for normalized tokens), else NULL */
    size_t norm_len;
    uint8_t special, normalized, lstrip, rstrip, single_word;
} ig_tok_added;

/* Byte trie for leftmost-longest matching of added tokens. */
typedef struct ig_tok_trie {
    ig_tok_pairmap edges; /* (node, byte) -> child node */
    int32_t *term;        /* per node: index into added[] or -1 */
    size_t n_nodes, cap;
    uint8_t first[256]; /* bytes that start some token */
} ig_tok_trie;

typedef enum ig_tok_bpe_mode {
    IG_TOK_BPE_RANKS,  /* Hugging Face BPE: merges by rank */
    IG_TOK_BPE_SCORES, /* SentencePiece / llama.cpp: merge the pair whose join has the best score */
} ig_tok_bpe_mode;

struct ig_tokenizer {
    ig_tokenizer_kind kind;
    int byte_level; /* BPE symbols are raw bytes (model keys in bytes_map) */

    int32_t n_vocab;      /* ids are 0 .. n_vocab-1 */
    ig_tok_buf text_pool; /* token text as written in the vocabulary (added: content) */
    uint32_t *text_off, *text_len;
    uint8_t *present;      /* 0 for holes in the id space */
    int32_t *added_of;     /* id -> index in added[] or -1 */
    ig_tok_buf bytes_pool; /* what each token decodes to on its own */
    uint32_t *bytes_off, *bytes_len;

    ig_tok_strmap vocab_map; /* model vocabulary: token text -> id */
    ig_tok_strmap bytes_map; /* byte-level: raw bytes of a vocab token -> id */
    ig_tok_strmap added_map; /* added token content -> id */

    /* BPE model */
    ig_tok_bpe_mode bpe_mode;
    ig_tok_pairmap merges;
    float *scores; /* IG_TOK_BPE_SCORES: per id */
    int byte_fallback, fuse_unk, ignore_merges;
    int32_t unk_id;
    int32_t byte_ids[256]; /* byte-level: the single-byte token; byte fallback: <0xXX>; -1 */

    ig_tok_added *added;
    size_t n_added;
    ig_tok_trie trie_raw;  /* added tokens with normalized = false, matched in the raw text */
    ig_tok_trie trie_norm; /* normalized = true, matched in normalized text */
    int has_trie_raw, has_trie_norm;
    pcre2_code *word_re; /* \w, for single_word */

    ig_tok_norm *norms;
    size_t n_norms;
    ig_tok_pretok *pretoks;
    size_t n_pretoks;
    ig_tok_dec *decs;
    size_t n_decs;
    int has_decoder;

    int32_t bos, eos;
    int adds_bos;
};

/* Loader helpers (tokenizer.c). */
ig_tokenizer *ig_tok_alloc(ig_error *err);
/* Sets the id space and the text of each id; call once. */
ig_status ig_tok_set_vocab_size(ig_tokenizer *t, int32_t n, ig_error *err);
ig_status ig_tok_set_token(ig_tokenizer *t, int32_t id, const char *text, size_t len,
                           ig_error *err);
/* Added token (id must already have been sized). Takes copies. */
ig_status ig_tok_add_added(ig_tokenizer *t, const ig_tok_added *a, ig_error *err);
/* After everything is set: maps, byte ids, tries, normalized added tokens, per-token bytes. */
ig_status ig_tok_finish(ig_tokenizer *t, const char *what, ig_error *err);
/* Normalizers applied to s (into b, replacing its contents). */
ig_status ig_tok_normalize(const ig_tokenizer *t, const char *s, size_t n, ig_tok_buf *b,
                           pcre2_match_data *md, ig_error *err);

/* Regex sources used by both loaders. */
extern const char *const IG_TOK_GPT2_REGEX;
extern const char *const IG_TOK_LLAMA3_REGEX;
extern const char *const IG_TOK_QWEN2_REGEX;
/* One numeric character, as Rust's char::is_numeric (tokenizers' Digits pre-tokenizer). */
extern const char *const IG_TOK_NUMERIC_REGEX;
ig_status ig_tok_pretok_digits(ig_tok_pretok *p, int individual, ig_error *err);
ig_status ig_tok_pretok_bytelevel(ig_tok_pretok *p, int add_prefix_space, int use_regex,
                                  ig_error *err);

#endif
