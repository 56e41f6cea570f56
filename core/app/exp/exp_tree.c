/* The experiment file as a located tree (see exp_tree.h): libyaml's document API, then a copy into
 * nodes we can edit (for --set) that keep each node's and key's start mark. */
#include "core/app/exp/exp_tree.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "core/model/io/yaml_guard.h"

#define EXP_MAX_DEPTH 64

ig_status exp_fail(ig_error *err, const char *file, exp_loc loc, const char *path, const char *fmt,
                   ...) {
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *p = path && path[0] ? path : "(top level)";
    if (loc.origin) return ig_error_set(err, IG_ERR_FORMAT, "%s: %s: %s", loc.origin, p, what);
    return ig_error_set(err, IG_ERR_FORMAT, "%s:%d:%d: %s: %s", file, loc.line, loc.col, p, what);
}

exp_node *exp_node_new(exp_kind kind, exp_loc loc) {
    exp_node *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->kind = kind;
    n->loc = loc;
    n->axis = -1;
    return n;
}

void exp_node_free(exp_node *n) {
    if (!n) return;
    free(n->str);
    free(n->resolved);
    for (int i = 0; i < n->n_ents; i++) {
        free(n->ents[i].key);
        exp_node_free(n->ents[i].val);
    }
    free(n->ents);
    for (int i = 0; i < n->n_items; i++) exp_node_free(n->items[i]);
    free(n->items);
    free(n);
}

exp_entry *exp_map_entry(const exp_node *map, const char *key) {
    if (!map || map->kind != EXP_MAP) return NULL;
    for (int i = 0; i < map->n_ents; i++)
        if (!strcmp(map->ents[i].key, key)) return &map->ents[i];
    return NULL;
}

exp_node *exp_map_get(const exp_node *map, const char *key) {
    exp_entry *e = exp_map_entry(map, key);
    return e ? e->val : NULL;
}

exp_entry *exp_map_add(exp_node *map, const char *key, exp_loc kloc, exp_node *val) {
    exp_entry *ne = realloc(map->ents, sizeof *ne * (size_t)(map->n_ents + 1));
    if (!ne) return NULL;
    map->ents = ne;
    char *k = strdup(key);
    if (!k) return NULL;
    exp_entry *e = &map->ents[map->n_ents++];
    e->key = k;
    e->kloc = kloc;
    e->val = val;
    return e;
}

const char *exp_kind_name(const exp_node *n) {
    return n->kind == EXP_MAP ? "a mapping" : n->kind == EXP_SEQ ? "a list" : "a scalar";
}

int exp_is_null(const exp_node *n) {
    if (n->kind != EXP_SCALAR || !n->plain) return 0;
    return n->len == 0 || !strcmp(n->str, "~") || !strcmp(n->str, "null") ||
           !strcmp(n->str, "Null") || !strcmp(n->str, "NULL");
}

typedef struct conv {
    yaml_document_t *doc;
    const char *file;
    const char *origin;
    ig_error *err;
} conv;

static exp_loc mark_loc(const conv *c, yaml_mark_t m) {
    exp_loc l = {c->origin, (int)m.line + 1, (int)m.column + 1};
    return l;
}

static void join(char *dst, size_t n, const char *a, const char *sep, const char *b) {
    snprintf(dst, n, "%s%s%s", a, a[0] ? sep : "", b);
}

static ig_status nomem(ig_error *err) {
    return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
}

