/* The results store: results.jsonl (append-only, one record per line, last record per key wins),
 * parts for multi-machine runs, results.csv and the summary table. See results.h for the
 * durability guarantee. */
#include "core/app/exp/results.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/app/exp/results_internal.h"

typedef struct entry {
    json_object *rec; /* the last record with this key (owned) */
    long point;       /* its "point" (LONG_MAX if absent) */
    long seq;         /* file order of that last record */
} entry;

struct ig_results {
    char *dir;
    char *path;          /* DIR/results.jsonl */
    json_object *by_key; /* key -> int index into entries */
    entry *entries;
    int n, cap;
    int *order; /* entries in point order */
    long next_seq;
};

/* ---- small helpers ---- */

char *ig_exp_path_join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (!s) return NULL;
    memcpy(s, a, la);
    s[la] = '/';
    memcpy(s + la + 1, b, lb + 1);
    return s;
}

ig_status ig_exp_mkdir_p(const char *dir, ig_error *err) {
    char *p = strdup(dir);
    if (!p) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/') p[--len] = '\0';
    for (char *s = p + 1;; s++) {
        int last = *s == '\0';
        if (*s == '/' || last) {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                ig_status rc = ig_error_set(err, IG_ERR_IO, "cannot create directory %s: %s", p,
                                            strerror(errno));
                free(p);
                return rc;
            }
            *s = c;
        }
        if (last) break;
    }
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
        ig_status rc = ig_error_set(err, IG_ERR_IO, "%s is not a directory", p);
        free(p);
        return rc;
    }
    free(p);
    return IG_OK;
}

static void fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

