/* Table-driven YAML configuration loading (see yamlcfg.h). The whole document is loaded with
 * libyaml's document API so that each node keeps its start mark; semantic errors then point at the
 * key or value that is wrong. Never leaves a partly parsed document allocated. */
#include "offload/yamlcfg.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <yaml.h>

#include "core/model/io/yaml_guard.h"

typedef struct ycx {
    yaml_document_t *doc;
    const char *name;
    ig_error *err;
} ycx;

int ig_yamlcfg_edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63) la = 63;
    if (lb > 63) lb = 63;
    int prev[64], cur[64];
    for (int j = 0; j <= lb; j++) prev[j] = j;
    for (int i = 1; i <= la; i++) {
        cur[0] = i;
        for (int j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            int m = sub < del ? sub : del;
            cur[j] = m < ins ? m : ins;
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(lb + 1));
    }
    return prev[lb];
}

void ig_yamlcfg_fmt_double(char *buf, size_t n, double v) {
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    /* a bare integer reads back as an int in YAML-aware tools; keep it a float for clarity */
    if (!strpbrk(buf, ".eEn")) {
        size_t l = strlen(buf);
        if (l + 2 < n) memcpy(buf + l, ".0", 3);
    }
}

void ig_yamlcfg_fmt_string(char *buf, size_t n, const char *s) {
    size_t o = 0;
    if (n < 3) {
        if (n) buf[0] = '\0';
        return;
    }
    buf[o++] = '"';
    /* each step writes at most 6 bytes; the closing quote and NUL need 2 more */
    while (*s && o + 8 < n) {
        unsigned cp;
        size_t len = ig_utf8_seq((const unsigned char *)s, &cp);
        if (len == 0) { /* not UTF-8, which YAML cannot hold: U+FFFD, as a lossy decoder does */
            o += (size_t)snprintf(buf + o, n - o, "\\uFFFD");
            s++;
            continue;
        }
        if (cp == '"' || cp == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)cp;
        } else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
            /* C0 and C1 controls (U+0085 is a YAML line break): escaped by code point */
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", cp);
        } else if (cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF) {
            /* line and paragraph separators (YAML line breaks) and the byte order mark */
            o += (size_t)snprintf(buf + o, n - o, "\\u%04X", cp);
        } else {
            memcpy(buf + o, s, len);
            o += len;
        }
        s += len;
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

