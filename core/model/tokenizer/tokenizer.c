/* The tokenizer pipeline of Hugging Face `tokenizers` for BPE models: added tokens split out of the
 * raw text, normalizers, pre-tokenizers, the BPE model (merge ranks, or SentencePiece scores for
 * GGUF "llama" vocabularies), and the decoder chain. The loaders (tokenizer_hf.c, tokenizer_gguf.c)
 * only fill in the struct; everything that runs per call is here and keeps no state between calls,
 * so one ig_tokenizer can be shared by threads. */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/model/tokenizer/tokenizer_internal.h"

/* ---------------------------------------------------------------------------------------------- */
/* construction */

ig_tokenizer *ig_tok_alloc(ig_error *err) {
    ig_tokenizer *t = ig_calloc(1, sizeof *t, err);
    if (!t) return NULL;
    t->bos = t->eos = t->unk_id = -1;
    for (int i = 0; i < 256; i++) t->byte_ids[i] = -1;
    return t;
}

ig_status ig_tok_set_vocab_size(ig_tokenizer *t, int32_t n, ig_error *err) {
    IG_ASSERT(!t->text_off && n >= 0);
    size_t m = n ? (size_t)n : 1;
    t->n_vocab = n;
    t->text_off = calloc(m, sizeof *t->text_off);
    t->text_len = calloc(m, sizeof *t->text_len);
    t->present = calloc(m, 1);
    t->added_of = malloc(m * sizeof *t->added_of);
    if (!t->text_off || !t->text_len || !t->present || !t->added_of)
        return ig_error_set(err, IG_ERR_NOMEM, "out of memory for a vocabulary of %d", n);
    for (size_t i = 0; i < m; i++) t->added_of[i] = -1;
    return IG_OK;
}

ig_status ig_tok_set_token(ig_tokenizer *t, int32_t id, const char *text, size_t len,
                           ig_error *err) {
    IG_ASSERT(id >= 0 && id < t->n_vocab);
    if (t->text_pool.n + len > UINT32_MAX)
        return ig_error_set(err, IG_ERR_CAPACITY, "vocabulary text larger than 4 GiB");
    size_t off = t->text_pool.n;
    if (ig_tok_buf_append(&t->text_pool, text, len))
        return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    t->text_off[id] = (uint32_t)off;
    t->text_len[id] = (uint32_t)len;
    t->present[id] = 1;
    return IG_OK;
}

ig_status ig_tok_add_added(ig_tokenizer *t, const ig_tok_added *a, ig_error *err) {
    IG_ASSERT(a->id >= 0 && a->id < t->n_vocab);
    ig_tok_added *v = realloc(t->added, (t->n_added + 1) * sizeof *v);
    if (!v) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    t->added = v;
    ig_tok_added *d = &t->added[t->n_added];
    *d = *a;
    d->norm = NULL;
    d->norm_len = 0;
    d->content = malloc(a->len + 1);
    if (!d->content) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    memcpy(d->content, a->content, a->len);
    d->content[a->len] = '\0';
    t->n_added++;
    /* Like AddedVocabulary: the id's text is the added token's content. */
    return ig_tok_set_token(t, a->id, a->content, a->len, err);
}

static void trie_free(ig_tok_trie *tr) {
    ig_tok_pairmap_free(&tr->edges);
    free(tr->term);
    memset(tr, 0, sizeof *tr);
}

static int trie_node(ig_tok_trie *tr) {
    if (tr->n_nodes == tr->cap) {
        size_t cap = tr->cap ? tr->cap * 2 : 64;
        int32_t *term = realloc(tr->term, cap * sizeof *term);
        if (!term) return -1;
        tr->term = term;
        tr->cap = cap;
    }
    tr->term[tr->n_nodes] = -1;
    return (int)tr->n_nodes++;
}

static int trie_insert(ig_tok_trie *tr, const char *s, size_t n, int32_t idx) {
    if (tr->n_nodes == 0 && trie_node(tr) < 0) return -1;
    if (n == 0) return 0; /* tokenizers ignores empty added tokens */
    tr->first[(unsigned char)s[0]] = 1;
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t child;
        if (!ig_tok_pairmap_get(&tr->edges, node, (unsigned char)s[i], NULL, &child)) {
            int c = trie_node(tr);
            if (c < 0) return -1;
            child = c;
            if (ig_tok_pairmap_put(&tr->edges, node, (unsigned char)s[i], 0, child)) return -1;
        }
        node = child;
    }
    /* Two added tokens with the same text: the later one wins, as in a Rust map. */
    tr->term[node] = idx;
    return 0;
}

/* Leftmost-longest match at or after `from` (daachorse MatchKind::LeftmostLongest). */
static int trie_find(const ig_tok_trie *tr, const char *s, size_t n, size_t from, size_t *ms,
                     size_t *me, int32_t *idx) {
    for (size_t i = from; i < n; i++) {
        if (!tr->first[(unsigned char)s[i]]) continue;
        int32_t node = 0, best = -1;
        size_t best_end = 0;
        for (size_t j = i; j < n; j++) {
            int32_t child;
            if (!ig_tok_pairmap_get(&tr->edges, node, (unsigned char)s[j], NULL, &child)) break;
            node = child;
            if (tr->term[node] >= 0) {
                best = tr->term[node];
                best_end = j + 1;
            }
        }
        if (best >= 0) {
            *ms = i;
            *me = best_end;
            *idx = best;
            return 1;
        }
    }
    return 0;
}

/* What one token stands for on its own: the decoder chain applied to that token alone, without
 * the steps that depend on its neighbours (Strip, Fuse), without the first-token rule of Metaspace,
 * with byte tokens kept as raw bytes (no replacement character). */
static ig_status token_piece(const ig_tokenizer *t, int32_t id, ig_tok_buf *out,
                             pcre2_match_data *md, ig_error *err);