static ig_status convert(conv *c, yaml_node_t *y, const char *path, int depth, exp_node **out) {
    *out = NULL;
    if (depth > EXP_MAX_DEPTH)
        return exp_fail(c->err, c->file, mark_loc(c, y->start_mark), path,
                        "nested more than %d levels deep (a recursive alias?)", EXP_MAX_DEPTH);
    exp_kind k = y->type == YAML_MAPPING_NODE    ? EXP_MAP
                 : y->type == YAML_SEQUENCE_NODE ? EXP_SEQ
                                                 : EXP_SCALAR;
    exp_node *n = exp_node_new(k, mark_loc(c, y->start_mark));
    if (!n) return nomem(c->err);
    ig_status st = IG_OK;
    if (k == EXP_SCALAR) {
        n->len = y->data.scalar.length;
        n->str = malloc(n->len + 1);
        if (!n->str) {
            exp_node_free(n);
            return nomem(c->err);
        }
        memcpy(n->str, y->data.scalar.value, n->len);
        n->str[n->len] = '\0';
        /* an explicit tag (!!str) makes a plain scalar a string, like quotes do */
        int tagged = y->tag && strcmp((const char *)y->tag, YAML_DEFAULT_SCALAR_TAG) != 0;
        n->plain = y->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !tagged;
        if (memchr(n->str, '\0', n->len))
            st = exp_fail(c->err, c->file, n->loc, path, "the value contains a NUL byte");
    } else if (k == EXP_SEQ) {
        int cnt = (int)(y->data.sequence.items.top - y->data.sequence.items.start);
        n->items = calloc((size_t)(cnt ? cnt : 1), sizeof *n->items);
        if (!n->items) st = nomem(c->err);
        for (int i = 0; i < cnt && st == IG_OK; i++) {
            char sub[512], idx[24];
            snprintf(idx, sizeof idx, "[%d]", i);
            snprintf(sub, sizeof sub, "%s%s", path, idx);
            yaml_node_t *el = yaml_document_get_node(c->doc, y->data.sequence.items.start[i]);
            st = convert(c, el, sub, depth + 1, &n->items[i]);
            if (st == IG_OK) n->n_items++;
        }
    } else {
        for (yaml_node_pair_t *p = y->data.mapping.pairs.start;
             p < y->data.mapping.pairs.top && st == IG_OK; p++) {
            yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
            yaml_node_t *vn = yaml_document_get_node(c->doc, p->value);
            if (kn->type != YAML_SCALAR_NODE) {
                st = exp_fail(c->err, c->file, mark_loc(c, kn->start_mark), path,
                              "keys must be plain names, found %s",
                              kn->type == YAML_MAPPING_NODE ? "a mapping" : "a list");
                break;
            }
            const char *key = (const char *)kn->data.scalar.value;
            char sub[512];
            join(sub, sizeof sub, path, ".", key);
            if (strlen(key) != kn->data.scalar.length) {
                st = exp_fail(c->err, c->file, mark_loc(c, kn->start_mark), sub,
                              "the key contains a NUL byte");
                break;
            }
            exp_entry *prev = exp_map_entry(n, key);
            if (prev) {
                if (prev->kloc.origin)
                    st = exp_fail(c->err, c->file, mark_loc(c, kn->start_mark), sub,
                                  "duplicate key '%s'", key);
                else
                    st = exp_fail(c->err, c->file, mark_loc(c, kn->start_mark), sub,
                                  "duplicate key '%s' (first given at line %d)", key,
                                  prev->kloc.line);
                break;
            }
            exp_node *v = NULL;
            st = convert(c, vn, sub, depth + 1, &v);
            if (st != IG_OK) break;
            if (!exp_map_add(n, key, mark_loc(c, kn->start_mark), v)) {
                exp_node_free(v);
                st = nomem(c->err);
            }
        }
    }
    if (st != IG_OK) {
        exp_node_free(n);
        return st;
    }
    *out = n;
    return IG_OK;
}

static ig_status syntax_error(const conv *c, const yaml_parser_t *p) {
    if (c->origin)
        return ig_error_set(c->err, IG_ERR_FORMAT, "%s: YAML syntax error in the value: %s%s%s",
                            c->origin, p->problem ? p->problem : "unknown problem",
                            p->context ? " " : "", p->context ? p->context : "");
    return ig_error_set(c->err, IG_ERR_FORMAT, "%s:%zu:%zu: YAML syntax error: %s%s%s", c->file,
                        p->problem_mark.line + 1, p->problem_mark.column + 1,
                        p->problem ? p->problem : "unknown problem", p->context ? " " : "",
                        p->context ? p->context : "");
}

ig_status exp_tree_parse(const char *text, size_t len, const char *file, const char *origin,
                         exp_node **out, ig_error *err) {
    *out = NULL;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) return ig_error_set(err, IG_ERR_NOMEM, "libyaml init");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    conv c = {NULL, file, origin, err};
    yaml_document_t doc;
    ig_status st = IG_OK;
    if (!yaml_parser_load(&parser, &doc)) {
        st = syntax_error(&c, &parser);
        yaml_parser_delete(&parser);
        return st;
    }
    c.doc = &doc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    yaml_mark_t where;
    char why[256];
    if (root && ig_yaml_guard_check(&doc, &where, why, sizeof why))
        st = exp_fail(err, file, mark_loc(&c, where), "", "%s", why);
    else if (root)
        st = convert(&c, root, "", 0, out);
    yaml_document_delete(&doc);
    if (st == IG_OK && root) {
        yaml_document_t more;
        if (!yaml_parser_load(&parser, &more)) {
            st = syntax_error(&c, &parser);
        } else {
            yaml_node_t *r2 = yaml_document_get_root_node(&more);
            if (r2)
                st = exp_fail(err, file, mark_loc(&c, r2->start_mark), "",
                              "a second YAML document; expected one");
            yaml_document_delete(&more);
        }
    }
    yaml_parser_delete(&parser);
    if (st == IG_OK && !*out && origin) {
        /* "--set k=" : an empty value */
        exp_loc l = {origin, 0, 0};
        *out = exp_node_new(EXP_SCALAR, l);
        if (*out) (*out)->str = strdup("");
        if (!*out || !(*out)->str) st = nomem(err);
        if (st == IG_OK) (*out)->plain = 1;
    }
    if (st != IG_OK) {
        exp_node_free(*out);
        *out = NULL;
    }
    return st;
}