static ig_status fail_at(ycx *c, yaml_mark_t mark, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ig_status fail_at(ycx *c, yaml_mark_t mark, const char *path, const char *fmt, ...) {
    char what[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ig_error_set(c->err, IG_ERR_FORMAT, "%s:%zu:%zu: %s: %s", c->name, mark.line + 1,
                        mark.column + 1, path[0] ? path : "(top level)", what);
}

/* dst = a + sep + b, truncated to n - 1 bytes. */
static void join_path(char *dst, size_t n, const char *a, const char *sep, const char *b) {
    size_t o = 0;
    const char *parts[3] = {a, sep, b};
    for (int i = 0; i < 3; i++)
        for (const char *s = parts[i]; *s && o + 1 < n; s++) dst[o++] = *s;
    dst[o] = '\0';
}

static const char *node_kind_name(const yaml_node_t *n) {
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_SCALAR_NODE:
        return "a scalar";
    default:
        return "nothing";
    }
}

/* A short printable copy of a scalar for messages. */
static void scalar_show(const yaml_node_t *n, char *buf, size_t len) {
    size_t l = n->data.scalar.length;
    if (l > 40) l = 40;
    size_t o = 0;
    for (size_t i = 0; i < l && o + 1 < len; i++) {
        unsigned char ch = n->data.scalar.value[i];
        buf[o++] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    }
    buf[o] = '\0';
    if (n->data.scalar.length > 40 && o + 4 < len) memcpy(buf + o, "...", 4);
}

static int scalar_is_plain(const yaml_node_t *n) {
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static ig_status expect_scalar(ycx *c, const yaml_node_t *n, const char *path, const char *what) {
    if (n->type != YAML_SCALAR_NODE)
        return fail_at(c, n->start_mark, path, "expected %s, found %s", what, node_kind_name(n));
    return IG_OK;
}

static ig_status load_map(ycx *c, yaml_node_t *map, const ig_yfield *fields, char *dst,
                          const char *path);

/* Loads a mapping described by field f (MAP or LIST element) and runs its cross-field check. */
static ig_status load_map_checked(ycx *c, yaml_node_t *map, const ig_yfield *f, char *dst,
                                  const char *path) {
    IG_TRY(load_map(c, map, f->sub, dst, path));
    if (!f->check) return IG_OK;
    const char *key = NULL;
    char why[400] = "";
    if (!f->check(dst, &key, why, sizeof why)) return IG_OK;
    char sub[512];
    join_path(sub, sizeof sub, path, path[0] && key ? "." : "", key ? key : "");
    /* point at the key's value (following a dotted path through nested mappings), else at the
     * mapping */
    yaml_mark_t mark = map->start_mark;
    yaml_node_t *cur = map;
    const char *k = key;
    while (k && *k && cur && cur->type == YAML_MAPPING_NODE) {
        size_t kl = strcspn(k, ".");
        yaml_node_t *next = NULL;
        for (yaml_node_pair_t *p = cur->data.mapping.pairs.start; p < cur->data.mapping.pairs.top;
             p++) {
            yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
            if (kn->type == YAML_SCALAR_NODE && kn->data.scalar.length == kl &&
                !memcmp(kn->data.scalar.value, k, kl))
                next = yaml_document_get_node(c->doc, p->value);
        }
        if (!next) break;
        mark = next->start_mark;
        cur = next;
        k += kl;
        if (*k == '.') k++;
    }
    return fail_at(c, mark, sub, "%s", why);
}

static ig_status load_value(ycx *c, yaml_node_t *v, const ig_yfield *f, char *dst,
                            const char *path) {
    char show[64];
    switch (f->kind) {
    case IG_YK_STR: {
        IG_TRY(expect_scalar(c, v, path, "a string"));
        if (v->data.scalar.length + 1 > f->size)
            return fail_at(c, v->start_mark, path, "string of %zu bytes is longer than %zu",
                           v->data.scalar.length, f->size - 1);
        if (memchr(v->data.scalar.value, '\0', v->data.scalar.length))
            return fail_at(c, v->start_mark, path, "string contains a NUL byte");
        memcpy(dst + f->off, v->data.scalar.value, v->data.scalar.length);
        dst[f->off + v->data.scalar.length] = '\0';
        return IG_OK;
    }
    case IG_YK_NUM:
    case IG_YK_INT: {
        const char *what = f->kind == IG_YK_NUM ? "a number" : "an integer";
        IG_TRY(expect_scalar(c, v, path, what));
        scalar_show(v, show, sizeof show);
        if (!scalar_is_plain(v))
            return fail_at(c, v->start_mark, path, "expected %s, found the quoted string \"%s\"",
                           what, show);
        const char *s = (const char *)v->data.scalar.value;
        char *end = NULL;
        errno = 0;
        double d;
        if (f->kind == IG_YK_NUM) {
            d = strtod(s, &end);
        } else {
            long l = strtol(s, &end, 10);
            d = (double)l;
        }
        if (errno || end == s || *end || !isfinite(d) || v->data.scalar.length == 0)
            return fail_at(c, v->start_mark, path, "expected %s, found '%s'", what, show);
        int below = f->min_exclusive ? !(d > f->min) : !(d >= f->min);
        if (below || d > f->max) {
            char lo[40], hi[40];
            ig_yamlcfg_fmt_double(lo, sizeof lo, f->min);
            ig_yamlcfg_fmt_double(hi, sizeof hi, f->max);
            if (f->kind == IG_YK_INT) {
                snprintf(lo, sizeof lo, "%.0f", f->min);
                snprintf(hi, sizeof hi, "%.0f", f->max);
            }
            if (f->min_exclusive)
                return fail_at(c, v->start_mark, path, "%s is out of range: must be > %s and <= %s",
                               show, lo, hi);
            return fail_at(c, v->start_mark, path, "%s is out of range: must be in [%s, %s]", show,
                           lo, hi);
        }
        if (f->kind == IG_YK_NUM)
            memcpy(dst + f->off, &d, sizeof d);
        else {
            int i = (int)d;
            memcpy(dst + f->off, &i, sizeof i);
        }
        return IG_OK;
    }
    case IG_YK_BOOL: {
        IG_TRY(expect_scalar(c, v, path, "true or false"));
        scalar_show(v, show, sizeof show);
        int b;
        if (scalar_is_plain(v) && !strcmp(show, "true"))
            b = 1;
        else if (scalar_is_plain(v) && !strcmp(show, "false"))
            b = 0;
        else
            return fail_at(c, v->start_mark, path, "expected true or false, found '%s'", show);
        memcpy(dst + f->off, &b, sizeof b);
        return IG_OK;
    }
    case IG_YK_ENUM: {
        IG_TRY(expect_scalar(c, v, path, "a name"));
        scalar_show(v, show, sizeof show);
        char list[256] = "";
        for (int i = 0; f->names[i]; i++) {
            if (!strcmp(show, f->names[i]) && v->data.scalar.length == strlen(f->names[i])) {
                memcpy(dst + f->off, &i, sizeof i);
                return IG_OK;
            }
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     f->names[i]);
        }
        return fail_at(c, v->start_mark, path, "'%s' is not one of %s", show, list);
    }
    case IG_YK_MAP:
        if (f->present_off >= 0) {
            int one = 1;
            memcpy(dst + f->present_off, &one, sizeof one);
        }
        return load_map_checked(c, v, f, dst + f->off, path);
    case IG_YK_LIST: {
        if (v->type != YAML_SEQUENCE_NODE)
            return fail_at(c, v->start_mark, path, "expected a list, found %s", node_kind_name(v));
        int n = 0;
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
             it++, n++) {
            yaml_node_t *el = yaml_document_get_node(c->doc, *it);
            char sub[512];
            char idx[24];
            snprintf(idx, sizeof idx, "[%d]", n);
            join_path(sub, sizeof sub, path, "", idx);
            if (n >= f->max_count)
                return fail_at(c, el->start_mark, sub, "more than %d entries", f->max_count);
            IG_TRY(load_map_checked(c, el, f, dst + f->off + (size_t)n * f->size, sub));
        }
        if (n == 0) return fail_at(c, v->start_mark, path, "the list is empty");
        memcpy(dst + f->count_off, &n, sizeof n);
        return IG_OK;
    }
    }
    return ig_error_set(c->err, IG_ERR_INTERNAL, "yamlcfg: bad field kind");
}

