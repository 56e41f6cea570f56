/* RULER-style needle-in-a-haystack retrieval (Hsieh et al., "RULER: What's the Real Context Size
 * of Your Long-Context Language Models?", 2024; its synthetic/niah.py): needles "One of the special
 * magic numbers for KEY is: VALUE." hidden in a contiguous token span of a real text file, then a
 * question for KEY's number(s). Three variants: niah_single (one needle), niah_multikey (the needle
 * and 3 distractor needles with other keys and values) and niah_multivalue (4 needles with the same
 * key and 4 values; all are asked for). Prompts are built from tokens so that every prompt has
 * exactly the requested length; the answers are generated greedily by ig_eval_run as passkey's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/eval/eval_internal.h"
#include "core/base/mapfile.h"
#include "kernels/cpu/cpu_kernels.h"

static const char *HEADER = "Some special magic numbers are hidden within the following text. "
                            "Make sure to memorize it. I will quiz you about the numbers "
                            "afterwards.\n";
static const char *NEEDLE = " One of the special magic numbers for %s is: %d.";
static const char *QUESTION_ONE = "\nWhat is the special magic number for %s mentioned in the "
                                  "provided text? The special magic number for %s mentioned in "
                                  "the provided text is";
static const char *QUESTION_ALL = "\nWhat are all the special magic numbers for %s mentioned in "
                                  "the provided text? The special magic numbers for %s mentioned "
                                  "in the provided text are";

/* Generated tokens per answer: the answer's tokens plus a little slack. */
#define NIAH_SLACK 4

/* Word-like keys, "adjective-noun" as RULER's (wonderwords) keys: 48 x 48 of them. */
static const char *const ADJ[] = {
    "amber",   "ancient", "bitter", "brave",   "bright", "calm",   "clever", "cold",
    "crimson", "curious", "damp",   "distant", "dusty",  "eager",  "early",  "faint",
    "fancy",   "fierce",  "gentle", "gloomy",  "golden", "hollow", "humble", "icy",
    "jolly",   "kind",    "lively", "lonely",  "loud",   "lucky",  "mellow", "misty",
    "noble",   "odd",     "pale",   "proud",   "quiet",  "rapid",  "rusty",  "silent",
    "silver",  "sleepy",  "smooth", "steady",  "swift",  "tidy",   "wild",   "windy"};
static const char *const NOUN[] = {
    "anchor", "badger", "banjo",  "beacon", "bridge",  "canyon",  "castle",  "cedar",
    "comet",  "coral",  "desert", "falcon", "feather", "forest",  "garden",  "glacier",
    "harbor", "hazel",  "island", "jacket", "kettle",  "ladder",  "lantern", "meadow",
    "mirror", "orchid", "otter",  "parrot", "pebble",  "pepper",  "planet",  "quartz",
    "rabbit", "river",  "saddle", "salmon", "summit",  "thistle", "timber",  "tunnel",
    "valley", "violin", "walnut", "willow", "window",  "wizard",  "yarrow",  "zephyr"};
#define N_ADJ  ((int)(sizeof ADJ / sizeof ADJ[0]))
#define N_NOUN ((int)(sizeof NOUN / sizeof NOUN[0]))

typedef struct toks {
    int32_t *ids;
    size_t n;
} toks;

static void random_key(ig_rng *rng, char *out, size_t n) {
    int a = (int)(ig_rng_next(rng) % (uint64_t)N_ADJ);
    int b = (int)(ig_rng_next(rng) % (uint64_t)N_NOUN);
    snprintf(out, n, "%s-%s", ADJ[a], NOUN[b]);
}

/* Whether a span may start (or end) before token i: its bytes begin a UTF-8 character, so that
 * cutting there never splits a multi-byte character spread over several tokens. */
static int char_start(const ig_tokenizer *tok, const int32_t *ids, size_t n, size_t i) {
    if (i == 0 || i >= n) return 1;
    size_t l = 0;
    const char *b = ig_tokenizer_token_bytes(tok, ids[i], &l);
    return !b || l == 0 || ((unsigned char)b[0] & 0xC0) != 0x80;
}