ig_status ig_exp_read_file(const char *path, char **out, size_t *len, ig_error *err) {
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return ig_error_set(err, IG_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                return ig_error_set(err, IG_ERR_NOMEM, "out of memory reading %s", path);
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return ig_error_set(err, IG_ERR_IO, "cannot read %s", path);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return IG_OK;
}

/* Parses exactly one JSON value from s[0..len); NULL (and a reason) if it does not parse or has
 * trailing text. */
static json_object *parse_exact(const char *s, size_t len, const char **why) {
    json_tokener *tok = json_tokener_new();
    if (!tok) {
        *why = "out of memory";
        return NULL;
    }
    json_object *o = json_tokener_parse_ex(tok, s, (int)len);
    enum json_tokener_error je = json_tokener_get_error(tok);
    if (!o && je == json_tokener_continue) {
        *why = "unexpected end of line";
    } else if (!o) {
        *why = json_tokener_error_desc(je);
    } else {
        size_t used = json_tokener_get_parse_end(tok);
        while (used < len && (s[used] == ' ' || s[used] == '\t' || s[used] == '\r')) used++;
        if (used != len) {
            json_object_put(o);
            o = NULL;
            *why = "text after the JSON value";
        }
    }
    json_tokener_free(tok);
    return o;
}

static const char *rec_key(json_object *rec) {
    json_object *k;
    if (!json_object_is_type(rec, json_type_object) || !json_object_object_get_ex(rec, "key", &k) ||
        !json_object_is_type(k, json_type_string))
        return NULL;
    return json_object_get_string(k);
}

static long rec_point(json_object *rec) {
    json_object *p;
    if (json_object_object_get_ex(rec, "point", &p) && json_object_is_type(p, json_type_int))
        return (long)json_object_get_int64(p);
    return LONG_MAX;
}

static int rec_status_ok(json_object *rec) {
    json_object *s;
    return rec && json_object_object_get_ex(rec, "status", &s) &&
           json_object_is_type(s, json_type_string) && !strcmp(json_object_get_string(s), "ok");
}

/* ---- the in-memory view ---- */

static int cmp_order(const void *a, const void *b, void *ctx) {
    const entry *e = ctx;
    const entry *x = &e[*(const int *)a], *y = &e[*(const int *)b];
    if (x->point != y->point) return x->point < y->point ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void sort_view(ig_results *r) {
    for (int i = 0; i < r->n; i++) r->order[i] = i;
    if (r->n > 1) qsort_r(r->order, (size_t)r->n, sizeof r->order[0], cmp_order, r->entries);
}

/* Takes ownership of rec (a JSON object with a string key). */
static ig_status insert(ig_results *r, json_object *rec, ig_error *err) {
    const char *key = rec_key(rec);
    json_object *idx;
    if (json_object_object_get_ex(r->by_key, key, &idx)) {
        entry *e = &r->entries[json_object_get_int(idx)];
        json_object_put(e->rec);
        e->rec = rec;
        e->point = rec_point(rec);
        e->seq = r->next_seq++;
        return IG_OK;
    }
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 64;
        entry *ne = realloc(r->entries, (size_t)cap * sizeof *ne);
        if (!ne) goto oom;
        r->entries = ne;
        int *no = realloc(r->order, (size_t)cap * sizeof *no);
        if (!no) goto oom;
        r->order = no;
        r->cap = cap;
    }
    if (json_object_object_add(r->by_key, key, json_object_new_int(r->n)) != 0) goto oom;
    r->entries[r->n] = (entry){rec, rec_point(rec), r->next_seq++};
    r->order[r->n] = r->n;
    r->n++;
    return IG_OK;
oom:
    json_object_put(rec);
    return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
}

static ig_status load(ig_results *r, ig_error *err) {
    char *buf;
    size_t len;
    struct stat st;
    if (stat(r->path, &st) != 0) return IG_OK; /* no results yet */
    IG_TRY(ig_exp_read_file(r->path, &buf, &len, err));
    size_t start = 0;
    long line = 0;
    ig_status rc = IG_OK;
    while (start < len) {
        line++;
        char *nl = memchr(buf + start, '\n', len - start);
        if (!nl) {
            /* A torn write: the last line never got its newline. */
            fprintf(stderr,
                    "igen: warning: %s:%ld: discarding an incomplete last line (%zu bytes, an "
                    "interrupted write); the file is truncated back to %zu bytes\n",
                    r->path, line, len - start, start);
            if (truncate(r->path, (off_t)start) != 0)
                rc = ig_error_set(err, IG_ERR_IO, "cannot truncate %s: %s", r->path,
                                  strerror(errno));
            break;
        }
        size_t ll = (size_t)(nl - (buf + start));
        const char *s = buf + start;
        start += ll + 1;
        size_t k = 0;
        while (k < ll && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r')) k++;
        if (k == ll) continue; /* blank line */
        const char *why = NULL;
        json_object *rec = parse_exact(s, ll, &why);
        if (!rec) {
            rc = ig_error_set(err, IG_ERR_FORMAT, "%s:%ld: not valid JSON: %s", r->path, line, why);
            break;
        }
        if (!rec_key(rec)) {
            json_object_put(rec);
            rc = ig_error_set(err, IG_ERR_FORMAT, "%s:%ld: not a record: no string \"key\"",
                              r->path, line);
            break;
        }
        rc = insert(r, rec, err);
        if (rc != IG_OK) break;
    }
    free(buf);
    sort_view(r);
    return rc;
}

ig_status ig_results_open(const char *dir, ig_results **out, ig_error *err) {
    *out = NULL;
    if (!dir || !*dir) return ig_error_set(err, IG_ERR_INVALID_ARG, "no results directory given");
    IG_TRY(ig_exp_mkdir_p(dir, err));
    ig_results *r = calloc(1, sizeof *r);
    if (!r) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    r->dir = strdup(dir);
    r->path = ig_exp_path_join(dir, "results.jsonl");
    r->by_key = json_object_new_object();
    if (!r->dir || !r->path || !r->by_key) {
        ig_results_free(r);
        return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }
    ig_status rc = load(r, err);
    if (rc != IG_OK) {
        ig_results_free(r);
        return rc;
    }
    *out = r;
    return IG_OK;
}

void ig_results_free(ig_results *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) json_object_put(r->entries[i].rec);
    free(r->entries);
    free(r->order);
    json_object_put(r->by_key);
    free(r->dir);
    free(r->path);
    free(r);
}

const char *ig_results_dir(const ig_results *r) {
    return r->dir;
}

json_object *ig_results_find(const ig_results *r, const char *key) {
    json_object *idx;
    if (!key || !json_object_object_get_ex(r->by_key, key, &idx)) return NULL;
    return r->entries[json_object_get_int(idx)].rec;
}

int ig_results_has(const ig_results *r, const char *key) {
    return rec_status_ok(ig_results_find(r, key));
}

int ig_results_count(const ig_results *r) {
    return r->n;
}

json_object *ig_results_get(const ig_results *r, int i) {
    if (i < 0 || i >= r->n) return NULL;
    return r->entries[r->order[i]].rec;
}

/* ---- appending ---- */

/* A copy of v whose doubles print in their shortest round-trip form (json-c prints %.17g:
 * 95.099999999999994 for 95.1); non-finite doubles become null. Scalars are shared. Sets *oom when
 * an allocation fails. */
static json_object *tidy_copy(json_object *v, int *oom) {
    switch (json_object_get_type(v)) {
    case json_type_object: {
        json_object *o = json_object_new_object();
        if (!o) goto fail;
        json_object_object_foreach(v, k, c) {
            json_object *cc = tidy_copy(c, oom);
            if (*oom || json_object_object_add(o, k, cc) != 0) {
                json_object_put(cc);
                json_object_put(o);
                goto fail;
            }
        }
        return o;
    }
    case json_type_array: {
        size_t n = json_object_array_length(v);
        json_object *a = json_object_new_array_ext((int)n);
        if (!a) goto fail;
        for (size_t i = 0; i < n; i++) {
            json_object *cc = tidy_copy(json_object_array_get_idx(v, i), oom);
            if (*oom || json_object_array_add(a, cc) != 0) {
                json_object_put(cc);
                json_object_put(a);
                goto fail;
            }
        }
        return a;
    }
    case json_type_double: {
        double d = json_object_get_double(v);
        if (!isfinite(d)) return NULL;
        char buf[64];
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, d);
            if (strtod(buf, NULL) == d) break;
        }
        if (!strpbrk(buf, ".eE")) strcat(buf, ".0");
        json_object *o = json_object_new_double_s(d, buf);
        if (!o) goto fail;
        return o;
    }
    default:
        return json_object_get(v);
    }