ig_status ig_tok_finish(ig_tokenizer *t, const char *what, ig_error *err) {
    /* byte-level: the model's keys as raw bytes */
    if (t->byte_level) {
        ig_tok_buf tmp = {0};
        for (size_t e = 0; e < t->vocab_map.n; e++) {
            const char *k = t->vocab_map.pool.p + t->vocab_map.off[e];
            size_t kl = t->vocab_map.len[e], i = 0;
            tmp.n = 0;
            int ok = 1;
            while (i < kl) {
                uint32_t cp;
                i += ig_tok_utf8_decode(k + i, &cp);
                int b = ig_tok_cp_to_byte(cp);
                if (b < 0) {
                    ok = 0;
                    break;
                }
                char c = (char)b;
                if (ig_tok_buf_append(&tmp, &c, 1)) {
                    ig_tok_buf_free(&tmp);
                    return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
                }
            }
            /* A token outside the byte alphabet can never come out of merging bytes. */
            if (ok &&
                ig_tok_strmap_put(&t->bytes_map, tmp.p ? tmp.p : "", tmp.n, t->vocab_map.val[e])) {
                ig_tok_buf_free(&tmp);
                return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
            }
        }
        ig_tok_buf_free(&tmp);
        for (int b = 0; b < 256; b++) {
            char c = (char)b;
            t->byte_ids[b] = ig_tok_strmap_get(&t->bytes_map, &c, 1);
        }
    } else {
        for (int b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            t->byte_ids[b] = ig_tok_strmap_get(&t->vocab_map, name, 6);
        }
    }

    /* added tokens: lookup map, their normalized spelling, the two tries */
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    ig_tok_buf nb = {0};
    ig_status rc = IG_OK;
    int need_word_re = 0;
    for (size_t i = 0; i < t->n_added && rc == IG_OK; i++) {
        ig_tok_added *a = &t->added[i];
        t->added_of[a->id] = (int32_t)i;
        if (ig_tok_strmap_put(&t->added_map, a->content, a->len, a->id)) {
            rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
            break;
        }
        if (a->single_word) need_word_re = 1;
        if (a->len == 0) continue;
        if (!a->normalized) {
            t->has_trie_raw = 1;
            if (trie_insert(&t->trie_raw, a->content, a->len, (int32_t)i))
                rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
            continue;
        }
        const char *pat = a->content;
        size_t pl = a->len;
        if (t->n_norms) {
            rc = ig_tok_normalize(t, a->content, a->len, &nb, md, err);
            if (rc != IG_OK) break;
            if (nb.n != a->len || memcmp(nb.p, a->content, a->len)) {
                a->norm = malloc(nb.n + 1);
                if (!a->norm) {
                    rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
                    break;
                }
                memcpy(a->norm, nb.p, nb.n);
                a->norm[nb.n] = '\0';
                a->norm_len = nb.n;
                pat = a->norm;
                pl = a->norm_len;
            }
        }
        t->has_trie_norm = 1;
        if (trie_insert(&t->trie_norm, pat, pl, (int32_t)i))
            rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }
    /* Added tokens sharing content: the last one is what the maps hold, as in tokenizers. */
    for (size_t i = 0; i < t->n_added && rc == IG_OK; i++) t->added_of[t->added[i].id] = (int32_t)i;

    if (rc == IG_OK && need_word_re) {
        int ec;
        PCRE2_SIZE eo;
        t->word_re = pcre2_compile((PCRE2_SPTR) "\\w", 2, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
        if (!t->word_re) rc = ig_error_set(err, IG_ERR_INTERNAL, "cannot compile \\w");
    }

    /* what each token decodes to on its own */
    if (rc == IG_OK) {
        t->bytes_off = calloc(t->n_vocab ? (size_t)t->n_vocab : 1, sizeof *t->bytes_off);
        t->bytes_len = calloc(t->n_vocab ? (size_t)t->n_vocab : 1, sizeof *t->bytes_len);
        if (!t->bytes_off || !t->bytes_len) rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }
    for (int32_t id = 0; id < t->n_vocab && rc == IG_OK; id++) {
        if (!t->present[id]) continue;
        nb.n = 0;
        rc = token_piece(t, id, &nb, md, err);
        if (rc != IG_OK) break;
        if (t->bytes_pool.n + nb.n > UINT32_MAX) {
            rc = ig_error_set(err, IG_ERR_CAPACITY, "decoded vocabulary larger than 4 GiB");
            break;
        }
        t->bytes_off[id] = (uint32_t)t->bytes_pool.n;
        t->bytes_len[id] = (uint32_t)nb.n;
        if (ig_tok_buf_append(&t->bytes_pool, nb.p ? nb.p : "", nb.n))
            rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }
    ig_tok_buf_free(&nb);
    pcre2_match_data_free(md);
    if (rc != IG_OK) ig_error_prefix(err, "%s: ", what);
    return rc;
}

void ig_tokenizer_free(ig_tokenizer *t) {
    if (!t) return;
    ig_tok_buf_free(&t->text_pool);
    free(t->text_off);
    free(t->text_len);
    free(t->present);
    free(t->added_of);
    ig_tok_buf_free(&t->bytes_pool);
    free(t->bytes_off);
    free(t->bytes_len);
    ig_tok_strmap_free(&t->vocab_map);
    ig_tok_strmap_free(&t->bytes_map);
    ig_tok_strmap_free(&t->added_map);
    ig_tok_pairmap_free(&t->merges);
    free(t->scores);
    for (size_t i = 0; i < t->n_added; i++) {
        free(t->added[i].content);
        free(t->added[i].norm);
    }
    free(t->added);
    trie_free(&t->trie_raw);
    trie_free(&t->trie_norm);
    if (t->word_re) pcre2_code_free(t->word_re);
    for (size_t i = 0; i < t->n_norms; i++) {
        ig_tok_pattern_free(&t->norms[i].pattern);
        free(t->norms[i].text);
    }
    free(t->norms);
    for (size_t i = 0; i < t->n_pretoks; i++) ig_tok_pattern_free(&t->pretoks[i].pattern);
    free(t->pretoks);
    for (size_t i = 0; i < t->n_decs; i++) {
        ig_tok_pattern_free(&t->decs[i].pattern);
        free(t->decs[i].text);
    }
    free(t->decs);
    free(t);
}

/* ---------------------------------------------------------------------------------------------- */
/* getters */

ig_tokenizer_kind ig_tokenizer_get_kind(const ig_tokenizer *tok) {
    return tok->kind;
}
int32_t ig_tokenizer_vocab_size(const ig_tokenizer *tok) {
    return tok->n_vocab;
}
int32_t ig_tokenizer_bos(const ig_tokenizer *tok) {
    return tok->bos;
}
int32_t ig_tokenizer_eos(const ig_tokenizer *tok) {
    return tok->eos;
}
int ig_tokenizer_adds_bos(const ig_tokenizer *tok) {
    return tok ? tok->adds_bos : 0;
}

const char *ig_tokenizer_token_bytes(const ig_tokenizer *tok, int32_t id, size_t *len) {
    if (id < 0 || id >= tok->n_vocab || !tok->present[id]) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = tok->bytes_len[id];
    return tok->bytes_pool.p + tok->bytes_off[id];
}

const char *ig_tokenizer_token_text(const ig_tokenizer *tok, int32_t id, size_t *len) {
    if (id < 0 || id >= tok->n_vocab || !tok->present[id]) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = tok->text_len[id];
    return tok->text_pool.p + tok->text_off[id];
}

int ig_tokenizer_is_special(const ig_tokenizer *tok, int32_t id) {
    if (id < 0 || id >= tok->n_vocab || tok->added_of[id] < 0) return 0;
    return tok->added[tok->added_of[id]].special;
}

int32_t ig_tokenizer_find(const ig_tokenizer *tok, const char *piece) {
    size_t n = strlen(piece);
    int32_t id = ig_tok_strmap_get(&tok->added_map, piece, n);
    return id >= 0 ? id : ig_tok_strmap_get(&tok->vocab_map, piece, n);
}

/* ---------------------------------------------------------------------------------------------- */
/* per-call state */

typedef struct piece {
    const char *p;
    size_t n;
    int at_start; /* begins at offset 0 of the original text (Metaspace prepend_scheme "first") */
} piece;

typedef struct piecevec {
    piece *v;
    size_t n, cap;
} piecevec;

typedef struct arena {
    char **blocks;
    size_t n_blocks, cap_blocks;
    char *cur;
    size_t left;
} arena;

typedef struct idvec {
    int32_t *v;
    size_t n, cap;
} idvec;

typedef struct sym {
    int32_t id;
    uint32_t start, len;
    int32_t prev, next;
} sym;

typedef struct hent {
    double prio; /* higher first */
    uint32_t pos;
    uint32_t right;
    int32_t aux; /* ranks: merged id; scores: byte length of the join */
} hent;

typedef struct wcache {
    const char **key;
    uint32_t *klen, *hash, *ids_off, *n_ids;
    size_t n, cap;
    uint32_t *slots;
    size_t n_slots;
    idvec ids;
} wcache;

typedef struct enc {
    const ig_tokenizer *t;
    ig_error *err;
    pcre2_match_data *md;
    arena ar;
    piecevec pa, pb;
    ig_tok_segvec segs;
    ig_tok_buf nbuf;
    idvec *out;
    sym *syms;
    size_t syms_cap;
    hent *heap;
    size_t heap_n, heap_cap;
    wcache cache;
} enc;

static char *arena_alloc(arena *a, size_t n) {
    if (n > a->left) {
        size_t sz = n > 65536 ? n : 65536;
        if (a->n_blocks == a->cap_blocks) {
            size_t cap = a->cap_blocks ? a->cap_blocks * 2 : 16;
            char **b = realloc(a->blocks, cap * sizeof *b);
            if (!b) return NULL;
            a->blocks = b;
            a->cap_blocks = cap;
        }
        char *blk = malloc(sz);
        if (!blk) return NULL;
        a->blocks[a->n_blocks++] = blk;
        a->cur = blk;
        a->left = sz;
    }
    char *p = a->cur;
    a->cur += n;
    a->left -= n;
    return p;
}

static void arena_free(arena *a) {
    for (size_t i = 0; i < a->n_blocks; i++) free(a->blocks[i]);
    free(a->blocks);
    memset(a, 0, sizeof *a);
}

static int pv_push(piecevec *v, const char *p, size_t n, int at_start) {
    if (n == 0) return 0; /* PreTokenizedString drops empty splits */
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        piece *nv = realloc(v->v, cap * sizeof *nv);
        if (!nv) return -1;
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = (piece){p, n, at_start};
    return 0;
}

static int ids_push(idvec *v, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        int32_t *nv = realloc(v->v, cap * sizeof *nv);
        if (!nv) return -1;
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = id;
    return 0;
}

static ig_status nomem(enc *e) {
    return ig_error_set(e->err, IG_ERR_NOMEM, "tokenizer: out of memory");
}

/* ---------------------------------------------------------------------------------------------- */
/* normalizers */

static ig_status replace_all(const ig_tok_pattern *pat, const char *s, size_t n, const char *with,
                             size_t with_len, ig_tok_buf *out, ig_tok_segvec *segs,
                             pcre2_match_data *md, ig_error *err) {
    IG_TRY(ig_tok_find_matches(pat, s, n, md, segs, err));
    out->n = 0;
    if (ig_tok_buf_append(out, "", 0)) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < segs->n; i++) {
        const ig_tok_seg *g = &segs->v[i];
        int rc = g->is_match ? ig_tok_buf_append(out, with, with_len)
                             : ig_tok_buf_append(out, s + g->start, g->end - g->start);
        if (rc) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }
    return IG_OK;
}