/* The haystack file, checked and tokenized once per task. */
static ig_status read_haystack(const char *path, const ig_tokenizer *tok, toks *out,
                               ig_error *err) {
    if (!path || !*path)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "the niah tasks need a haystack text file (--haystack FILE)");
    if (ig_path_is_dir(path))
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "%s: is a folder; --haystack takes a UTF-8 text file", path);
    char *buf = NULL;
    size_t len = 0;
    IG_TRY(ig_read_file(path, &buf, &len, err));
    ig_status rc = IG_OK;
    if (len == 0)
        rc = ig_error_set(err, IG_ERR_FORMAT, "%s: the haystack file is empty (--haystack)", path);
    for (size_t i = 0; rc == IG_OK && i < len;) {
        unsigned cp;
        size_t l = ig_utf8_seq((const unsigned char *)buf + i, &cp);
        if (l == 0 || i + l > len) {
            rc = ig_error_set(err, IG_ERR_FORMAT,
                              "%s: not UTF-8 text (byte %zu: 0x%02x); --haystack takes a UTF-8 "
                              "text file",
                              path, i, (unsigned char)buf[i]);
            break;
        }
        i += l;
    }
    if (rc == IG_OK) {
        rc = ig_tokenizer_encode(tok, buf, len, 0, &out->ids, &out->n, err);
        if (rc != IG_OK) ig_error_prefix(err, "%s: ", path);
    }
    if (rc == IG_OK && out->n == 0)
        rc = ig_error_set(err, IG_ERR_FORMAT, "%s: the haystack has no tokens (--haystack)", path);
    free(buf);
    return rc;
}

/* Needle texts and their draws for seed index s: the same for every length and depth. */
typedef struct draw {
    int n;
    char key[IG_EVAL_NIAH_NEEDLES][32];
    int value[IG_EVAL_NIAH_NEEDLES];
    double depth[IG_EVAL_NIAH_NEEDLES]; /* [0] is replaced by the requested depth */
    double offset;                      /* haystack start, a fraction of the possible starts */
} draw;

static void draw_needles(eval_kind kind, uint64_t seed, int s, draw *d) {
    ig_rng rng;
    ig_rng_seed(&rng, (seed * 0x9E3779B97F4A7C15ull + (uint64_t)s + 1) ^ 0x6E6961685F6B6579ull);
    memset(d, 0, sizeof *d);
    d->n = kind == EVAL_NIAH_SINGLE ? 1 : IG_EVAL_NIAH_NEEDLES;
    random_key(&rng, d->key[0], sizeof d->key[0]);
    for (int j = 0; j < d->n; j++) {
        if (j > 0) {
            if (kind == EVAL_NIAH_MULTIVALUE) {
                memcpy(d->key[j], d->key[0], sizeof d->key[j]);
            } else {
                int dup;
                do { /* a distractor's key differs from every other key */
                    random_key(&rng, d->key[j], sizeof d->key[j]);
                    dup = 0;
                    for (int k = 0; k < j; k++) dup |= !strcmp(d->key[j], d->key[k]);
                } while (dup);
            }
        }
        int dup;
        do { /* and every value from every other value */
            d->value[j] = 1000000 + (int)(ig_rng_next(&rng) % 9000000);
            dup = 0;
            for (int k = 0; k < j; k++) dup |= d->value[j] == d->value[k];
        } while (dup);
        d->depth[j] = j > 0 ? ig_rng_uniform(&rng) : 0;
    }
    d->offset = ig_rng_uniform(&rng);
}

static ig_status enc(const ig_tokenizer *tok, const char *s, int add_bos, toks *t, ig_error *err) {
    return ig_tokenizer_encode(tok, s, strlen(s), add_bos, &t->ids, &t->n, err);
}

/* Builds item i's prompt: the header, the haystack span with the needles inserted, the question.
 */
