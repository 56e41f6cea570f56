/* Task loaders and prompt construction: each task's JSONL files become documents (query, choices,
 * target, gold) as lm-evaluation-harness's task definitions make them, few-shot examples are drawn
 * from the task's pool with a seeded generator, and every request is tokenized once here.
 * Nothing here runs the model. */
#include <ctype.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/eval/eval_internal.h"
#include "core/base/mapfile.h"
#include "kernels/cpu/cpu_kernels.h"

#define MAX_CHOICES 4
#define PIQA_POOL   100 /* last PIQA validation items, the few-shot pool when shots > 0 */

static const struct {
    const char *name;
    eval_kind kind;
    const char *eval_file, *pool_file, *labels_file;
} g_tasks[] = {
    {"copa", EVAL_COPA, "val.jsonl", "train32.jsonl", NULL},
    {"openbookqa", EVAL_OPENBOOKQA, "test.jsonl", "train.jsonl", NULL},
    {"winogrande", EVAL_WINOGRANDE, "dev.jsonl", "train_xs.jsonl", NULL},
    {"piqa", EVAL_PIQA, "valid.jsonl", NULL, "valid-labels.lst"},
    {"rte", EVAL_RTE, "val.jsonl", "train32.jsonl", NULL},
    {"lambada", EVAL_LAMBADA, "lambada_test.jsonl", NULL, NULL},
    {"passkey", EVAL_PASSKEY, NULL, NULL, NULL},
    {"niah_single", EVAL_NIAH_SINGLE, NULL, NULL, NULL},
    {"niah_multikey", EVAL_NIAH_MULTIKEY, NULL, NULL, NULL},
    {"niah_multivalue", EVAL_NIAH_MULTIVALUE, NULL, NULL, NULL},
};
#define N_TASKS ((int)(sizeof g_tasks / sizeof g_tasks[0]))

const char *ig_eval_task_names(void) {
    return "copa, openbookqa, winogrande, piqa, rte, lambada, passkey, niah_single, niah_multikey, "
           "niah_multivalue";
}

int ig_eval_task_is_generated(const char *name) {
    for (int i = 0; i < N_TASKS; i++)
        if (name && !strcmp(name, g_tasks[i].name))
            return g_tasks[i].kind == EVAL_PASSKEY || EVAL_IS_NIAH(g_tasks[i].kind);
    return 0;
}

int ig_eval_task_is_niah(const char *name) {
    for (int i = 0; i < N_TASKS; i++)
        if (name && !strcmp(name, g_tasks[i].name)) return EVAL_IS_NIAH(g_tasks[i].kind);
    return 0;
}

const char *ig_eval_task_files(const char *name) {
    static char buf[N_TASKS][128];
    for (int i = 0; i < N_TASKS; i++) {
        if (strcmp(name, g_tasks[i].name)) continue;
        snprintf(buf[i], sizeof buf[i], "%s%s%s%s%s",
                 g_tasks[i].eval_file ? g_tasks[i].eval_file : "", g_tasks[i].pool_file ? " " : "",
                 g_tasks[i].pool_file ? g_tasks[i].pool_file : "",
                 g_tasks[i].labels_file ? " " : "",
                 g_tasks[i].labels_file ? g_tasks[i].labels_file : "");
        return buf[i];
    }
    return NULL;
}

/* ---- a growing string ---- */