ig_status ig_tok_normalize(const ig_tokenizer *t, const char *s, size_t n, ig_tok_buf *b,
                           pcre2_match_data *md, ig_error *err) {
    ig_tok_buf cur = {0}, tmp = {0};
    ig_tok_segvec segs = {0};
    ig_status rc = IG_OK;
    if (ig_tok_buf_append(&cur, s, n)) rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < t->n_norms && rc == IG_OK; i++) {
        const ig_tok_norm *nm = &t->norms[i];
        if (nm->type == IG_TOK_NORM_PREPEND) {
            if (cur.n == 0) continue;
            tmp.n = 0;
            if (ig_tok_buf_append(&tmp, nm->text, nm->text_len) ||
                ig_tok_buf_append(&tmp, cur.p, cur.n))
                rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        } else {
            rc = replace_all(&nm->pattern, cur.p, cur.n, nm->text, nm->text_len, &tmp, &segs, md,
                             err);
        }
        ig_tok_buf x = cur;
        cur = tmp;
        tmp = x;
    }
    free(segs.v);
    ig_tok_buf_free(&tmp);
    if (rc != IG_OK) {
        ig_tok_buf_free(&cur);
        return rc;
    }
    b->n = 0;
    if (ig_tok_buf_append(b, cur.p, cur.n)) rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    ig_tok_buf_free(&cur);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* pre-tokenizers */

/* tokenizers' NormalizedString::split: segments -> pieces by behavior. */
static ig_status split_piece(enc *e, const piece *pc, const ig_tok_pattern *pat,
                             ig_tok_split_behavior beh, int invert, piecevec *out) {
    IG_TRY(ig_tok_find_matches(pat, pc->p, pc->n, e->md, &e->segs, e->err));
    ig_tok_seg *g = e->segs.v;
    size_t ng = e->segs.n;
    if (invert)
        for (size_t i = 0; i < ng; i++) g[i].is_match = !g[i].is_match;
    /* Build (start, end, remove) in place; merges only ever shrink the list. */
    size_t w = 0;
    switch (beh) {
    case IG_TOK_SPLIT_ISOLATED:
        for (size_t i = 0; i < ng; i++) g[i].is_match = 0;
        w = ng;
        break;
    case IG_TOK_SPLIT_REMOVED:
        w = ng;
        break;
    case IG_TOK_SPLIT_CONTIGUOUS: {
        int prev = 0;
        for (size_t i = 0; i < ng; i++) {
            int m = g[i].is_match;
            if (m == prev && w > 0)
                g[w - 1].end = g[i].end;
            else
                g[w++] = (ig_tok_seg){g[i].start, g[i].end, 0};
            prev = m;
        }
        break;
    }
    case IG_TOK_SPLIT_MERGED_PREV: {
        int prev = 0;
        for (size_t i = 0; i < ng; i++) {
            int m = g[i].is_match;
            if (m && !prev && w > 0)
                g[w - 1].end = g[i].end;
            else
                g[w++] = (ig_tok_seg){g[i].start, g[i].end, 0};
            prev = m;
        }
        break;
    }
    case IG_TOK_SPLIT_MERGED_NEXT: {
        /* right to left, then the list is reversed back */
        int prev = 0;
        size_t r = ng; /* write from the end */
        for (size_t k = ng; k-- > 0;) {
            ig_tok_seg s = g[k];
            if (s.is_match && !prev && r < ng)
                g[r].start = s.start;
            else
                g[--r] = (ig_tok_seg){s.start, s.end, 0};
            prev = s.is_match;
        }
        memmove(g, g + r, (ng - r) * sizeof *g);
        w = ng - r;
        break;
    }
    }
    for (size_t i = 0; i < w; i++) {
        if (g[i].is_match) continue; /* removed */
        if (pv_push(out, pc->p + g[i].start, g[i].end - g[i].start,
                    pc->at_start && g[i].start == 0))
            return nomem(e);
    }
    return IG_OK;
}