static ig_status build_one(ig_eval_task *t, const ig_eval_task_opts *o, const ig_tokenizer *tok,
                           const toks *hay, const toks *hdr, int L, double depth, int s, int i,
                           ig_error *err) {
    draw d;
    draw_needles(t->kind, o->seed, s, &d);
    d.depth[0] = depth;
    ig_eval_niah_item *info = &t->niah[i];
    memset(info, 0, sizeof *info);
    info->length = L;
    info->depth = depth;
    info->seed_index = s;
    info->n_needles = d.n;
    toks nt[IG_EVAL_NIAH_NEEDLES] = {{0}}, q = {0};
    char buf[512];
    int multivalue = t->kind == EVAL_NIAH_MULTIVALUE;
    snprintf(buf, sizeof buf, multivalue ? QUESTION_ALL : QUESTION_ONE, d.key[0], d.key[0]);
    ig_status rc = enc(tok, buf, 0, &q, err);
    long fixed = (long)(hdr->n + q.n);
    for (int j = 0; j < d.n && rc == IG_OK; j++) {
        snprintf(buf, sizeof buf, NEEDLE, d.key[j], d.value[j]);
        rc = enc(tok, buf, 0, &nt[j], err);
        fixed += (long)nt[j].n;
        ig_eval_needle *nd = &info->needles[j];
        memcpy(nd->key, d.key[j], sizeof nd->key);
        nd->value = d.value[j];
        nd->n_tokens = (int)nt[j].n;
        nd->asked = j == 0 || multivalue;
    }
    long H = (long)L - fixed;
    if (rc == IG_OK && H < 1)
        rc = ig_error_set(err, IG_ERR_INVALID_ARG,
                          "%s length %d is too short: the header, needles and question alone take "
                          "%ld tokens (need at least %ld)",
                          t->name, L, fixed, fixed + 1);
    if (rc == IG_OK && (long)hay->n < H)
        rc = ig_error_set(err, IG_ERR_INVALID_ARG,
                          "%s: the haystack has %zu tokens, too short for --length %d (it needs "
                          "%ld haystack tokens)",
                          o->haystack, hay->n, L, H);
    /* The span's start: a seed-dependent fraction of the possible starts, moved forward
     * (cyclically) to the first start where the span both starts and ends between UTF-8 characters.
     */
    long starts = rc == IG_OK ? (long)hay->n - H + 1 : 0, off = -1;
    long o0 = (long)(d.offset * (double)starts);
    if (o0 >= starts) o0 = starts - 1;
    for (long k = 0; k < starts && off < 0; k++) {
        long c = (o0 + k) % starts;
        if (char_start(tok, hay->ids, hay->n, (size_t)c) &&
            char_start(tok, hay->ids, hay->n, (size_t)(c + H)))
            off = c;
    }
    if (rc == IG_OK && off < 0)
        rc = ig_error_set(err, IG_ERR_FORMAT,
                          "%s: no span of %ld tokens starts and ends between UTF-8 characters",
                          o->haystack, H);
    int32_t *ids = NULL;
    if (rc == IG_OK && !(ids = malloc((size_t)L * sizeof *ids)))
        rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    if (rc == IG_OK) {
        info->hay_offset = (int)off;
        info->hay_tokens = (int)H;
        info->header_tokens = (int)hdr->n;
        info->question_tokens = (int)q.n;
        /* Each needle goes before haystack token round(depth x H) of the span (moved forward to
         * a character start); needles at the same place keep their order. */
        long at[IG_EVAL_NIAH_NEEDLES];
        int order[IG_EVAL_NIAH_NEEDLES];
        for (int j = 0; j < d.n; j++) {
            long p = (long)(d.depth[j] * (double)H + 0.5);
            if (p > H) p = H;
            while (p < H && !char_start(tok, hay->ids, hay->n, (size_t)(off + p))) p++;
            at[j] = p;
            order[j] = j;
        }
        for (int a = 1; a < d.n; a++) /* insertion sort by (position, index) */
            for (int b = a; b > 0 && at[order[b]] < at[order[b - 1]]; b--) {
                int x = order[b];
                order[b] = order[b - 1];
                order[b - 1] = x;
            }
        int32_t *p = ids;
        memcpy(p, hdr->ids, hdr->n * sizeof *p);
        p += hdr->n;
        long cur = 0;
        for (int k = 0; k < d.n; k++) {
            int j = order[k];
            memcpy(p, hay->ids + off + cur, (size_t)(at[j] - cur) * sizeof *p);
            p += at[j] - cur;
            cur = at[j];
            info->needles[j].pos = (int)(p - ids);
            memcpy(p, nt[j].ids, nt[j].n * sizeof *p);
            p += nt[j].n;
        }
        memcpy(p, hay->ids + off + cur, (size_t)(H - cur) * sizeof *p);
        p += H - cur;
        memcpy(p, q.ids, q.n * sizeof *p);
        p += q.n;
        IG_ASSERT(p - ids == L);
    }
    for (int j = 0; j < d.n; j++) free(nt[j].ids);
    free(q.ids);
    if (rc != IG_OK) return rc;
    eval_item *it = &t->items[i];
    it->req0 = i;
    it->n_req = 1;
    it->gold = 0;
    it->key = d.value[0];
    it->key_pos = info->needles[0].pos;
    t->n_items++;
    t->n_reqs++;
    /* The answer: the value, or all values in needle order. */
    char ans[128];
    if (multivalue)
        snprintf(ans, sizeof ans, " %d, %d, %d and %d.", d.value[0], d.value[1], d.value[2],
                 d.value[3]);
    else
        snprintf(ans, sizeof ans, " %d.", d.value[0]);
    eval_req *r = &t->reqs[i];
    IG_TRY(ig_eval_gen_request(r, tok, ids, L, ans, err));
    if (r->n_cont + NIAH_SLACK > t->generate) t->generate = r->n_cont + NIAH_SLACK;
    if (L > t->max_tokens) t->max_tokens = L;
    return IG_OK;
}