static ig_status load_map(ycx *c, yaml_node_t *map, const ig_yfield *fields, char *dst,
                          const char *path) {
    if (map->type != YAML_MAPPING_NODE)
        return fail_at(c, map->start_mark, path, "expected a mapping, found %s",
                       node_kind_name(map));
    int nf = 0;
    while (fields[nf].key) nf++;
    unsigned char seen[64] = {0};
    IG_ASSERT(nf <= 64);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return fail_at(c, k->start_mark, path, "keys must be plain names, found %s",
                           node_kind_name(k));
        char key[64];
        scalar_show(k, key, sizeof key);
        char sub[512];
        join_path(sub, sizeof sub, path, path[0] ? "." : "", key);
        int idx = -1;
        for (int i = 0; i < nf; i++)
            if (k->data.scalar.length == strlen(fields[i].key) && !strcmp(key, fields[i].key))
                idx = i;
        if (idx < 0) {
            int best = 0, bd = 1 << 30;
            for (int i = 0; i < nf; i++) {
                int d = ig_yamlcfg_edit_distance(key, fields[i].key);
                if (d < bd) bd = d, best = i;
            }
            char valid[512] = "";
            for (int i = 0; i < nf; i++)
                snprintf(valid + strlen(valid), sizeof valid - strlen(valid), "%s%s", i ? ", " : "",
                         fields[i].key);
            return fail_at(c, k->start_mark, sub, "unknown key (did you mean '%s'? valid keys: %s)",
                           fields[best].key, valid);
        }
        if (seen[idx]) return fail_at(c, k->start_mark, sub, "duplicate key");
        seen[idx] = 1;
        IG_TRY(load_value(c, v, &fields[idx], dst, sub));
    }
    for (int i = 0; i < nf; i++)
        if (fields[i].required && !seen[i])
            return fail_at(c, map->start_mark, path, "missing required key '%s'", fields[i].key);
    return IG_OK;
}