static int starts_with(const char *p, size_t n, const char *q) {
    size_t l = strlen(q);
    return n >= l && !memcmp(p, q, l);
}

static ig_status run_pretok(enc *e, const ig_tok_pretok *pt, piecevec *in, piecevec *out) {
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        piece pc = in->v[i];
        switch (pt->type) {
        case IG_TOK_PRE_SPLIT:
            IG_TRY(split_piece(e, &pc, &pt->pattern, pt->behavior, pt->invert, out));
            break;
        case IG_TOK_PRE_BYTELEVEL:
            if (pt->add_prefix_space && pc.p[0] != ' ') {
                char *q = arena_alloc(&e->ar, pc.n + 1);
                if (!q) return nomem(e);
                q[0] = ' ';
                memcpy(q + 1, pc.p, pc.n);
                pc.p = q;
                pc.n++;
            }
            if (pt->has_pattern)
                IG_TRY(split_piece(e, &pc, &pt->pattern, IG_TOK_SPLIT_ISOLATED, 0, out));
            else if (pv_push(out, pc.p, pc.n, pc.at_start))
                return nomem(e);
            break;
        case IG_TOK_PRE_METASPACE: {
            size_t rl = strlen(pt->replacement), spaces = 0;
            for (size_t k = 0; k < pc.n; k++) spaces += pc.p[k] == ' ';
            if (spaces) {
                char *q = arena_alloc(&e->ar, pc.n + spaces * (rl - 1) + 1);
                if (!q) return nomem(e);
                size_t w = 0;
                for (size_t k = 0; k < pc.n; k++) {
                    if (pc.p[k] == ' ') {
                        memcpy(q + w, pt->replacement, rl);
                        w += rl;
                    } else {
                        q[w++] = pc.p[k];
                    }
                }
                pc.p = q;
                pc.n = w;
            }
            int prepend = 0;
            if (!starts_with(pc.p, pc.n, pt->replacement)) {
                if (pt->prepend == IG_TOK_PREPEND_ALWAYS) prepend = 1;
                if (pt->prepend == IG_TOK_PREPEND_FIRST && pc.at_start) prepend = 1;
            }
            if (prepend) {
                char *q = arena_alloc(&e->ar, pc.n + rl);
                if (!q) return nomem(e);
                memcpy(q, pt->replacement, rl);
                memcpy(q + rl, pc.p, pc.n);
                pc.p = q;
                pc.n += rl;
            }
            if (pt->split)
                IG_TRY(split_piece(e, &pc, &pt->pattern, IG_TOK_SPLIT_MERGED_NEXT, 0, out));
            else if (pv_push(out, pc.p, pc.n, pc.at_start))
                return nomem(e);
            break;
        }
        }
    }
    return IG_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* BPE */

static int hent_before(const hent *a, const hent *b) {
    if (a->prio != b->prio) return a->prio > b->prio;
    return a->pos < b->pos;
}

static int heap_push(enc *e, hent h) {
    if (e->heap_n == e->heap_cap) {
        size_t cap = e->heap_cap ? e->heap_cap * 2 : 256;
        hent *nh = realloc(e->heap, cap * sizeof *nh);
        if (!nh) return -1;
        e->heap = nh;
        e->heap_cap = cap;
    }
    size_t i = e->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!hent_before(&h, &e->heap[p])) break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = h;
    return 0;
}

static hent heap_pop(enc *e) {
    hent top = e->heap[0];
    hent last = e->heap[--e->heap_n];
    size_t i = 0, n = e->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const hent *best = &last;
        if (l < n && hent_before(&e->heap[l], best)) {
            m = l;
            best = &e->heap[l];
        }
        if (r < n && hent_before(&e->heap[r], best)) m = r;
        if (m == i) break;
        e->heap[i] = e->heap[m];
        i = m;
    }
    if (n) e->heap[i] = last;
    return top;
}

static int syms_reserve(enc *e, size_t n) {
    if (n <= e->syms_cap) return 0;
    if (n > SIZE_MAX / 4 / sizeof(sym)) return -1; /* a length that wrapped */
    size_t cap = e->syms_cap ? e->syms_cap : 64;
    while (cap < n) cap *= 2;
    sym *s = realloc(e->syms, cap * sizeof *s);
    if (!s) return -1;
    e->syms = s;
    e->syms_cap = cap;
    return 0;
}

static const ig_tok_strmap *model_map(const ig_tokenizer *t) {
    return t->byte_level ? &t->bytes_map : &t->vocab_map;
}

/* Initial symbols as tokenizers' BPE::merge_word makes them (chars or bytes, byte fallback, unk).
 */
static ig_status bpe_init_symbols(enc *e, const char *w, size_t n, size_t *n_syms) {
    const ig_tokenizer *t = e->t;
    if (syms_reserve(e, n)) return nomem(e);
    size_t ns = 0;
    int32_t unk = -1;
    size_t unk_start = 0, unk_len = 0;
#define ADD_SYM(ID, START, LEN)                                                                    \
    do {                                                                                           \
        e->syms[ns] = (sym){(ID), (uint32_t)(START), (uint32_t)(LEN), (int32_t)ns - 1, -1};        \
        if (ns) e->syms[ns - 1].next = (int32_t)ns;                                                \
        ns++;                                                                                      \
    } while (0)
    size_t i = 0;
    while (i < n) {
        size_t cl = 1;
        int32_t id;
        if (t->byte_level) {
            id = t->byte_ids[(unsigned char)w[i]];
        } else {
            uint32_t cp;
            cl = ig_tok_utf8_decode(w + i, &cp);
            id = ig_tok_strmap_get(&t->vocab_map, w + i, cl);
        }
        if (id >= 0) {
            if (unk >= 0) {
                ADD_SYM(unk, unk_start, unk_len);
                unk = -1;
            }
            ADD_SYM(id, i, cl);
            i += cl;
            continue;
        }
        if (t->byte_fallback && !t->byte_level) {
            int all = 1;
            for (size_t k = 0; k < cl; k++)
                if (t->byte_ids[(unsigned char)w[i + k]] < 0) all = 0;
            if (all) {
                /* (a pending unk stays pending, as in tokenizers) */
                for (size_t k = 0; k < cl; k++)
                    ADD_SYM(t->byte_ids[(unsigned char)w[i + k]], i + k, 1);
                i += cl;
                continue;
            }
        }
        if (t->unk_id >= 0) {
            if (unk >= 0 && t->fuse_unk) {
                unk_len += cl;
            } else {
                if (unk >= 0) ADD_SYM(unk, unk_start, unk_len);
                unk = t->unk_id;
                unk_start = i;
                unk_len = cl;
            }
        }
        i += cl;
    }
    if (unk >= 0) ADD_SYM(unk, unk_start, unk_len);
#undef ADD_SYM
    *n_syms = ns;
    return IG_OK;
}

