/* Building blocks of the tokenizer: byte buffers, hash maps, UTF-8 helpers, the GPT-2 byte alphabet
 * and regex patterns that reproduce tokenizers' Oniguruma matching with PCRE2. These functions know
 * nothing of tokenizer.json or GGUF; they never print and never abort on bad input. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/tokenizer/tokenizer_internal.h"

/* ---------------------------------------------------------------------------------------------- */
/* buffers */

int ig_tok_buf_reserve(ig_tok_buf *b, size_t extra) {
    if (extra > SIZE_MAX / 4 - b->n) return -1; /* a length that wrapped: never satisfiable */
    if (b->n + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int ig_tok_buf_append(ig_tok_buf *b, const void *p, size_t n) {
    if (ig_tok_buf_reserve(b, n + 1)) return -1;
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

void ig_tok_buf_free(ig_tok_buf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* string map */

uint32_t ig_tok_hash(const char *p, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 16777619u;
    }
    return h;
}

static int strmap_grow_slots(ig_tok_strmap *m) {
    size_t ns = m->n_slots ? m->n_slots * 2 : 64;
    uint32_t *slots = calloc(ns, sizeof *slots);
    if (!slots) return -1;
    for (size_t e = 0; e < m->n; e++) {
        size_t i = m->hash[e] & (ns - 1);
        while (slots[i]) i = (i + 1) & (ns - 1);
        slots[i] = (uint32_t)(e + 1);
    }
    free(m->slots);
    m->slots = slots;
    m->n_slots = ns;
    return 0;
}

static int64_t strmap_find(const ig_tok_strmap *m, const char *key, size_t len, uint32_t h,
                           size_t *slot) {
    if (!m->n_slots) return -1;
    size_t i = h & (m->n_slots - 1);
    while (m->slots[i]) {
        size_t e = m->slots[i] - 1;
        if (m->hash[e] == h && m->len[e] == len && !memcmp(m->pool.p + m->off[e], key, len))
            return (int64_t)e;
        i = (i + 1) & (m->n_slots - 1);
    }
    if (slot) *slot = i;
    return -1;
}

int ig_tok_strmap_put(ig_tok_strmap *m, const char *key, size_t len, int32_t val) {
    uint32_t h = ig_tok_hash(key, len);
    int64_t e = strmap_find(m, key, len, h, NULL);
    if (e >= 0) {
        m->val[e] = val;
        return 0;
    }
    if ((m->n + 1) * 2 > m->n_slots && strmap_grow_slots(m)) return -1;
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        uint32_t *off = realloc(m->off, cap * sizeof *off);
        if (!off) return -1;
        m->off = off;
        uint32_t *ln = realloc(m->len, cap * sizeof *ln);
        if (!ln) return -1;
        m->len = ln;
        uint32_t *hs = realloc(m->hash, cap * sizeof *hs);
        if (!hs) return -1;
        m->hash = hs;
        int32_t *vs = realloc(m->val, cap * sizeof *vs);
        if (!vs) return -1;
        m->val = vs;
        m->cap = cap;
    }
    if (m->pool.n + len > UINT32_MAX || len > UINT32_MAX) return -1;
    size_t off = m->pool.n;
    if (ig_tok_buf_append(&m->pool, key, len)) return -1;
    size_t slot = 0;
    strmap_find(m, key, len, h, &slot);
    m->off[m->n] = (uint32_t)off;
    m->len[m->n] = (uint32_t)len;
    m->hash[m->n] = h;
    m->val[m->n] = val;
    m->n++;
    m->slots[slot] = (uint32_t)m->n;
    return 0;
}

int32_t ig_tok_strmap_get(const ig_tok_strmap *m, const char *key, size_t len) {
    int64_t e = strmap_find(m, key, len, ig_tok_hash(key, len), NULL);
    return e < 0 ? -1 : m->val[e];
}

void ig_tok_strmap_free(ig_tok_strmap *m) {
    ig_tok_buf_free(&m->pool);
    free(m->off);
    free(m->len);
    free(m->hash);
    free(m->val);
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------------------------------------- */
/* pair map */

static uint64_t pair_key(int32_t a, int32_t b) {
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

static size_t pair_slot(uint64_t k, size_t n_slots) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k & (n_slots - 1);
}

int ig_tok_pairmap_put(ig_tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged) {
    if ((m->n + 1) * 2 > m->n_slots) {
        size_t ns = m->n_slots ? m->n_slots * 2 : 64;
        uint64_t *keys = malloc(ns * sizeof *keys);
        uint32_t *rk = malloc(ns * sizeof *rk);
        int32_t *mg = malloc(ns * sizeof *mg);
        if (!keys || !rk || !mg) {
            free(keys);
            free(rk);
            free(mg);
            return -1;
        }
        for (size_t i = 0; i < ns; i++) keys[i] = UINT64_MAX;
        for (size_t i = 0; i < m->n_slots; i++) {
            if (m->keys[i] == UINT64_MAX) continue;
            size_t j = pair_slot(m->keys[i], ns);
            while (keys[j] != UINT64_MAX) j = (j + 1) & (ns - 1);
            keys[j] = m->keys[i];
            rk[j] = m->rank[i];
            mg[j] = m->merged[i];
        }
        free(m->keys);
        free(m->rank);
        free(m->merged);
        m->keys = keys;
        m->rank = rk;
        m->merged = mg;
        m->n_slots = ns;
    }
    uint64_t k = pair_key(a, b);
    size_t j = pair_slot(k, m->n_slots);
    while (m->keys[j] != UINT64_MAX && m->keys[j] != k) j = (j + 1) & (m->n_slots - 1);
    if (m->keys[j] == UINT64_MAX) m->n++;
    m->keys[j] = k;
    m->rank[j] = rank;
    m->merged[j] = merged;
    return 0;
}

int ig_tok_pairmap_get(const ig_tok_pairmap *m, int32_t a, int32_t b, uint32_t *rank,
                       int32_t *merged) {
    if (!m->n_slots) return 0;
    uint64_t k = pair_key(a, b);
    size_t j = pair_slot(k, m->n_slots);
    while (m->keys[j] != UINT64_MAX) {
        if (m->keys[j] == k) {
            if (rank) *rank = m->rank[j];
            if (merged) *merged = m->merged[j];
            return 1;
        }
        j = (j + 1) & (m->n_slots - 1);
    }
    return 0;
}

void ig_tok_pairmap_free(ig_tok_pairmap *m) {
    free(m->keys);
    free(m->rank);
    free(m->merged);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------------------------------------- */
/* UTF-8 */

size_t ig_tok_utf8_valid_len(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

size_t ig_tok_utf8_check(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = ig_tok_utf8_valid_len(u + i, n - i);
        if (!l) return i;
        i += l;
    }
    return n;
}

/* Length of the maximal prefix of an ill-formed sequence at s that could start a valid one (at
 * least 1): Unicode's "maximal subpart", which is what Rust's from_utf8_lossy replaces. */
static size_t utf8_maximal_subpart(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 1;
    }
    size_t i = 1;
    if (i < n && i < len && s[i] >= lo && s[i] <= hi) {
        i++;
        while (i < n && i < len && (s[i] & 0xC0) == 0x80) i++;
    }
    return i;
}

int ig_tok_utf8_lossy_append(ig_tok_buf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0;
    while (i < n) {
        size_t l = u[i] < 0x80 ? 1 : ig_tok_utf8_valid_len(u + i, n - i);
        if (l) {
            i += l;
            continue;
        }
        if (ig_tok_buf_append(b, s + run, i - run)) return -1;
        if (ig_tok_buf_append(b, "\xEF\xBF\xBD", 3)) return -1;
        i += utf8_maximal_subpart(u + i, n - i);
        run = i;
    }
    return ig_tok_buf_append(b, s + run, n - run);
}

size_t ig_tok_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t ig_tok_utf8_decode(const char *s, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    }
    if (u[0] < 0xE0) {
        *cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
        return 2;
    }
    if (u[0] < 0xF0) {
        *cp = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
          ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    return 4;
}

int ig_tok_is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes are
 * spelled 256, 257, ... in byte order. */
static int byte_printable(unsigned b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t ig_tok_byte_to_cp(uint8_t b) {
    if (byte_printable(b)) return b;
    uint32_t n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!byte_printable(x)) n++;
    return 256 + n;
}

int ig_tok_cp_to_byte(uint32_t cp) {
    if (cp < 256) return byte_printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    uint32_t n = 0;
    for (unsigned x = 0; x < 256; x++) {
        if (byte_printable(x)) continue;
        if (256 + n == cp) return (int)x;
        n++;
    }
    return -1;
}

/* ---------------------------------------------------------------------------------------------- */
/* patterns */

/* tokenizers matches with Oniguruma (Unicode 16 tables); the system PCRE2 may have older tables
 * (10.42: Unicode 14) and counts U+180E as \s. So \s, \S, \p{L}, \p{N} are rewritten to explicit
 * classes: White_Space exactly, and the letters/numbers Unicode 15.0-16.0 added. Measured against
 * tokenizers 0.23 over every code point (see tools/reference/make_tokenizer_fixtures.py). */
#define WS_ITEMS                                                                                   \
    "\\x{9}-\\x{d}\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}"    \
    "\\x{205f}\\x{3000}"
#define L_EXTRA                                                                                    \
    "\\x{1c89}-\\x{1c8a}\\x{a7cb}-\\x{a7cd}\\x{a7da}-\\x{a7dc}\\x{105c0}-\\x{105f3}\\x{10d4a}-"    \
    "\\x{10d65}\\x{10d6f}-\\x{10d85}\\x{10ec2}-\\x{10ec4}\\x{1123f}-\\x{11240}\\x{11380}-"         \
    "\\x{11389}\\x{1138b}\\x{1138e}\\x{11390}-\\x{113b5}\\x{113b7}\\x{113d1}\\x{113d3}\\x{11bc0}-" \
    "\\x{11be0}\\x{11f02}\\x{11f04}-\\x{11f10}\\x{11f12}-\\x{11f33}\\x{1342f}\\x{13441}-"          \
    "\\x{13446}\\x{13460}-\\x{143fa}\\x{16100}-\\x{1611d}\\x{16d40}-\\x{16d6c}\\x{18cff}"          \
    "\\x{1b132}\\x{1b155}\\x{1df25}-\\x{1df2a}\\x{1e030}-\\x{1e06d}\\x{1e4d0}-\\x{1e4eb}"          \
    "\\x{1e5d0}-\\x{1e5ed}\\x{1e5f0}\\x{2b739}\\x{2ebf0}-\\x{2ee5d}\\x{31350}-\\x{323af}"
#define N_EXTRA                                                                                    \
    "\\x{10d40}-\\x{10d49}\\x{116d0}-\\x{116e3}\\x{11bf0}-\\x{11bf9}\\x{11f50}-\\x{11f59}"         \
    "\\x{16130}-\\x{16139}\\x{16d70}-\\x{16d79}\\x{1ccf0}-\\x{1ccf9}\\x{1d2c0}-\\x{1d2d3}"         \
    "\\x{1e4f0}-\\x{1e4f9}\\x{1e5f1}-\\x{1e5fa}"

const char *const IG_TOK_GPT2_REGEX =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char *const IG_TOK_LLAMA3_REGEX =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char *const IG_TOK_QWEN2_REGEX =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* Rust's char::is_numeric (Nd, Nl, No) has Unicode 17 tables in tokenizers 0.23: \p{N} of
 * Oniguruma plus Tolong Siki digits and three Tangut numerals. */
const char *const IG_TOK_NUMERIC_REGEX =
    "[\\p{N}" N_EXTRA "\\x{11de0}-\\x{11de9}\\x{16ff4}-\\x{16ff6}]";

static int append_str(ig_tok_buf *b, const char *s) {
    return ig_tok_buf_append(b, s, strlen(s));
}

/* Rewrites \s \S \p{L} \P{L} \p{N} \P{N} (see above); everything else is copied. */
static int rewrite_onig(const char *s, size_t n, ig_tok_buf *out) {
    int in_class = 0;
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        if (c == '\\' && i + 1 < n) {
            char d = s[i + 1];
            if (d == 's') {
                if (append_str(out, in_class ? WS_ITEMS : "[" WS_ITEMS "]")) return -1;
                i += 2;
                continue;
            }
            if (d == 'S' && !in_class) {
                if (append_str(out, "[^" WS_ITEMS "]")) return -1;
                i += 2;
                continue;
            }
            if ((d == 'p' || d == 'P') && i + 4 < n && s[i + 2] == '{' && s[i + 4] == '}' &&
                (s[i + 3] == 'L' || s[i + 3] == 'N')) {
                const char *extra = s[i + 3] == 'L' ? L_EXTRA : N_EXTRA;
                const char *prop = s[i + 3] == 'L' ? "\\p{L}" : "\\p{N}";
                if (in_class && d == 'P') {
                    if (ig_tok_buf_append(out, s + i, 5)) return -1;
                } else {
                    if (!in_class && append_str(out, d == 'p' ? "[" : "[^")) return -1;
                    if (append_str(out, prop) || append_str(out, extra)) return -1;
                    if (!in_class && append_str(out, "]")) return -1;
                }
                i += 5;
                continue;
            }
            if (ig_tok_buf_append(out, s + i, 2)) return -1;
            i += 2;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            if (ig_tok_buf_append(out, s + i, 1)) return -1;
            i++;
            if (i < n && s[i] == '^') {
                if (ig_tok_buf_append(out, s + i, 1)) return -1;
                i++;
            }
            if (i < n && s[i] == ']') { /* a literal ] first in a class */
                if (ig_tok_buf_append(out, s + i, 1)) return -1;
                i++;
            }
            continue;
        }
        if (c == '[' && in_class && i + 1 < n && s[i + 1] == ':') { /* [:alpha:] */
            const char *end = NULL;
            for (size_t j = i + 2; j + 1 < n; j++)
                if (s[j] == ':' && s[j + 1] == ']') {
                    end = s + j + 2;
                    break;
                }
            if (end) {
                if (ig_tok_buf_append(out, s + i, (size_t)(end - (s + i)))) return -1;
                i = (size_t)(end - s);
                continue;
            }
        }
        if (c == ']' && in_class) in_class = 0;
        if (ig_tok_buf_append(out, s + i, 1)) return -1;
        i++;
    }
    return ig_tok_buf_append(out, "", 0);
}

ig_status ig_tok_pattern_init(ig_tok_pattern *p, const char *src, size_t len, int is_regex,
                              const char *what, ig_error *err) {
    memset(p, 0, sizeof *p);
    if (!is_regex) {
        p->lit = malloc(len + 1);
        if (!p->lit) return ig_error_set(err, IG_ERR_NOMEM, "%s: out of memory", what);
        memcpy(p->lit, src, len);
        p->lit[len] = '\0';
        p->lit_len = len;
        return IG_OK;
    }
    if (ig_tok_utf8_check(src, len) != len)
        return ig_error_set(err, IG_ERR_FORMAT, "%s: regex is not valid UTF-8", what);
    ig_tok_buf rw = {0};
    if (rewrite_onig(src, len, &rw)) {
        ig_tok_buf_free(&rw);
        return ig_error_set(err, IG_ERR_NOMEM, "%s: out of memory", what);
    }
    int ec;
    PCRE2_SIZE eo;
    p->re = pcre2_compile((PCRE2_SPTR)rw.p, rw.n, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    ig_tok_buf_free(&rw);
    if (!p->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return ig_error_set(err, IG_ERR_FORMAT, "%s: regex '%.*s' does not compile: %s", what,
                            (int)(len > 200 ? 200 : len), src, (const char *)msg);
    }
    (void)pcre2_jit_compile(p->re, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
    return IG_OK;
}

void ig_tok_pattern_free(ig_tok_pattern *p) {
    if (p->re) pcre2_code_free(p->re);
    free(p->lit);
    memset(p, 0, sizeof *p);
}

static int seg_push(ig_tok_segvec *v, size_t start, size_t end, int is_match) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        ig_tok_seg *nv = realloc(v->v, cap * sizeof *nv);
        if (!nv) return -1;
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = (ig_tok_seg){start, end, is_match};
    return 0;
}

/* Bounds on one regex search, so that a pattern from a hostile tokenizer.json that backtracks
 * catastrophically fails with a message instead of running for hours (PCRE2's defaults are 10
 * million match steps and a depth of 10 million; real tokenizer regexes need a few hundred steps
 * per piece). */
#define IG_TOK_MATCH_LIMIT 1000000u
#define IG_TOK_DEPTH_LIMIT 10000u
static pcre2_match_context *g_match_ctx;
static pthread_once_t g_match_once = PTHREAD_ONCE_INIT;
static void match_ctx_init(void) {
    g_match_ctx = pcre2_match_context_create(NULL);
    if (!g_match_ctx) return;
    pcre2_set_match_limit(g_match_ctx, IG_TOK_MATCH_LIMIT);
    pcre2_set_depth_limit(g_match_ctx, IG_TOK_DEPTH_LIMIT);
}

/* One search from `from`: 1 with [*ms, *me), 0 for no match, negative PCRE2 error. */
static int pattern_search(const ig_tok_pattern *p, const char *s, size_t n, size_t from,
                          pcre2_match_data *md, size_t *ms, size_t *me) {
    if (!p->re) {
        if (p->lit_len == 0 || from >= n || n - from < p->lit_len) return 0;
        const char *hit = memmem(s + from, n - from, p->lit, p->lit_len);
        if (!hit) return 0;
        *ms = (size_t)(hit - s);
        *me = *ms + p->lit_len;
        return 1;
    }
    pthread_once(&g_match_once, match_ctx_init);
    int rc = pcre2_match(p->re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, md, g_match_ctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(p->re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                         g_match_ctx);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) return rc;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *ms = ov[0];
    *me = ov[1];
    return 1;
}

ig_status ig_tok_find_matches(const ig_tok_pattern *p, const char *s, size_t n,
                              pcre2_match_data *md, ig_tok_segvec *out, ig_error *err) {
    out->n = 0;
    if (n == 0) {
        if (seg_push(out, 0, 0, 0)) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        return IG_OK;
    }
    /* The regexes are matched with PCRE2_NO_UTF_CHECK, which makes invalid UTF-8 undefined
     * behaviour (matches ending past the text): check here, once per text. */
    if (p->re) {
        size_t ok = ig_tok_utf8_check(s, n);
        if (ok != n)
            return ig_error_set(err, IG_ERR_FORMAT,
                                "tokenizer: text to match is not valid UTF-8 (byte 0x%02X at "
                                "offset %zu of %zu)",
                                (unsigned char)s[ok], ok, n);
    }
    /* Oniguruma's find_iter as the onig crate drives it: an empty match right where the previous
     * match ended is skipped by stepping one character. */
    size_t prev = 0, last_end = 0;
    int have_last = 0;
    size_t last_match_end = 0;
    while (last_end <= n) {
        size_t ms, me;
        int rc = pattern_search(p, s, n, last_end, md, &ms, &me);
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT)
                return ig_error_set(err, IG_ERR_CAPACITY,
                                    "tokenizer: a regex of the tokenizer needed more than %u "
                                    "match steps on a %zu-byte text (catastrophic backtracking?)",
                                    IG_TOK_MATCH_LIMIT, n);
            return ig_error_set(err, IG_ERR_INTERNAL, "regex match failed: %s", (const char *)msg);
        }
        if (rc == 0) break;
        if (ms == me && have_last && last_match_end == me) {
            if (last_end >= n) break;
            uint32_t cp;
            last_end += ig_tok_utf8_decode(s + last_end, &cp);
            continue;
        }
        last_end = me;
        last_match_end = me;
        have_last = 1;
        if (prev != ms && seg_push(out, prev, ms, 0))
            return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        if (seg_push(out, ms, me, 1)) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        prev = me;
    }
    if (prev != n && seg_push(out, prev, n, 0))
        return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    return IG_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* common pre-tokenizers */

ig_status ig_tok_pretok_digits(ig_tok_pretok *p, int individual, ig_error *err) {
    memset(p, 0, sizeof *p);
    p->type = IG_TOK_PRE_SPLIT;
    p->has_pattern = 1;
    p->behavior = individual ? IG_TOK_SPLIT_ISOLATED : IG_TOK_SPLIT_CONTIGUOUS;
    return ig_tok_pattern_init(&p->pattern, IG_TOK_NUMERIC_REGEX, strlen(IG_TOK_NUMERIC_REGEX), 1,
                               "Digits", err);
}

ig_status ig_tok_pretok_bytelevel(ig_tok_pretok *p, int add_prefix_space, int use_regex,
                                  ig_error *err) {
    memset(p, 0, sizeof *p);
    p->type = IG_TOK_PRE_BYTELEVEL;
    p->add_prefix_space = add_prefix_space;
    p->behavior = IG_TOK_SPLIT_ISOLATED;
    if (!use_regex) return IG_OK;
    p->has_pattern = 1;
    return ig_tok_pattern_init(&p->pattern, IG_TOK_GPT2_REGEX, strlen(IG_TOK_GPT2_REGEX), 1,
                               "ByteLevel", err);
}