static ig_status load_parser(yaml_parser_t *parser, const char *name, const ig_yfield *root,
                             void *dst, ig_error *err) {
    yaml_document_t doc;
    if (!yaml_parser_load(parser, &doc)) {
        ig_status st =
            ig_error_set(err, IG_ERR_FORMAT, "%s:%zu:%zu: YAML syntax error: %s%s%s", name,
                         parser->problem_mark.line + 1, parser->problem_mark.column + 1,
                         parser->problem ? parser->problem : "unknown problem",
                         parser->context ? " " : "", parser->context ? parser->context : "");
        return st;
    }
    ycx c = {&doc, name, err};
    yaml_node_t *top = yaml_document_get_root_node(&doc);
    ig_status st;
    yaml_mark_t where;
    char why[256];
    if (!top) {
        st = ig_error_set(err, IG_ERR_FORMAT, "%s:1:1: (top level): the file is empty", name);
    } else if (ig_yaml_guard_check(&doc, &where, why, sizeof why)) {
        st = ig_error_set(err, IG_ERR_FORMAT, "%s:%zu:%zu: %s", name, where.line + 1,
                          where.column + 1, why);
    } else {
        st = load_map_checked(&c, top, root, dst, "");
    }
    yaml_document_delete(&doc);
    if (st == IG_OK) {
        /* a second document in the same file is almost certainly a mistake */
        yaml_document_t more;
        if (!yaml_parser_load(parser, &more))
            return ig_error_set(err, IG_ERR_FORMAT, "%s:%zu:%zu: YAML syntax error: %s", name,
                                parser->problem_mark.line + 1, parser->problem_mark.column + 1,
                                parser->problem ? parser->problem : "unknown problem");
        int extra = yaml_document_get_root_node(&more) != NULL;
        yaml_mark_t m = extra ? yaml_document_get_root_node(&more)->start_mark : (yaml_mark_t){0};
        yaml_document_delete(&more);
        if (extra)
            return ig_error_set(err, IG_ERR_FORMAT,
                                "%s:%zu:%zu: (top level): a second YAML document; expected one",
                                name, m.line + 1, m.column + 1);
    }
    return st;
}

ig_status ig_yamlcfg_load_string(const char *text, size_t len, const char *name,
                                 const ig_yfield *root, void *dst, ig_error *err) {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) return ig_error_set(err, IG_ERR_NOMEM, "libyaml init");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    ig_status st = load_parser(&parser, name, root, dst, err);
    yaml_parser_delete(&parser);
    return st;
}

ig_status ig_yamlcfg_load_file(const char *path, const ig_yfield *root, void *dst, ig_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return ig_error_set(err, IG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st_;
    if (fstat(fileno(f), &st_) == 0 && S_ISREG(st_.st_mode) &&
        (size_t)st_.st_size > IG_YAML_MAX_BYTES) {
        fclose(f);
        return ig_error_set(err, IG_ERR_FORMAT,
                            "%s: larger than %zu MiB, the limit for a YAML file", path,
                            IG_YAML_MAX_BYTES >> 20);
    }
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        return ig_error_set(err, IG_ERR_NOMEM, "libyaml init");
    }
    yaml_parser_set_input_file(&parser, f);
    ig_status st = load_parser(&parser, path, root, dst, err);
    yaml_parser_delete(&parser);
    fclose(f);
    return st;
}