/* tokenizers' Word::merge_all: lowest rank first, leftmost on ties; stale entries are skipped. */
static ig_status bpe_merge_ranks(enc *e, size_t ns) {
    const ig_tokenizer *t = e->t;
    sym *s = e->syms;
    e->heap_n = 0;
    for (size_t i = 0; i + 1 < ns; i++) {
        uint32_t rank;
        int32_t merged;
        if (ig_tok_pairmap_get(&t->merges, s[i].id, s[i + 1].id, &rank, &merged) &&
            heap_push(e, (hent){-(double)rank, (uint32_t)i, 0, merged}))
            return nomem(e);
    }
    while (e->heap_n) {
        hent top = heap_pop(e);
        sym *a = &s[top.pos];
        if (a->len == 0 || a->next < 0) continue;
        sym *b = &s[a->next];
        uint32_t rank;
        int32_t merged;
        if (!ig_tok_pairmap_get(&t->merges, a->id, b->id, &rank, &merged) || merged != top.aux)
            continue;
        a->id = top.aux;
        a->len += b->len;
        int32_t bn = b->next;
        b->len = 0;
        a->next = bn;
        if (bn >= 0) s[bn].prev = (int32_t)top.pos;
        if (a->prev >= 0 && ig_tok_pairmap_get(&t->merges, s[a->prev].id, a->id, &rank, &merged) &&
            heap_push(e, (hent){-(double)rank, (uint32_t)a->prev, 0, merged}))
            return nomem(e);
        if (a->next >= 0 && ig_tok_pairmap_get(&t->merges, a->id, s[a->next].id, &rank, &merged) &&
            heap_push(e, (hent){-(double)rank, top.pos, 0, merged}))
            return nomem(e);
    }
    return IG_OK;
}

static int spm_try_bigram(enc *e, const char *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    const sym *a = &e->syms[left], *b = &e->syms[right];
    size_t len = a->len + b->len;
    int32_t id = ig_tok_strmap_get(&e->t->vocab_map, w + a->start, len);
    if (id < 0) return 0;
    return heap_push(e, (hent){e->t->scores[id], (uint32_t)left, (uint32_t)right, (int32_t)len});
}

/* llama.cpp's / SentencePiece's BPE: repeatedly join the adjacent pair whose concatenation is a
 * vocabulary piece with the highest score (leftmost on ties). */
static ig_status bpe_merge_scores(enc *e, const char *w, size_t n, size_t *n_syms) {
    if (syms_reserve(e, n)) return nomem(e);
    size_t ns = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t cl = ig_tok_utf8_decode(w + i, &cp);
        e->syms[ns] = (sym){-1, (uint32_t)i, (uint32_t)cl, (int32_t)ns - 1, -1};
        if (ns) e->syms[ns - 1].next = (int32_t)ns;
        ns++;
        i += cl;
    }
    e->heap_n = 0;
    for (size_t i = 1; i < ns; i++)
        if (spm_try_bigram(e, w, (int32_t)i - 1, (int32_t)i)) return nomem(e);
    sym *s = e->syms;
    while (e->heap_n) {
        hent top = heap_pop(e);
        sym *a = &s[top.pos], *b = &s[top.right];
        if (a->len == 0 || b->len == 0 || a->len + b->len != (uint32_t)top.aux) continue;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (b->next >= 0) s[b->next].prev = (int32_t)top.pos;
        if (spm_try_bigram(e, w, a->prev, (int32_t)top.pos) ||
            spm_try_bigram(e, w, (int32_t)top.pos, a->next))
            return nomem(e);
    }
    /* Symbols that are not pieces are single characters: their bytes as <0xXX> tokens. */
    for (int32_t i = ns ? 0 : -1; i >= 0; i = s[i].next) {
        s[i].id = ig_tok_strmap_get(&e->t->vocab_map, w + s[i].start, s[i].len);
    }
    *n_syms = ns;
    return IG_OK;
}

static ig_status emit_syms(enc *e, const char *w, size_t ns, idvec *out) {
    const ig_tokenizer *t = e->t;
    if (!ns) return IG_OK;
    for (int32_t i = 0; i >= 0; i = e->syms[i].next) {
        const sym *s = &e->syms[i];
        if (s->id >= 0) {
            if (ids_push(out, s->id)) return nomem(e);
            continue;
        }
        /* scores mode only: a character that is not a piece */
        for (uint32_t k = 0; k < s->len; k++) {
            int32_t b = t->byte_ids[(unsigned char)w[s->start + k]];
            if (b < 0) b = t->unk_id;
            if (b < 0)
                return ig_error_set(e->err, IG_ERR_FORMAT,
                                    "tokenizer: no byte token <0x%02X> and no unknown token for "
                                    "a character outside the vocabulary",
                                    (unsigned char)w[s->start + k]);
            if (b != t->unk_id || k == 0) {
                if (ids_push(out, b)) return nomem(e);
            }
        }
    }
    return IG_OK;
}

/* per-call word cache: word bytes -> ids */
static int cache_lookup(const wcache *c, const char *w, size_t n, uint32_t h, size_t *slot) {
    if (!c->n_slots) return -1;
    size_t i = h & (c->n_slots - 1);
    while (c->slots[i]) {
        size_t k = c->slots[i] - 1;
        if (c->hash[k] == h && c->klen[k] == n && !memcmp(c->key[k], w, n)) return (int)k;
        i = (i + 1) & (c->n_slots - 1);
    }
    if (slot) *slot = i;
    return -1;
}

static int cache_insert(wcache *c, const char *w, size_t n, uint32_t h, const int32_t *ids,
                        size_t n_ids) {
    if ((c->n + 1) * 2 > c->n_slots) {
        size_t ns = c->n_slots ? c->n_slots * 2 : 1024;
        uint32_t *slots = calloc(ns, sizeof *slots);
        if (!slots) return -1;
        for (size_t k = 0; k < c->n; k++) {
            size_t i = c->hash[k] & (ns - 1);
            while (slots[i]) i = (i + 1) & (ns - 1);
            slots[i] = (uint32_t)k + 1;
        }
        free(c->slots);
        c->slots = slots;
        c->n_slots = ns;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 512;
        const char **key = realloc(c->key, cap * sizeof *key);
        if (!key) return -1;
        c->key = key;
        uint32_t **arrs[] = {&c->klen, &c->hash, &c->ids_off, &c->n_ids};
        for (size_t a = 0; a < 4; a++) {
            uint32_t *p = realloc(*arrs[a], cap * sizeof *p);
            if (!p) return -1;
            *arrs[a] = p;
        }
        c->cap = cap;
    }
    size_t slot = 0;
    cache_lookup(c, w, n, h, &slot);
    size_t off = c->ids.n;
    for (size_t k = 0; k < n_ids; k++)
        if (ids_push(&c->ids, ids[k])) return -1;
    c->key[c->n] = w;
    c->klen[c->n] = (uint32_t)n;
    c->hash[c->n] = h;
    c->ids_off[c->n] = (uint32_t)off;
    c->n_ids[c->n] = (uint32_t)n_ids;
    c->slots[slot] = (uint32_t)++c->n;
    return 0;
}