fail:
    *oom = 1;
    return NULL;
}

/* The record as one line, newline included (malloc'ed), and its reparsed copy. */
static ig_status serialise(json_object *record, char **line, size_t *len, json_object **parsed,
                           ig_error *err) {
    *line = NULL;
    *parsed = NULL;
    if (!rec_key(record))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "a results record needs a string \"key\"");
    if (rec_point(record) == LONG_MAX)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "a results record needs an integer \"point\"");
    int oom = 0;
    json_object *t = tidy_copy(record, &oom);
    if (oom) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    const char *js =
        json_object_to_json_string_ext(t, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t n = strlen(js);
    char *s = malloc(n + 2);
    if (!s) {
        json_object_put(t);
        return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    }
    memcpy(s, js, n);
    s[n] = '\n';
    s[n + 1] = '\0';
    json_object_put(t);
    const char *why = NULL;
    json_object *p = parse_exact(s, n, &why);
    if (!p) {
        free(s);
        return ig_error_set(err, IG_ERR_INTERNAL, "a serialised record does not parse back: %s",
                            why);
    }
    *line = s;
    *len = n + 1;
    *parsed = p;
    return IG_OK;
}

/* write() until all of buf is written, restarting on EINTR and after a short write. */
static int write_all(int fd, const char *buf, size_t n) {
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, buf + off, n - off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        off += (size_t)w;
    }
    return 0;
}

ig_status ig_results_append(ig_results *r, json_object *record, ig_error *err) {
    char *line;
    size_t len;
    json_object *parsed;
    IG_TRY(serialise(record, &line, &len, &parsed, err));
    struct stat st;
    int created = stat(r->path, &st) != 0;
    int fd = open(r->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    ig_status rc = IG_OK;
    if (fd < 0) {
        rc = ig_error_set(err, IG_ERR_IO, "cannot open %s: %s", r->path, strerror(errno));
        goto out;
    }
    off_t before = fstat(fd, &st) == 0 ? st.st_size : -1;
    /* One write() of the whole line: with O_APPEND the kernel places it at the end in one step, so
     * the line is either all there or (killed inside this call) cut short at the end of the file,
     * where ig_results_open finds it without its newline. */
    if (write_all(fd, line, len) != 0 || fsync(fd) != 0) {
        int e = errno;
        if (before >= 0 && ftruncate(fd, before) == 0) (void)fsync(fd);
        rc = ig_error_set(err, IG_ERR_IO, "cannot append to %s: %s", r->path, strerror(e));
        close(fd);
        goto out;
    }
    if (close(fd) != 0) {
        rc = ig_error_set(err, IG_ERR_IO, "cannot append to %s: %s", r->path, strerror(errno));
        goto out;
    }
    if (created) fsync_dir(r->dir);
    rc = insert(r, parsed, err);
    parsed = NULL;
    if (rc == IG_OK) sort_view(r);
out:
    json_object_put(parsed);
    free(line);
    return rc;
}

/* ---- parts ---- */

ig_status ig_results_append_part(const char *dir, int point_index, json_object *record,
                                 ig_error *err) {
    if (point_index < 0)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "negative point index %d", point_index);
    char *parts = ig_exp_path_join(dir, "parts");
    if (!parts) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    ig_status rc = ig_exp_mkdir_p(parts, err);
    if (rc != IG_OK) {
        free(parts);
        return rc;
    }
    char *line = NULL;
    size_t len;
    json_object *parsed = NULL;
    rc = serialise(record, &line, &len, &parsed, err);
    json_object_put(parsed);
    size_t pl = strlen(parts) + 64;
    char *tmp = malloc(pl), *final = malloc(pl);
    if (rc == IG_OK && (!tmp || !final)) rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    if (rc == IG_OK) {
        snprintf(tmp, pl, "%s/.point-%06d.json.%ld.tmp", parts, point_index, (long)getpid());
        snprintf(final, pl, "%s/point-%06d.json", parts, point_index);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            rc = ig_error_set(err, IG_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        } else {
            int bad = write_all(fd, line, len) != 0 || fsync(fd) != 0;
            int e = errno;
            if (close(fd) != 0 && !bad) {
                bad = 1;
                e = errno;
            }
            if (bad || rename(tmp, final) != 0) {
                if (!bad) e = errno;
                rc = ig_error_set(err, IG_ERR_IO, "cannot write %s: %s", final, strerror(e));
                unlink(tmp);
            } else {
                fsync_dir(parts);
            }
        }
    }
    free(tmp);
    free(final);
    free(line);
    free(parts);
    return rc;
}