ig_status ig_eval_niah_build(ig_eval_task *t, const ig_eval_task_opts *o, const ig_tokenizer *tok,
                             ig_error *err) {
    static const double half = 0.5;
    const double *depths = o->passkey_depths ? o->passkey_depths : &half;
    int n_depths = o->passkey_depths ? o->passkey_n_depths : 1;
    const int *lengths = o->niah_lengths ? o->niah_lengths : &o->passkey_length;
    int n_lengths = o->niah_lengths ? o->niah_n_lengths : 1;
    int seeds = o->passkey_seeds > 0 ? o->passkey_seeds : 1;
    if (n_depths < 1 || n_lengths < 1)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "%s: no depth or no length", t->name);
    for (int i = 0; i < n_depths; i++)
        if (!(depths[i] >= 0 && depths[i] <= 1))
            return ig_error_set(err, IG_ERR_INVALID_ARG, "%s depth %g is not in [0, 1]", t->name,
                                depths[i]);
    for (int i = 0; i < n_lengths; i++) {
        if (lengths[i] < 1)
            return ig_error_set(err, IG_ERR_INVALID_ARG, "%s length %d is not positive", t->name,
                                lengths[i]);
        if (o->max_len > 0 && lengths[i] > o->max_len)
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "%s length %d exceeds the model's context length %d", t->name,
                                lengths[i], o->max_len);
    }
    long total = (long)n_lengths * n_depths * seeds;
    if (total > (1L << 24))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "%s: %ld prompts is too many", t->name, total);
    int n = (int)total;
    if (o->limit > 0 && n > o->limit) n = o->limit;
    toks hay = {0}, hdr = {0};
    ig_status rc = read_haystack(o->haystack, tok, &hay, err);
    if (rc == IG_OK) rc = enc(tok, HEADER, o->add_bos, &hdr, err);
    if (rc == IG_OK) {
        t->items = ig_calloc((size_t)n, sizeof *t->items, err);
        t->reqs = ig_calloc((size_t)n, sizeof *t->reqs, err);
        t->niah = ig_calloc((size_t)n, sizeof *t->niah, err);
        t->cells = ig_calloc((size_t)n_lengths * (size_t)n_depths, sizeof *t->cells, err);
        if (!t->items || !t->reqs || !t->niah || !t->cells) rc = IG_ERR_NOMEM;
    }
    if (rc == IG_OK) {
        t->n_cells = n_lengths * n_depths;
        for (int c = 0; c < t->n_cells; c++) {
            t->cells[c].length = lengths[c / n_depths];
            t->cells[c].depth = depths[c % n_depths];
        }
    }
    /* Items: lengths outer, then depths, then seeds. */
    for (int i = 0; i < n && rc == IG_OK; i++) {
        int s = i % seeds, c = i / seeds;
        t->items[i].cell = c;
        rc = build_one(t, o, tok, &hay, &hdr, lengths[c / n_depths], depths[c % n_depths], s, i,
                       err);
    }
    if (rc == IG_OK && o->max_len > 0 && t->max_tokens + t->generate > o->max_len)
        rc = ig_error_set(err, IG_ERR_INVALID_ARG,
                          "%s length %d plus %d generated tokens exceeds the model's context "
                          "length %d",
                          t->name, t->max_tokens, t->generate, o->max_len);
    free(hay.ids);
    free(hdr.ids);
    return rc;
}