static void cache_free(wcache *c) {
    free(c->key);
    free(c->klen);
    free(c->hash);
    free(c->ids_off);
    free(c->n_ids);
    free(c->slots);
    free(c->ids.v);
    memset(c, 0, sizeof *c);
}

#define IG_TOK_CACHE_MAX_WORD 256

static ig_status model_tokenize(enc *e, const char *w, size_t n) {
    const ig_tokenizer *t = e->t;
    if (n == 0) return IG_OK;
    if (t->ignore_merges) {
        int32_t id = ig_tok_strmap_get(model_map(t), w, n);
        if (id >= 0) return ids_push(e->out, id) ? nomem(e) : IG_OK;
    }
    uint32_t h = 0;
    if (n <= IG_TOK_CACHE_MAX_WORD) {
        h = ig_tok_hash(w, n);
        int k = cache_lookup(&e->cache, w, n, h, NULL);
        if (k >= 0) {
            const int32_t *ids = e->cache.ids.v + e->cache.ids_off[k];
            for (uint32_t j = 0; j < e->cache.n_ids[k]; j++)
                if (ids_push(e->out, ids[j])) return nomem(e);
            return IG_OK;
        }
    }
    size_t before = e->out->n, ns = 0;
    if (t->bpe_mode == IG_TOK_BPE_SCORES) {
        IG_TRY(bpe_merge_scores(e, w, n, &ns));
    } else {
        IG_TRY(bpe_init_symbols(e, w, n, &ns));
        IG_TRY(bpe_merge_ranks(e, ns));
    }
    IG_TRY(emit_syms(e, w, ns, e->out));
    size_t n_new = e->out->n - before;
    if (n <= IG_TOK_CACHE_MAX_WORD && n_new &&
        cache_insert(&e->cache, w, n, h, e->out->v + before, n_new))
        return nomem(e);
    return IG_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* added tokens, then normalize, pre-tokenize, BPE */

typedef struct aseg {
    size_t start, end;
    int32_t id; /* -1: text */
} aseg;

typedef struct asegvec {
    aseg *v;
    size_t n, cap;
} asegvec;

static int aseg_push(asegvec *v, size_t s, size_t e, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16;
        aseg *nv = realloc(v->v, cap * sizeof *nv);
        if (!nv) return -1;
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = (aseg){s, e, id};
    return 0;
}

static int is_word_char(const ig_tokenizer *t, const char *s, size_t n, size_t at,
                        pcre2_match_data *md) {
    return pcre2_match(t->word_re, (PCRE2_SPTR)s, n, at, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, md,
                       NULL) >= 0;
}

/* AddedVocabulary::find_matches over s with one trie. */
static ig_status split_added(enc *e, const ig_tok_trie *tr, int has, const char *s, size_t n,
                             asegvec *out) {
    const ig_tokenizer *t = e->t;
    out->n = 0;
    if (!has) return aseg_push(out, 0, n, -1) ? nomem(e) : IG_OK;
    size_t from = 0, start_offset = 0, ms, me;
    int32_t idx;
    while (trie_find(tr, s, n, from, &ms, &me, &idx)) {
        from = me;
        const ig_tok_added *a = &t->added[idx];
        size_t start = ms, stop = me;
        if (a->single_word) {
            int start_space = 1, stop_space = 1;
            if (start > 0) { /* last char before the match */
                size_t k = start - 1;
                while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
                start_space = !is_word_char(t, s, n, k, e->md);
            }
            if (stop < n) stop_space = !is_word_char(t, s, n, stop, e->md);
            if (!start_space || !stop_space) continue;
        }
        if (a->lstrip) {
            size_t k = start;
            while (k > 0) {
                size_t j = k - 1;
                while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
                uint32_t cp;
                ig_tok_utf8_decode(s + j, &cp);
                if (!ig_tok_is_white_space(cp)) break;
                k = j;
            }
            start = k > start_offset ? k : start_offset;
        }
        if (a->rstrip) {
            while (stop < n) {
                uint32_t cp;
                size_t l = ig_tok_utf8_decode(s + stop, &cp);
                if (!ig_tok_is_white_space(cp)) break;
                stop += l;
            }
        }
        if (start_offset < start && aseg_push(out, start_offset, start, -1)) return nomem(e);
        if (aseg_push(out, start, stop, a->id)) return nomem(e);
        start_offset = stop;
    }
    if (start_offset != n && aseg_push(out, start_offset, n, -1)) return nomem(e);
    return IG_OK;
}

static ig_status encode_text(enc *e, const char *s, size_t n, int at_start) {
    const ig_tokenizer *t = e->t;
    piecevec *in = &e->pa, *out = &e->pb;
    in->n = 0;
    if (pv_push(in, s, n, at_start)) return nomem(e);
    for (size_t i = 0; i < t->n_pretoks; i++) {
        IG_TRY(run_pretok(e, &t->pretoks[i], in, out));
        piecevec *x = in;
        in = out;
        out = x;
    }
    for (size_t i = 0; i < in->n; i++) IG_TRY(model_tokenize(e, in->v[i].p, in->v[i].n));
    return IG_OK;
}

ig_status ig_tokenizer_encode(const ig_tokenizer *tok, const char *text, size_t len, int add_bos,
                              int32_t **ids, size_t *n_ids, ig_error *err) {
    *ids = NULL;
    *n_ids = 0;
    if (!tok)
        return ig_error_set(err, IG_ERR_UNSUPPORTED,
                            "this model has no tokenizer (dummy weights): it takes token ids "
                            "only (random prompts)");
    if (!text && len) return ig_error_set(err, IG_ERR_INVALID_ARG, "tokenizer: NULL text");
    size_t bad = ig_tok_utf8_check(text, len);
    if (bad != len)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "tokenizer: text is not valid UTF-8 (byte 0x%02X at offset %zu)",
                            (unsigned char)text[bad], bad);
    idvec out = {0};
    enc e = {0};
    e.t = tok;
    e.err = err;
    e.out = &out;
    ig_status rc = IG_OK;
    asegvec raw = {0}, nrm = {0};
    e.md = pcre2_match_data_create(1, NULL);
    if (!e.md) rc = nomem(&e);
    if (rc == IG_OK && add_bos && tok->bos >= 0 && ids_push(&out, tok->bos)) rc = nomem(&e);
    if (rc == IG_OK) rc = split_added(&e, &tok->trie_raw, tok->has_trie_raw, text, len, &raw);
    for (size_t i = 0; i < raw.n && rc == IG_OK; i++) {
        const aseg *a = &raw.v[i];
        if (a->id >= 0) {
            if (ids_push(&out, a->id)) rc = nomem(&e);
            continue;
        }
        if (a->end == a->start) continue;
        const char *s = text + a->start;
        size_t n = a->end - a->start;
        if (tok->n_norms) {
            rc = ig_tok_normalize(tok, s, n, &e.nbuf, e.md, err);
            if (rc != IG_OK) break;
            char *q = arena_alloc(&e.ar, e.nbuf.n + 1);
            if (!q) {
                rc = nomem(&e);
                break;
            }
            memcpy(q, e.nbuf.p, e.nbuf.n);
            s = q;
            n = e.nbuf.n;
        }
        rc = split_added(&e, &tok->trie_norm, tok->has_trie_norm, s, n, &nrm);
        for (size_t j = 0; j < nrm.n && rc == IG_OK; j++) {
            const aseg *b = &nrm.v[j];
            if (b->id >= 0) {
                if (ids_push(&out, b->id)) rc = nomem(&e);
            } else if (b->end > b->start) {
                rc = encode_text(&e, s + b->start, b->end - b->start,
                                 a->start == 0 && b->start == 0);
            }
        }
    }
    free(raw.v);
    free(nrm.v);
    arena_free(&e.ar);
    free(e.pa.v);
    free(e.pb.v);
    free(e.segs.v);
    ig_tok_buf_free(&e.nbuf);
    free(e.syms);
    free(e.heap);
    cache_free(&e.cache);
    if (e.md) pcre2_match_data_free(e.md);
    if (rc != IG_OK) {
        free(out.v);
        return rc;
    }
    if (!out.v) {
        out.v = malloc(sizeof *out.v); /* a valid pointer even for no tokens */
        if (!out.v) return ig_error_set(err, IG_ERR_NOMEM, "tokenizer: out of memory");
    }
    *ids = out.v;
    *n_ids = out.n;
    return IG_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* decoding */

typedef struct strlist {
    ig_tok_buf pool;
    size_t *off, *len;
    size_t n, cap;
} strlist;

static int sl_add(strlist *l, const char *p, size_t n) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        size_t *o = realloc(l->off, cap * sizeof *o);
        if (!o) return -1;
        l->off = o;
        size_t *ln = realloc(l->len, cap * sizeof *ln);
        if (!ln) return -1;
        l->len = ln;
        l->cap = cap;
    }
    l->off[l->n] = l->pool.n;
    l->len[l->n] = n;
    l->n++;
    return ig_tok_buf_append(&l->pool, p, n);
}