typedef struct part {
    long index;
    char *path;
    json_object *rec;
} part;

static int cmp_part(const void *a, const void *b) {
    const part *x = a, *y = b;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* "point-NNNNNN.json" -> NNNNNN, else -1. */
static long part_index(const char *name) {
    if (strncmp(name, "point-", 6) != 0) return -1;
    const char *d = name + 6;
    size_t nd = strspn(d, "0123456789");
    if (nd == 0 || nd > 12 || strcmp(d + nd, ".json") != 0) return -1;
    return strtol(d, NULL, 10);
}

ig_status ig_results_merge(ig_results *r, ig_error *err) {
    char *parts_dir = ig_exp_path_join(r->dir, "parts");
    if (!parts_dir) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    DIR *d = opendir(parts_dir);
    if (!d) {
        int e = errno;
        free(parts_dir);
        if (e == ENOENT) return IG_OK;
        return ig_error_set(err, IG_ERR_IO, "cannot read %s/parts: %s", r->dir, strerror(e));
    }
    part *ps = NULL;
    int n = 0, cap = 0;
    ig_status rc = IG_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        long idx = part_index(de->d_name);
        if (idx < 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            part *np = realloc(ps, (size_t)cap * sizeof *np);
            if (!np) {
                rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
                break;
            }
            ps = np;
        }
        ps[n] = (part){idx, ig_exp_path_join(parts_dir, de->d_name), NULL};
        if (!ps[n++].path) {
            rc = ig_error_set(err, IG_ERR_NOMEM, "out of memory");
            break;
        }
    }
    closedir(d);
    if (rc == IG_OK && n) qsort(ps, (size_t)n, sizeof *ps, cmp_part);
    /* Parse every part before changing anything. */
    for (int i = 0; rc == IG_OK && i < n; i++) {
        char *buf;
        size_t len;
        rc = ig_exp_read_file(ps[i].path, &buf, &len, err);
        if (rc != IG_OK) break;
        const char *why = "no string \"key\"";
        ps[i].rec = parse_exact(buf, len && buf[len - 1] == '\n' ? len - 1 : len, &why);
        free(buf);
        if (!ps[i].rec || !rec_key(ps[i].rec))
            rc = ig_error_set(err, IG_ERR_FORMAT, "%s: not a valid results record: %s", ps[i].path,
                              why);
    }
    for (int i = 0; rc == IG_OK && i < n; i++) {
        json_object *have = ig_results_find(r, rec_key(ps[i].rec));
        if (!rec_status_ok(have) && !(have && json_object_equal(have, ps[i].rec)))
            rc = ig_results_append(r, ps[i].rec, err);
        if (rc == IG_OK && unlink(ps[i].path) != 0 && errno != ENOENT)
            rc = ig_error_set(err, IG_ERR_IO, "cannot remove %s: %s", ps[i].path, strerror(errno));
    }
    if (rc == IG_OK) (void)rmdir(parts_dir); /* only if empty */
    for (int i = 0; i < n; i++) {
        free(ps[i].path);
        json_object_put(ps[i].rec);
    }
    free(ps);
    free(parts_dir);
    return rc;
}