typedef struct sbuf {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_add_n(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_add(sbuf *b, const char *s) {
    sb_add_n(b, s, strlen(s));
}

/* ---- documents ---- */

typedef struct eval_doc {
    char *query;                /* doc_to_text (NULL for WinoGrande, whose choices are contexts) */
    char *choices[MAX_CHOICES]; /* doc_to_choice */
    int n_choices;
    char *target; /* WinoGrande: the text after the blank; LAMBADA: " " + last word */
    int gold;
} eval_doc;

static void doc_free(eval_doc *d) {
    free(d->query);
    for (int i = 0; i < d->n_choices; i++) free(d->choices[i]);
    free(d->target);
    memset(d, 0, sizeof *d);
}

static char *dup_n(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static char *dup_cat(const char *a, const char *b, const char *c) {
    sbuf sb = {0};
    sb_add(&sb, a);
    sb_add(&sb, b);
    if (c) sb_add(&sb, c);
    if (sb.oom) {
        free(sb.s);
        return NULL;
    }
    return sb.s ? sb.s : dup_n("", 0);
}

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Python's str.strip() for ASCII whitespace. */
static char *dup_strip(const char *s) {
    size_t n = strlen(s);
    while (n > 0 && is_space(*s)) s++, n--;
    while (n > 0 && is_space(s[n - 1])) n--;
    return dup_n(s, n);
}

static const char *jstr(json_object *o, const char *key) {
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

/* Parse failures of one document: a message without the file:line prefix. */
typedef struct doc_err {
    char msg[256];
} doc_err;

static int derr(doc_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int derr(doc_err *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

#define NEED_STR(var, obj, key)                                                                    \
    const char *var = jstr(obj, key);                                                              \
    if (!var) return derr(e, "missing string field \"%s\"", key)

/* COPA (super_glue/copa/utils.py): text = premise without its final character + " because" /
 * " therefore"; choices " " + the choice with its first letter lower-cased. */
static int doc_copa(json_object *o, eval_doc *d, doc_err *e) {
    NEED_STR(premise, o, "premise");
    NEED_STR(c1, o, "choice1");
    NEED_STR(c2, o, "choice2");
    NEED_STR(q, o, "question");
    json_object *lab;
    if (!json_object_object_get_ex(o, "label", &lab) || !json_object_is_type(lab, json_type_int))
        return derr(e, "missing integer field \"label\"");
    d->gold = json_object_get_int(lab);
    if (d->gold != 0 && d->gold != 1) return derr(e, "label %d is not 0 or 1", d->gold);
    const char *conn = !strcmp(q, "cause")    ? " because"
                       : !strcmp(q, "effect") ? " therefore"
                                              : NULL;
    if (!conn) return derr(e, "question \"%s\" is neither \"cause\" nor \"effect\"", q);
    char *p = dup_strip(premise);
    if (!p) return derr(e, "out of memory");
    size_t n = strlen(p);
    if (n > 0) { /* drop the last code point (the period) */
        n--;
        while (n > 0 && ((unsigned char)p[n] & 0xC0) == 0x80) n--;
    }
    p[n] = '\0';
    d->query = dup_cat(p, conn, NULL);
    free(p);
    const char *cs[2] = {c1, c2};
    for (int i = 0; i < 2; i++) {
        if (!cs[i][0]) return derr(e, "choice%d is empty", i + 1);
        char first[2] = {(char)tolower((unsigned char)cs[i][0]), 0};
        d->choices[i] = dup_cat(" ", first, cs[i] + 1);
        d->n_choices++;
    }
    return d->query && d->choices[0] && d->choices[1] ? 0 : derr(e, "out of memory");
}

/* OpenBookQA (openbookqa.yaml): text = question_stem, choices = choices.text, gold = the index of
 * answerKey.lstrip() in choices.label. Accepts the original layout (question.stem,
 * question.choices[{text, label}]) and the Hugging Face one (question_stem, choices{text, label}).
 */
static int doc_obqa(json_object *o, eval_doc *d, doc_err *e) {
    const char *stem = jstr(o, "question_stem");
    json_object *q = NULL, *choices = NULL;
    if (json_object_object_get_ex(o, "question", &q) && json_object_is_type(q, json_type_object)) {
        if (!stem) stem = jstr(q, "stem");
        json_object_object_get_ex(q, "choices", &choices);
    }
    if (!choices) json_object_object_get_ex(o, "choices", &choices);
    if (!stem) return derr(e, "missing string field \"question.stem\"");
    NEED_STR(key, o, "answerKey");
    while (is_space(*key)) key++;
    const char *texts[MAX_CHOICES + 1], *labels[MAX_CHOICES + 1];
    int n = 0;
    if (choices && json_object_is_type(choices, json_type_array)) {
        n = (int)json_object_array_length(choices);
        if (n < 2 || n > MAX_CHOICES) return derr(e, "%d choices (expected 2..%d)", n, MAX_CHOICES);
        for (int i = 0; i < n; i++) {
            json_object *c = json_object_array_get_idx(choices, (size_t)i);
            texts[i] = jstr(c, "text");
            labels[i] = jstr(c, "label");
            if (!texts[i] || !labels[i]) return derr(e, "choice %d lacks \"text\" or \"label\"", i);
        }
    } else if (choices && json_object_is_type(choices, json_type_object)) {
        json_object *tx, *lb;
        if (!json_object_object_get_ex(choices, "text", &tx) ||
            !json_object_object_get_ex(choices, "label", &lb) ||
            !json_object_is_type(tx, json_type_array) ||
            !json_object_is_type(lb, json_type_array) ||
            json_object_array_length(tx) != json_object_array_length(lb))
            return derr(e, "\"choices\" needs arrays \"text\" and \"label\" of one length");
        n = (int)json_object_array_length(tx);
        if (n < 2 || n > MAX_CHOICES) return derr(e, "%d choices (expected 2..%d)", n, MAX_CHOICES);
        for (int i = 0; i < n; i++) {
            texts[i] = json_object_get_string(json_object_array_get_idx(tx, (size_t)i));
            labels[i] = json_object_get_string(json_object_array_get_idx(lb, (size_t)i));
        }
    } else {
        return derr(e, "missing \"question.choices\"");
    }
    d->gold = -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(labels[i], key)) d->gold = i;
    if (d->gold < 0) return derr(e, "answerKey \"%s\" is not a choice label", key);
    d->query = dup_n(stem, strlen(stem));
    for (int i = 0; i < n; i++) {
        d->choices[i] = dup_n(texts[i], strlen(texts[i]));
        d->n_choices++;
        if (!d->choices[i]) return derr(e, "out of memory");
    }
    return d->query ? 0 : derr(e, "out of memory");
}

/* WinoGrande (winogrande/preprocess_winogrande.py): choices = the sentence up to the blank with
 * each option filled in (they are the contexts); target = the rest after the blank, stripped. */
static int doc_winogrande(json_object *o, eval_doc *d, doc_err *e) {
    NEED_STR(sent, o, "sentence");
    NEED_STR(o1, o, "option1");
    NEED_STR(o2, o, "option2");
    NEED_STR(ans, o, "answer");
    if (strcmp(ans, "1") && strcmp(ans, "2"))
        return derr(e, "answer \"%s\" is not \"1\" or \"2\"", ans);
    d->gold = ans[0] - '1';
    const char *blank = strchr(sent, '_');
    if (!blank) return derr(e, "the sentence has no blank \"_\"");
    char *prefix = dup_n(sent, (size_t)(blank - sent));
    d->target = dup_strip(blank + 1);
    d->choices[0] = prefix ? dup_cat(prefix, o1, NULL) : NULL;
    d->choices[1] = prefix ? dup_cat(prefix, o2, NULL) : NULL;
    d->n_choices = 2;
    free(prefix);
    return d->target && d->choices[0] && d->choices[1] ? 0 : derr(e, "out of memory");
}

/* PIQA (piqa.yaml): text = "Question: {goal}\nAnswer:", choices = [sol1, sol2]; the label comes
 * from valid-labels.lst (or a "label" field). */
static int doc_piqa(json_object *o, int label, int n_labels, eval_doc *d, doc_err *e) {
    NEED_STR(goal, o, "goal");
    NEED_STR(s1, o, "sol1");
    NEED_STR(s2, o, "sol2");
    json_object *lab;
    if (json_object_object_get_ex(o, "label", &lab) && json_object_is_type(lab, json_type_int))
        label = json_object_get_int(lab);
    else if (label < 0)
        return derr(e, "no label (the labels file has %d lines)", n_labels);
    if (label != 0 && label != 1) return derr(e, "label %d is not 0 or 1", label);
    d->gold = label;
    d->query = dup_cat("Question: ", goal, "\nAnswer:");
    d->choices[0] = dup_n(s1, strlen(s1));
    d->choices[1] = dup_n(s2, strlen(s2));
    d->n_choices = 2;
    return d->query && d->choices[0] && d->choices[1] ? 0 : derr(e, "out of memory");
}

/* RTE (super_glue/rte/default.yaml, glue/rte the same): text = "{premise}\nQuestion: {hypothesis}
 * True or False?\nAnswer:", choices ["True", "False"], entailment = 0. */
static int doc_rte(json_object *o, eval_doc *d, doc_err *e) {
    const char *prem = jstr(o, "premise"), *hyp = jstr(o, "hypothesis");
    if (!prem) prem = jstr(o, "sentence1");
    if (!hyp) hyp = jstr(o, "sentence2");
    if (!prem || !hyp) return derr(e, "missing string field \"premise\" or \"hypothesis\"");
    json_object *lab;
    if (!json_object_object_get_ex(o, "label", &lab)) return derr(e, "missing field \"label\"");
    if (json_object_is_type(lab, json_type_string)) {
        const char *l = json_object_get_string(lab);
        d->gold = !strcmp(l, "entailment") ? 0 : !strcmp(l, "not_entailment") ? 1 : -1;
    } else if (json_object_is_type(lab, json_type_int)) {
        d->gold = json_object_get_int(lab);
    } else {
        d->gold = -1;
    }
    if (d->gold != 0 && d->gold != 1)
        return derr(e, "label is not \"entailment\", \"not_entailment\", 0 or 1");
    sbuf q = {0};
    sb_add(&q, prem);
    sb_add(&q, "\nQuestion: ");
    sb_add(&q, hyp);
    sb_add(&q, " True or False?\nAnswer:");
    if (q.oom) {
        free(q.s);
        return derr(e, "out of memory");
    }
    d->query = q.s;
    d->choices[0] = dup_n("True", 4);
    d->choices[1] = dup_n("False", 5);
    d->n_choices = 2;
    return d->choices[0] && d->choices[1] ? 0 : derr(e, "out of memory");
}

/* LAMBADA (lambada_openai.yaml): text = every space-separated word but the last, joined by spaces;
 * target = " " + the last word. */
static int doc_lambada(json_object *o, eval_doc *d, doc_err *e) {
    NEED_STR(text, o, "text");
    const char *sp = strrchr(text, ' ');
    if (!sp || sp == text) return derr(e, "the text has no space-separated last word");
    d->query = dup_n(text, (size_t)(sp - text));
    d->target = dup_n(sp, strlen(sp));
    d->gold = 0;
    return d->query && d->target ? 0 : derr(e, "out of memory");
}

/* ---- files ---- */

typedef struct doc_list {
    eval_doc *d;
    int n, cap;
} doc_list;

static void docs_free(doc_list *l) {
    for (int i = 0; i < l->n; i++) doc_free(&l->d[i]);
    free(l->d);
    memset(l, 0, sizeof *l);
}

static char *path_join(const char *dir, const char *file) {
    return dup_cat(dir, "/", file);
}

/* Reads labels, one integer per line (PIQA's valid-labels.lst). */
static ig_status read_labels(const char *path, int **out, int *n_out, ig_error *err) {
    char *buf = NULL;
    size_t len = 0;
    IG_TRY(ig_read_file(path, &buf, &len, err));
    int n = 0, cap = 0, line = 0;
    int *v = NULL;
    char *p = buf;
    while (*p) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        line++;
        char *q = p;
        while (is_space(*q)) q++;
        if (*q) {
            char *end;
            long x = strtol(q, &end, 10);
            while (is_space(*end)) end++;
            if (*end || end == q) {
                free(v);
                free(buf);
                return ig_error_set(err, IG_ERR_FORMAT, "%s:%d: not an integer label", path, line);
            }
            if (n == cap) {
                cap = cap ? cap * 2 : 1024;
                int *nv = realloc(v, (size_t)cap * sizeof *v);
                if (!nv) {
                    free(v);
                    free(buf);
                    return ig_error_set(err, IG_ERR_NOMEM, "out of memory reading %s", path);
                }
                v = nv;
            }
            v[n++] = (int)x;
        }
        if (!nl) break;
        p = nl + 1;
    }
    free(buf);
    *out = v;
    *n_out = n;
    return IG_OK;
}

/* Reads a JSONL file into documents; blank lines are skipped, anything else that is not a JSON
 * object of the task's layout is an error naming file:line. `limit` > 0 stops after that many. */
static ig_status read_docs(eval_kind kind, const char *path, const int *labels, int n_labels,
                           int limit, doc_list *out, ig_error *err) {
    char *buf = NULL;
    size_t len = 0;
    IG_TRY(ig_read_file(path, &buf, &len, err));
    ig_status rc = IG_OK;
    int line = 0;
    char *p = buf;
    json_tokener *tk = json_tokener_new();
    if (!tk) {
        free(buf);
        return ig_error_set(err, IG_ERR_NOMEM, "out of memory reading %s", path);
    }
    while (*p && (limit <= 0 || out->n < limit)) {
        char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        line++;
        const char *q = p;
        while (q < p + n && is_space(*q)) q++;
        if (q < p + n) {
            json_tokener_reset(tk);
            json_object *o = json_tokener_parse_ex(tk, p, (int)n);
            enum json_tokener_error je = json_tokener_get_error(tk);
            const char *why = NULL;
            if (!o)
                why = je == json_tokener_continue ? "unexpected end of line"
                                                  : json_tokener_error_desc(je);
            for (const char *t = p + json_tokener_get_parse_end(tk); o && !why && t < p + n; t++)
                if (!is_space(*t)) why = "text after the object";
            if (why) {
                json_object_put(o);
                rc = ig_error_set(err, IG_ERR_FORMAT, "%s:%d: not a JSON object (%s)", path, line,
                                  why);
                break;
            }
            if (!json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                rc = ig_error_set(err, IG_ERR_FORMAT, "%s:%d: not a JSON object", path, line);
                break;
            }
            if (out->n == out->cap) {
                int cap = out->cap ? out->cap * 2 : 256;
                eval_doc *nd = realloc(out->d, (size_t)cap * sizeof *nd);
                if (!nd) {
                    json_object_put(o);
                    rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory reading %s", path);
                    break;
                }
                out->d = nd;
                out->cap = cap;
            }
            eval_doc *d = &out->d[out->n];
            memset(d, 0, sizeof *d);
            doc_err de = {{0}};
            int r;
            switch (kind) {
            case EVAL_COPA:
                r = doc_copa(o, d, &de);
                break;
            case EVAL_OPENBOOKQA:
                r = doc_obqa(o, d, &de);
                break;
            case EVAL_WINOGRANDE:
                r = doc_winogrande(o, d, &de);
                break;
            case EVAL_PIQA:
                r = doc_piqa(o, labels && out->n < n_labels ? labels[out->n] : -1, n_labels, d,
                             &de);
                break;
            case EVAL_RTE:
                r = doc_rte(o, d, &de);
                break;
            case EVAL_LAMBADA:
                r = doc_lambada(o, d, &de);
                break;
            default:
                r = derr(&de, "no documents for this task");
            }
            json_object_put(o);
            if (r != 0) {
                doc_free(d);
                rc = ig_error_set(err, IG_ERR_FORMAT, "%s:%d: %s", path, line, de.msg);
                break;
            }
            out->n++;
        }
        if (!nl) break;
        p = nl + 1;
    }
    json_tokener_free(tk);
    free(buf);
    if (rc == IG_OK && out->n == 0)
        rc = ig_error_set(err, IG_ERR_FORMAT, "%s: no documents in the file", path);
    return rc;
}

/* ---- few-shot contexts ---- */

/* lm-eval's few-shot block: for each example "question" + " " + answer + "\n\n" (target_delimiter
 * " ", fewshot_delimiter "\n\n"); for WinoGrande the question is the correct option's context and
 * the answer the text after the blank; for LAMBADA the answer is the target. */
static void add_example(sbuf *b, eval_kind kind, const eval_doc *d) {
    if (kind == EVAL_WINOGRANDE) {
        sb_add(b, d->choices[d->gold]);
        sb_add(b, " ");
        sb_add(b, d->target);
    } else {
        sb_add(b, d->query);
        sb_add(b, " ");
        sb_add(b, d->target ? d->target : d->choices[d->gold]);
    }
    sb_add(b, "\n\n");
}

/* k distinct indices of [0, n) other than `exclude` (-1: none), in draw order, from a generator
 * seeded by (seed, item) so that an item's examples do not depend on --limit or the batch. */
static void draw_shots(uint64_t seed, int item, int n, int k, int exclude, int *out) {
    ig_rng rng;
    ig_rng_seed(&rng, seed * 0x9E3779B97F4A7C15ull + (uint64_t)item + 1);
    int got = 0;
    while (got < k) {
        int x = (int)(ig_rng_next(&rng) % (uint64_t)n);
        int dup = x == exclude;
        for (int j = 0; j < got && !dup; j++) dup = out[j] == x;
        if (!dup) out[got++] = x;
    }
}

/* ---- tokenization ---- */

ig_status ig_eval_req_encode(eval_req *r, const ig_tokenizer *tok, int add_bos, int max_len,
                             ig_error *err) {
    /* Trailing whitespace of the context belongs to the continuation (lm-eval's _encode_pair). */
    size_t nc = strlen(r->ctx);
    size_t ns = 0;
    while (ns < nc && is_space(r->ctx[nc - 1 - ns])) ns++;
    if (ns > 0) {
        char *cont = dup_cat(r->ctx + nc - ns, r->cont, NULL);
        if (!cont) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        free(r->cont);
        r->cont = cont;
        r->ctx[nc - ns] = '\0';
        nc -= ns;
    }
    if (nc == 0) return ig_error_set(err, IG_ERR_INVALID_ARG, "empty context");
    char *whole_text = dup_cat(r->ctx, r->cont, NULL);
    if (!whole_text) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    int32_t *whole = NULL, *ctx = NULL;
    size_t n_whole = 0, n_ctx = 0;
    ig_status rc =
        ig_tokenizer_encode(tok, whole_text, strlen(whole_text), add_bos, &whole, &n_whole, err);
    if (rc == IG_OK) rc = ig_tokenizer_encode(tok, r->ctx, nc, add_bos, &ctx, &n_ctx, err);
    free(whole_text);
    if (rc != IG_OK) {
        free(whole);
        free(ctx);
        return rc;
    }
    if (n_whole <= n_ctx) {
        free(whole);
        free(ctx);
        return ig_error_set(err, IG_ERR_INVALID_ARG, "the continuation \"%.40s\" has no tokens",
                            r->cont);
    }
    int n_cont = (int)(n_whole - n_ctx);
    r->cont_ids = malloc((size_t)n_cont * sizeof(int32_t));
    if (!r->cont_ids) {
        free(whole);
        free(ctx);
        return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }
    memcpy(r->cont_ids, whole + n_ctx, (size_t)n_cont * sizeof(int32_t));
    r->n_cont = n_cont;
    free(whole);
    /* lm-eval keeps the last max_length + 1 tokens of context + continuation (the last one is only
     * predicted): here the context loses its oldest tokens so that both fit in max_len. */
    int keep = (int)n_ctx;
    if (max_len > 0 && keep + n_cont > max_len) keep = max_len - n_cont;
    if (keep < 1) {
        free(ctx);
        return ig_error_set(err, IG_ERR_CAPACITY,
                            "a continuation of %d tokens does not fit in a context of %d", n_cont,
                            max_len);
    }
    if (keep < (int)n_ctx) memmove(ctx, ctx + (n_ctx - (size_t)keep), (size_t)keep * sizeof *ctx);
    r->ctx_ids = ctx;
    r->n_ctx = keep;
    return IG_OK;
}

/* ---- the task ---- */

void ig_eval_task_free(ig_eval_task *t) {
    if (!t) return;
    for (int i = 0; i < t->n_reqs; i++) {
        free(t->reqs[i].ctx);
        free(t->reqs[i].cont);
        free(t->reqs[i].ctx_ids);
        free(t->reqs[i].cont_ids);
    }
    free(t->reqs);
    free(t->items);
    free(t->niah);
    free(t->cells);
    free(t);
}

static ig_status check_dir(const char *task, const char *dir, ig_error *err) {
    if (!dir || !ig_path_is_dir(dir))
        return ig_error_set(err, IG_ERR_NOT_FOUND,
                            "%s: no such data folder for task %s (expected the files %s in it; "
                            "see --data)",
                            dir ? dir : "(none)", task, ig_eval_task_files(task));
    return IG_OK;
}

static ig_status need_file(const char *task, const char *dir, const char *path, ig_error *err) {
    if (!ig_path_exists(path))
        return ig_error_set(err, IG_ERR_NOT_FOUND,
                            "%s: missing (task %s expects the files %s in %s)", path, task,
                            ig_eval_task_files(task), dir);
    return IG_OK;
}

/* Builds the requests of the scored documents. */
static ig_status build_requests(ig_eval_task *t, const ig_eval_task_opts *o, const doc_list *ev,
                                int n_eval, const doc_list *pool, int pool_is_eval,
                                const ig_tokenizer *tok, ig_error *err) {
    int n_req = 0;
    for (int i = 0; i < n_eval; i++) n_req += t->kind == EVAL_LAMBADA ? 1 : ev->d[i].n_choices;
    t->items = ig_calloc((size_t)n_eval, sizeof *t->items, err);
    t->reqs = ig_calloc((size_t)n_req, sizeof *t->reqs, err);
    if (!t->items || !t->reqs) return IG_ERR_NOMEM;
    int shots = o->shots;
    if (shots > 0 && pool->n - (pool_is_eval ? 1 : 0) < shots)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "task %s: %d shots asked, the few-shot pool has %d documents", t->name,
                            shots, pool->n - (pool_is_eval ? 1 : 0));
    int *idx = shots > 0 ? ig_malloc((size_t)shots * sizeof *idx, err) : NULL;
    if (shots > 0 && !idx) return IG_ERR_NOMEM;
    ig_status rc = IG_OK;
    for (int i = 0; i < n_eval && rc == IG_OK; i++) {
        const eval_doc *d = &ev->d[i];
        sbuf fs = {0};
        sb_add(&fs, "");
        if (shots > 0) {
            draw_shots(o->seed, i, pool->n, shots, pool_is_eval ? i : -1, idx);
            for (int s = 0; s < shots; s++) add_example(&fs, t->kind, &pool->d[idx[s]]);
        }
        eval_item *it = &t->items[t->n_items];
        it->req0 = t->n_reqs;
        it->gold = d->gold;
        int nr = t->kind == EVAL_LAMBADA ? 1 : d->n_choices;
        for (int c = 0; c < nr && !fs.oom; c++) {
            eval_req *r = &t->reqs[t->n_reqs];
            if (t->kind == EVAL_WINOGRANDE) {
                r->ctx = dup_cat(fs.s, d->choices[c], NULL);
                r->cont = dup_cat(" ", d->target, NULL);
            } else if (t->kind == EVAL_LAMBADA) {
                r->ctx = dup_cat(fs.s, d->query, NULL);
                r->cont = dup_n(d->target, strlen(d->target));
            } else {
                r->ctx = dup_cat(fs.s, d->query, NULL);
                r->cont = dup_cat(" ", d->choices[c], NULL);
            }
            t->n_reqs++;
            r->len_chars = t->kind == EVAL_LAMBADA ? 1 : (double)ig_eval_utf8_len(d->choices[c]);
            if (!r->ctx || !r->cont) {
                rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
                break;
            }
            rc = ig_eval_req_encode(r, tok, o->add_bos, o->max_len, err);
            if (rc != IG_OK) {
                ig_error_prefix(err, "task %s, item %d: ", t->name, i);
                break;
            }
            if (r->n_ctx + r->n_cont > t->max_tokens) t->max_tokens = r->n_ctx + r->n_cont;
        }
        if (fs.oom && rc == IG_OK) rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        free(fs.s);
        it->n_req = nr;
        t->n_items++;
    }
    free(idx);
    return rc;
}

ig_status ig_eval_task_load(const ig_eval_task_opts *o, const ig_tokenizer *tok, ig_eval_task **out,
                            ig_error *err) {
    *out = NULL;
    int ti = -1;
    for (int i = 0; i < N_TASKS; i++)
        if (o->name && !strcmp(o->name, g_tasks[i].name)) ti = i;
    if (ti < 0)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "unknown task '%s' (tasks: %s)",
                            o->name ? o->name : "", ig_eval_task_names());
    if (o->shots < 0) return ig_error_set(err, IG_ERR_INVALID_ARG, "negative shot count");
    ig_eval_task *t = ig_calloc(1, sizeof *t, err);
    if (!t) return IG_ERR_NOMEM;
    t->kind = g_tasks[ti].kind;
    t->name = g_tasks[ti].name;
    if (t->kind == EVAL_PASSKEY || EVAL_IS_NIAH(t->kind)) {
        ig_status rc = t->kind == EVAL_PASSKEY ? ig_eval_passkey_build(t, o, tok, err)
                                               : ig_eval_niah_build(t, o, tok, err);
        if (rc != IG_OK) {
            ig_eval_task_free(t);
            return rc;
        }
        *out = t;
        return IG_OK;
    }
    const char *dir = o->data_dir;
    ig_status rc = check_dir(t->name, dir, err);
    char *eval_path = NULL, *pool_path = NULL, *labels_path = NULL;
    int *labels = NULL, n_labels = 0;
    doc_list ev = {0}, pool = {0};
    if (rc != IG_OK) goto out;
    eval_path = path_join(dir, g_tasks[ti].eval_file);
    if (g_tasks[ti].pool_file) pool_path = path_join(dir, g_tasks[ti].pool_file);
    if (g_tasks[ti].labels_file) labels_path = path_join(dir, g_tasks[ti].labels_file);
    if (!eval_path || (g_tasks[ti].pool_file && !pool_path) ||
        (g_tasks[ti].labels_file && !labels_path)) {
        rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = need_file(t->name, dir, eval_path, err)) != IG_OK) goto out;
    if (pool_path && o->shots > 0 && (rc = need_file(t->name, dir, pool_path, err)) != IG_OK)
        goto out;
    if (labels_path) {
        if ((rc = need_file(t->name, dir, labels_path, err)) != IG_OK) goto out;
        if ((rc = read_labels(labels_path, &labels, &n_labels, err)) != IG_OK) goto out;
    }
    /* PIQA's pool: its last PIQA_POOL validation documents, never scored when shots > 0; LAMBADA's:
     * the test split itself minus the scored document (lm-eval's fallback when a task has no
     * training or validation split). Both need every document read. */
    int whole = t->kind == EVAL_LAMBADA || (t->kind == EVAL_PIQA && o->shots > 0);
    rc = read_docs(t->kind, eval_path, labels, n_labels, whole ? 0 : o->limit, &ev, err);
    if (rc != IG_OK) goto out;
    if (labels && (whole || o->limit <= 0) && n_labels != ev.n) {
        rc = ig_error_set(err, IG_ERR_FORMAT, "%s: %d labels for %d documents in %s", labels_path,
                          n_labels, ev.n, eval_path);
        goto out;
    }
    int n_eval = ev.n, pool_is_eval = 0;
    const doc_list *pl = &pool;
    if (t->kind == EVAL_PIQA && o->shots > 0) {
        if (ev.n <= PIQA_POOL) {
            rc = ig_error_set(err, IG_ERR_INVALID_ARG,
                              "%s: %d documents; few-shot PIQA needs more than %d (its last %d are "
                              "the few-shot pool)",
                              eval_path, ev.n, PIQA_POOL, PIQA_POOL);
            goto out;
        }
        n_eval = ev.n - PIQA_POOL;
        pool.d = ev.d + n_eval; /* a view: freed with ev */
        pool.n = PIQA_POOL;
    } else if (t->kind == EVAL_LAMBADA) {
        pl = &ev;
        pool_is_eval = 1;
    } else if (pool_path && o->shots > 0) {
        rc = read_docs(t->kind, pool_path, NULL, 0, 0, &pool, err);
        if (rc != IG_OK) goto out;
    }
    if (o->limit > 0 && n_eval > o->limit) n_eval = o->limit;
    rc = build_requests(t, o, &ev, n_eval, pl, pool_is_eval, tok, err);
out:
    if (t->kind == EVAL_PIQA && o->shots > 0) memset(&pool, 0, sizeof pool);
    docs_free(&ev);
    docs_free(&pool);
    free(labels);
    free(eval_path);
    free(pool_path);
    free(labels_path);
    if (rc != IG_OK) {
        ig_eval_task_free(t);
        return rc;
    }
    *out = t;
    return IG_OK;
}

const char *ig_eval_task_name(const ig_eval_task *t) {
    return t->name;
}
int ig_eval_task_n_items(const ig_eval_task *t) {
    return t->n_items;
}
int ig_eval_task_n_requests(const ig_eval_task *t, int item) {
    return t->items[item].n_req;
}
int ig_eval_task_gold(const ig_eval_task *t, int item) {
    return t->items[item].gold;
}
int ig_eval_task_has_acc_norm(const ig_eval_task *t) {
    return t->kind == EVAL_OPENBOOKQA || t->kind == EVAL_PIQA;
}
const char *ig_eval_task_context(const ig_eval_task *t, int item, int r) {
    return t->reqs[t->items[item].req0 + r].ctx;
}
const char *ig_eval_task_continuation(const ig_eval_task *t, int item, int r) {
    return t->reqs[t->items[item].req0 + r].cont;
}
const int32_t *ig_eval_task_context_ids(const ig_eval_task *t, int item, int r, int *n) {
    const eval_req *q = &t->reqs[t->items[item].req0 + r];
    *n = q->n_ctx;
    return q->ctx_ids;
}
const int32_t *ig_eval_task_continuation_ids(const ig_eval_task *t, int item, int r, int *n) {
    const eval_req *q = &t->reqs[t->items[item].req0 + r];
    *n = q->n_cont;
    return q->cont_ids;
}
int ig_eval_task_max_tokens(const ig_eval_task *t) {
    return t->max_tokens + t->generate;
}
int ig_eval_task_total_requests(const ig_eval_task *t) {
    return t->n_reqs;
}
int ig_eval_passkey_key(const ig_eval_task *t, int item) {
    return t->items[item].key;
}
int ig_eval_passkey_key_pos(const ig_eval_task *t, int item) {
    return t->items[item].key_pos;
}
const ig_eval_niah_item *ig_eval_niah_info(const ig_eval_task *t, int item) {
    return t->niah && item >= 0 && item < t->n_items ? &t->niah[item] : NULL;
}

size_t ig_eval_utf8_len(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}