/* Appends to the last string of l. */
static int sl_extend(strlist *l, const char *p, size_t n) {
    l->len[l->n - 1] += n;
    return ig_tok_buf_append(&l->pool, p, n);
}

static void sl_free(strlist *l) {
    ig_tok_buf_free(&l->pool);
    free(l->off);
    free(l->len);
    memset(l, 0, sizeof *l);
}

/* ByteLevel decoder for one token: its bytes if every char is in the byte alphabet, else its
 * UTF-8 as written. */
static int bytelevel_token(ig_tok_buf *out, const char *s, size_t n) {
    size_t start = out->n;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += ig_tok_utf8_decode(s + i, &cp);
        int b = ig_tok_cp_to_byte(cp);
        if (b < 0) {
            out->n = start;
            return ig_tok_buf_append(out, s, n);
        }
        char c = (char)b;
        if (ig_tok_buf_append(out, &c, 1)) return -1;
    }
    return ig_tok_buf_append(out, "", 0);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* ByteFallback: "<0xXX>" (u8::from_str_radix, so "+F" parses too) -> byte, else -1. */
static int byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    if (s[3] == '+') return hexval(s[4]);
    int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

static ig_status metaspace_token(const ig_tok_dec *d, int first, const char *s, size_t n,
                                 ig_tok_buf *out) {
    size_t rl = strlen(d->replacement);
    for (size_t i = 0; i < n;) {
        if (rl && n - i >= rl && !memcmp(s + i, d->replacement, rl)) {
            i += rl;
            if (first && d->prepend != IG_TOK_PREPEND_NEVER) continue;
            if (ig_tok_buf_append(out, " ", 1)) return IG_ERR_NOMEM;
            continue;
        }
        if (ig_tok_buf_append(out, s + i, 1)) return IG_ERR_NOMEM;
        i++;
    }
    return ig_tok_buf_append(out, "", 0) ? IG_ERR_NOMEM : IG_OK;
}

static ig_status run_decoder(const ig_tok_dec *d, strlist *in, strlist *out, ig_tok_segvec *segs,
                             pcre2_match_data *md, ig_error *err) {
    ig_tok_buf tmp = {0};
    ig_status rc = IG_OK;
#define NOMEM_BREAK                                                                                \
    do {                                                                                           \
        rc = ig_error_set(err, IG_ERR_NOMEM, "tokenizer: out of memory");                          \
        goto done;                                                                                 \
    } while (0)
    switch (d->type) {
    case IG_TOK_DEC_BYTELEVEL:
        for (size_t i = 0; i < in->n; i++)
            if (bytelevel_token(&tmp, in->pool.p + in->off[i], in->len[i])) NOMEM_BREAK;
        {
            ig_tok_buf lossy = {0};
            if (ig_tok_utf8_lossy_append(&lossy, tmp.p ? tmp.p : "", tmp.n) ||
                sl_add(out, lossy.p, lossy.n)) {
                ig_tok_buf_free(&lossy);
                NOMEM_BREAK;
            }
            ig_tok_buf_free(&lossy);
        }
        break;
    case IG_TOK_DEC_METASPACE:
        for (size_t i = 0; i < in->n; i++) {
            tmp.n = 0;
            if (metaspace_token(d, i == 0, in->pool.p + in->off[i], in->len[i], &tmp) ||
                sl_add(out, tmp.p ? tmp.p : "", tmp.n))
                NOMEM_BREAK;
        }
        break;
    case IG_TOK_DEC_REPLACE:
        for (size_t i = 0; i < in->n; i++) {
            rc = replace_all(&d->pattern, in->pool.p + in->off[i], in->len[i], d->text, d->text_len,
                             &tmp, segs, md, err);
            if (rc != IG_OK) goto done;
            if (sl_add(out, tmp.p, tmp.n)) NOMEM_BREAK;
        }
        break;
    case IG_TOK_DEC_BYTEFALLBACK: {
        size_t i = 0;
        while (i < in->n) {
            int b = byte_token(in->pool.p + in->off[i], in->len[i]);
            if (b < 0) {
                if (sl_add(out, in->pool.p + in->off[i], in->len[i])) NOMEM_BREAK;
                i++;
                continue;
            }
            tmp.n = 0;
            size_t j = i;
            for (; j < in->n && (b = byte_token(in->pool.p + in->off[j], in->len[j])) >= 0; j++) {
                char c = (char)b;
                if (ig_tok_buf_append(&tmp, &c, 1)) NOMEM_BREAK;
            }
            if (ig_tok_utf8_check(tmp.p, tmp.n) == tmp.n) {
                if (sl_add(out, tmp.p, tmp.n)) NOMEM_BREAK;
            } else {
                for (size_t k = i; k < j; k++)
                    if (sl_add(out, "\xEF\xBF\xBD", 3)) NOMEM_BREAK;
            }
            i = j;
        }
        break;
    }
    case IG_TOK_DEC_FUSE:
        if (sl_add(out, "", 0)) NOMEM_BREAK;
        for (size_t i = 0; i < in->n; i++)
            if (sl_extend(out, in->pool.p + in->off[i], in->len[i])) NOMEM_BREAK;
        break;
    case IG_TOK_DEC_STRIP: {
        char cbuf[4];
        size_t cl = ig_tok_utf8_encode(d->strip_cp, cbuf);
        for (size_t i = 0; i < in->n; i++) {
            const char *s = in->pool.p + in->off[i];
            size_t a = 0, b = in->len[i];
            for (size_t k = 0; k < d->strip_start && b - a >= cl && !memcmp(s + a, cbuf, cl); k++)
                a += cl;
            for (size_t k = 0; k < d->strip_stop && b - a >= cl && !memcmp(s + b - cl, cbuf, cl);
                 k++)
                b -= cl;
            if (sl_add(out, s + a, b - a)) NOMEM_BREAK;
        }
        break;
    }
    }
done:
#undef NOMEM_BREAK
    ig_tok_buf_free(&tmp);
    return rc;
}

/* The string a token id stands for before decoding (tokenizers' simple_id_to_token / model). */
static void id_string(const ig_tokenizer *t, int32_t id, const char **s, size_t *n) {
    int32_t a = t->added_of[id];
    if (a >= 0 && t->added[a].norm) {
        *s = t->added[a].norm;
        *n = t->added[a].norm_len;
        return;
    }
    *s = t->text_pool.p + t->text_off[id];
    *n = t->text_len[id];
}

static ig_status token_piece(const ig_tokenizer *t, int32_t id, ig_tok_buf *out,
                             pcre2_match_data *md, ig_error *err) {
    const char *s;
    size_t n;
    id_string(t, id, &s, &n);
    ig_tok_buf cur = {0}, nxt = {0};
    ig_tok_segvec segs = {0};
    ig_status rc = IG_OK;
    if (ig_tok_buf_append(&cur, s, n)) rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < t->n_decs && rc == IG_OK; i++) {
        const ig_tok_dec *d = &t->decs[i];
        nxt.n = 0;
        int b;
        switch (d->type) {
        case IG_TOK_DEC_BYTELEVEL:
            if (bytelevel_token(&nxt, cur.p, cur.n)) rc = IG_ERR_NOMEM;
            break;
        case IG_TOK_DEC_METASPACE:
            rc = metaspace_token(d, 0, cur.p, cur.n, &nxt);
            break;
        case IG_TOK_DEC_REPLACE:
            /* a token's piece can be part of a character (a ByteFallback byte): a regex is
             * matched on text, so such a piece passes through as it is */
            if (d->pattern.re && ig_tok_utf8_check(cur.p, cur.n) != cur.n) {
                if (ig_tok_buf_append(&nxt, cur.p, cur.n)) rc = IG_ERR_NOMEM;
                break;
            }
            rc = replace_all(&d->pattern, cur.p, cur.n, d->text, d->text_len, &nxt, &segs, md, err);
            break;
        case IG_TOK_DEC_BYTEFALLBACK:
            b = byte_token(cur.p, cur.n);
            if (b >= 0) {
                char c = (char)b;
                if (ig_tok_buf_append(&nxt, &c, 1)) rc = IG_ERR_NOMEM;
            } else if (ig_tok_buf_append(&nxt, cur.p, cur.n)) {
                rc = IG_ERR_NOMEM;
            }
            break;
        case IG_TOK_DEC_FUSE:
        case IG_TOK_DEC_STRIP:
            if (ig_tok_buf_append(&nxt, cur.p, cur.n)) rc = IG_ERR_NOMEM;
            break;
        }
        if (rc == IG_ERR_NOMEM) rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        ig_tok_buf x = cur;
        cur = nxt;
        nxt = x;
    }
    if (rc == IG_OK && ig_tok_buf_append(out, cur.p ? cur.p : "", cur.n))
        rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    ig_tok_buf_free(&cur);
    ig_tok_buf_free(&nxt);
    free(segs.v);
    return rc;
}

ig_status ig_tokenizer_decode(const ig_tokenizer *tok, const int32_t *ids, size_t n, char **text,
                              ig_error *err) {
    *text = NULL;
    strlist a = {0}, b = {0};
    ig_tok_segvec segs = {0};
    pcre2_match_data *md = NULL;
    ig_status rc = IG_OK;
    for (size_t i = 0; i < n && rc == IG_OK; i++) {
        if (ids[i] < 0 || ids[i] >= tok->n_vocab || !tok->present[ids[i]]) {
            rc = ig_error_set(err, IG_ERR_INVALID_ARG,
                              "tokenizer: id %d at position %zu is not in the vocabulary (size %d)",
                              ids[i], i, tok->n_vocab);
            break;
        }
        const char *s;
        size_t l;
        id_string(tok, ids[i], &s, &l);
        if (sl_add(&a, s, l)) rc = ig_error_set(err, IG_ERR_NOMEM, "tokenizer: out of memory");
    }
    if (rc == IG_OK && tok->n_decs) {
        md = pcre2_match_data_create(1, NULL);
        if (!md) rc = ig_error_set(err, IG_ERR_NOMEM, "tokenizer: out of memory");
    }
    for (size_t i = 0; i < tok->n_decs && rc == IG_OK; i++) {
        b.n = 0;
        b.pool.n = 0;
        rc = run_decoder(&tok->decs[i], &a, &b, &segs, md, err);
        strlist x = a;
        a = b;
        b = x;
    }
    ig_tok_buf joined = {0};
    if (rc == IG_OK) {
        if (ig_tok_buf_append(&joined, "", 0))
            rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < a.n && rc == IG_OK; i++) {
            if (i && !tok->has_decoder && ig_tok_buf_append(&joined, " ", 1))
                rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
            if (ig_tok_buf_append(&joined, a.pool.p + a.off[i], a.len[i]))
                rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        }
    }
    sl_free(&a);
    sl_free(&b);
    free(segs.v);
    if (md) pcre2_match_data_free(md);
    if (rc != IG_OK) {
        ig_tok_buf_free(&joined);
        return rc;
    }
    *text = joined.p;
    return IG_OK;
}
