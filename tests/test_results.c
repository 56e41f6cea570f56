/* The results store (results.jsonl: append, reopen, torn lines, last record wins, parts and
 * merge, kill -9 mid-append), results.csv against the JSONL, the summary table, the progress line,
 * and the errors of the plots that need no gnuplot (the plots themselves: test_plot.c). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/app/exp/plot.h"
#include "core/app/exp/results.h"
#include "tests/results_records.h"
#include "tests/test_util.h"

#define fresh_dir ig_test_fresh_dir
#define slurp     ig_test_slurp

static void spit(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

#define make_record ig_test_make_record

static const char *str_at(json_object *o, const char *k) {
    json_object *v;
    return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : NULL;
}

static void append_ok(ig_results *r, json_object *rec) {
    ig_error err = {0};
    CU_ASSERT_EQUAL(ig_results_append(r, rec, &err), IG_OK);
    if (err.code) fprintf(stderr, "append: %s\n", err.msg);
    json_object_put(rec);
}

static void test_roundtrip(void) {
    const char *dir = fresh_dir("rt/nested/dir");
    ig_results *r = NULL;
    ig_error err = {0};
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_results_count(r), 0);
    append_ok(r, make_record(2, "k2", "ok", "h2o", 8, 512, 95.1));
    append_ok(r, make_record(0, "k0", "ok", "full", 8, 512, 80.25));
    append_ok(r, make_record(1, "k1", "error", "infinigen", 8, 512, 3));
    /* not records: no key, no point */
    json_object *bad = json_object_new_object();
    CU_ASSERT_EQUAL(ig_results_append(r, bad, &err), IG_ERR_INVALID_ARG);
    json_object_object_add(bad, "key", json_object_new_string("x"));
    CU_ASSERT_EQUAL(ig_results_append(r, bad, &err), IG_ERR_INVALID_ARG);
    json_object_put(bad);
    CU_ASSERT_EQUAL(ig_results_count(r), 3);
    ig_results_free(r);

    char path[4200];
    snprintf(path, sizeof path, "%s/results.jsonl", dir);
    char *text = slurp(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(count_lines(text), 3);
    /* shortest round-trip doubles, not json-c's %.17g */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"throughput_tok_s\":95.1,"));
    CU_ASSERT_PTR_NULL(strstr(text, "95.09999"));
    free(text);

    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_results_count(r), 3);
    /* point order, whatever the file order */
    for (int i = 0; i < 3; i++) {
        char k[8];
        snprintf(k, sizeof k, "k%d", i);
        CU_ASSERT_STRING_EQUAL(str_at(ig_results_get(r, i), "key"), k);
    }
    json_object *expect = make_record(2, "k2", "ok", "h2o", 8, 512, 95.1);
    CU_ASSERT(json_object_equal(ig_results_find(r, "k2"), expect));
    json_object_put(expect);
    CU_ASSERT(ig_results_has(r, "k0"));
    CU_ASSERT(!ig_results_has(r, "k1")); /* status error */
    CU_ASSERT(!ig_results_has(r, "nope"));
    CU_ASSERT_PTR_NULL(ig_results_get(r, 3));
    ig_results_free(r);
}

static void test_torn_line(void) {
    const char *dir = fresh_dir("torn");
    ig_results *r = NULL;
    ig_error err = {0};
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    append_ok(r, make_record(0, "a", "ok", "full", 1, 64, 1));
    append_ok(r, make_record(1, "b", "ok", "full", 1, 128, 2));
    ig_results_free(r);
    char path[4200];
    snprintf(path, sizeof path, "%s/results.jsonl", dir);
    size_t good_len;
    char *good = slurp(path, &good_len);
    /* an interrupted write: half a record, no newline; then one that happens to be complete JSON
     * but still has no newline (never committed) */
    const char *tails[] = {"{\"key\":\"c\",\"point\":2,\"stat", "{\"key\":\"c\",\"point\":2}"};
    for (int t = 0; t < 2; t++) {
        FILE *f = fopen(path, "ab");
        fputs(tails[t], f);
        fclose(f);
        CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_results_count(r), 2);
        CU_ASSERT_PTR_NULL(ig_results_find(r, "c"));
        size_t len;
        char *now = slurp(path, &len);
        CU_ASSERT_EQUAL(len, good_len);
        CU_ASSERT(!strcmp(now, good));
        free(now);
        /* appending after the truncation gives clean lines */
        append_ok(r, make_record(2, "c", "ok", "full", 1, 256, 3));
        ig_results_free(r);
        CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
        CU_ASSERT_EQUAL(ig_results_count(r), 3);
        ig_results_free(r);
        spit(path, good);
    }
    free(good);
}

static void test_invalid_line(void) {
    const char *dir = fresh_dir("invalid");
    ig_results *r = NULL;
    ig_error err = {0};
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    ig_results_free(r);
    char path[4200];
    snprintf(path, sizeof path, "%s/results.jsonl", dir);
    spit(path, "{\"key\":\"a\",\"point\":0,\"status\":\"ok\"}\n\n"
               "{\"key\":\"b\",\"point\":1,\"status\":\"ok\"}\n"
               "{\"key\":\"c\", oops}\n"
               "{\"key\":\"d\",\"point\":3,\"status\":\"ok\"}\n");
    r = (ig_results *)1;
    CU_ASSERT_EQUAL(ig_results_open(dir, &r, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "results.jsonl:4: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not valid JSON"));
    /* valid JSON but not a record; trailing garbage after a value */
    spit(path, "{\"key\":\"a\",\"point\":0}\n[1,2]\n");
    CU_ASSERT_EQUAL(ig_results_open(dir, &r, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "results.jsonl:2: "));
    spit(path, "{\"key\":\"a\",\"point\":0} x\n");
    CU_ASSERT_EQUAL(ig_results_open(dir, &r, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "results.jsonl:1: "));
    /* the file is left alone */
    char *now = slurp(path, NULL);
    CU_ASSERT_STRING_EQUAL(now, "{\"key\":\"a\",\"point\":0} x\n");
    free(now);
}

static void test_last_record_wins(void) {
    const char *dir = fresh_dir("lastwins");
    ig_results *r = NULL;
    ig_error err = {0};
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    append_ok(r, make_record(0, "a", "ok", "full", 1, 64, 10));
    append_ok(r, make_record(1, "b", "error", "h2o", 1, 64, 0));
    CU_ASSERT(!ig_results_has(r, "b"));
    append_ok(r, make_record(1, "b", "ok", "h2o", 1, 64, 42));
    CU_ASSERT(ig_results_has(r, "b"));
    CU_ASSERT_EQUAL(ig_results_count(r), 2);
    append_ok(r, make_record(0, "a", "error", "full", 1, 64, 0)); /* a rerun that failed */
    CU_ASSERT(!ig_results_has(r, "a"));
    ig_results_free(r);
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_results_count(r), 2);
    CU_ASSERT(!ig_results_has(r, "a"));
    CU_ASSERT(ig_results_has(r, "b"));
    json_object *m;
    CU_ASSERT_FATAL(json_object_object_get_ex(ig_results_find(r, "b"), "metrics", &m));
    IG_ASSERT_NEAR(json_object_get_double(json_object_object_get(m, "throughput_tok_s")), 42, 0);
    CU_ASSERT_STRING_EQUAL(str_at(ig_results_get(r, 0), "key"), "a");
    CU_ASSERT_STRING_EQUAL(str_at(ig_results_get(r, 0), "status"), "error");
    ig_results_free(r);
}

static void test_parts_merge(void) {
    const char *dir = fresh_dir("parts");
    ig_results *r = NULL;
    ig_error err = {0};
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    append_ok(r, make_record(0, "p0", "ok", "full", 1, 64, 1));
    append_ok(r, make_record(1, "p1", "ok", "full", 1, 128, 2));
    /* parts from "other machines", written out of order; point 1 is already in results.jsonl */
    int idx[] = {5, 2, 1, 3, 4};
    for (int i = 0; i < 5; i++) {
        char key[8];
        snprintf(key, sizeof key, "p%d", idx[i]);
        json_object *rec = make_record(idx[i], key, idx[i] == 4 ? "error" : "ok", "h2o", 1,
                                       64 * (idx[i] + 1), idx[i] == 1 ? 99 : idx[i]);
        CU_ASSERT_EQUAL(ig_results_append_part(dir, idx[i], rec, &err), IG_OK);
        json_object_put(rec);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/parts/point-000005.json", dir);
    struct stat st;
    CU_ASSERT_EQUAL(stat(path, &st), 0);
    /* a stray temporary file of a writer that died is not a part */
    snprintf(path, sizeof path, "%s/parts/.point-000007.json.1.tmp", dir);
    spit(path, "{\"key\":\"half");

    CU_ASSERT_EQUAL(ig_results_merge(r, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_results_count(r), 6);
    for (int i = 0; i < 6; i++) {
        char key[8];
        snprintf(key, sizeof key, "p%d", i);
        CU_ASSERT_STRING_EQUAL(str_at(ig_results_get(r, i), "key"), key);
    }
    /* the record already there (ok) stays: the part for point 1 did not replace it */
    json_object *m = json_object_object_get(ig_results_find(r, "p1"), "metrics");
    IG_ASSERT_NEAR(json_object_get_double(json_object_object_get(m, "throughput_tok_s")), 2, 0);
    CU_ASSERT(!ig_results_has(r, "p4"));
    snprintf(path, sizeof path, "%s/parts/point-000002.json", dir);
    CU_ASSERT_NOT_EQUAL(stat(path, &st), 0);
    /* the file: 2 + 4 new lines, appended in point order, no duplicate */
    snprintf(path, sizeof path, "%s/results.jsonl", dir);
    char *text = slurp(path, NULL);
    CU_ASSERT_EQUAL(count_lines(text), 6);
    const char *p2 = strstr(text, "\"key\":\"p2\""), *p3 = strstr(text, "\"key\":\"p3\"");
    const char *p5 = strstr(text, "\"key\":\"p5\"");
    CU_ASSERT(p2 && p3 && p5 && p2 < p3 && p3 < p5);
    free(text);
    /* merging again changes nothing; an error part merged twice is not duplicated either */
    json_object *again = make_record(4, "p4", "error", "h2o", 1, 320, 4);
    CU_ASSERT_EQUAL(ig_results_append_part(dir, 4, again, &err), IG_OK);
    json_object_put(again);
    CU_ASSERT_EQUAL(ig_results_merge(r, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_results_merge(r, &err), IG_OK);
    text = slurp(path, NULL);
    CU_ASSERT_EQUAL(count_lines(text), 6);
    free(text);
    ig_results_free(r);
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_results_count(r), 6);

    /* a part that does not parse: an error naming it, and nothing merged or removed */
    json_object *ok6 = make_record(6, "p6", "ok", "h2o", 1, 64, 6);
    CU_ASSERT_EQUAL(ig_results_append_part(dir, 6, ok6, &err), IG_OK);
    json_object_put(ok6);
    snprintf(path, sizeof path, "%s/parts/point-000008.json", dir);
    spit(path, "{\"key\": \"p8\", \n");
    CU_ASSERT_EQUAL(ig_results_merge(r, &err), IG_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "parts/point-000008.json"));
    CU_ASSERT_EQUAL(ig_results_count(r), 6);
    snprintf(path, sizeof path, "%s/parts/point-000006.json", dir);
    CU_ASSERT_EQUAL(stat(path, &st), 0);
    ig_results_free(r);
}

/* ---- CSV ---- */

/* A small RFC 4180 reader: rows of fields. */
typedef struct csv {
    char ***rows;
    int *n_fields;
    int n_rows;
} csv;

static void csv_parse(const char *s, csv *out) {
    memset(out, 0, sizeof *out);
    int cap = 0;
    while (*s) {
        if (out->n_rows == cap) {
            cap = cap ? cap * 2 : 16;
            out->rows = realloc(out->rows, (size_t)cap * sizeof *out->rows);
            out->n_fields = realloc(out->n_fields, (size_t)cap * sizeof *out->n_fields);
        }
        char **fields = NULL;
        int nf = 0;
        for (;;) {
            size_t fcap = 64, fl = 0;
            char *f = malloc(fcap);
            if (*s == '"') {
                s++;
                for (;;) {
                    if (*s == '\0') break;
                    if (*s == '"' && s[1] == '"') {
                        s++;
                    } else if (*s == '"') {
                        s++;
                        break;
                    }
                    if (fl + 2 > fcap) f = realloc(f, fcap *= 2);
                    f[fl++] = *s++;
                }
            } else {
                while (*s && *s != ',' && *s != '\n') {
                    if (fl + 2 > fcap) f = realloc(f, fcap *= 2);
                    f[fl++] = *s++;
                }
            }
            f[fl] = '\0';
            fields = realloc(fields, (size_t)(nf + 1) * sizeof *fields);
            fields[nf++] = f;
            if (*s == ',') {
                s++;
                continue;
            }
            if (*s == '\n') s++;
            break;
        }
        out->rows[out->n_rows] = fields;
        out->n_fields[out->n_rows++] = nf;
    }
}

static void csv_free(csv *c) {
    for (int i = 0; i < c->n_rows; i++) {
        for (int k = 0; k < c->n_fields[i]; k++) free(c->rows[i][k]);
        free(c->rows[i]);
    }
    free(c->rows);
    free(c->n_fields);
}

/* The value at a dotted path, walked independently of the library's flattening. */
static json_object *walk(json_object *o, const char *path, int *found) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    *found = 1;
    for (char *save, *t = strtok_r(buf, ".", &save); t; t = strtok_r(NULL, ".", &save))
        if (!json_object_object_get_ex(o, t, &o)) {
            *found = 0;
            return NULL;
        }
    return o;
}

/* Whether a CSV cell holds the JSON value v. */
static int cell_matches(const char *cell, json_object *v, int found) {
    if (!found) return cell[0] == '\0';
    switch (json_object_get_type(v)) {
    case json_type_null:
        return cell[0] == '\0';
    case json_type_string:
        return !strcmp(cell, json_object_get_string(v));
    case json_type_int:
        return strtoll(cell, NULL, 10) == json_object_get_int64(v) && cell[0];
    case json_type_double:
        return cell[0] && strtod(cell, NULL) == json_object_get_double(v);
    case json_type_boolean:
        return !strcmp(cell, json_object_get_boolean(v) ? "true" : "false");
    case json_type_array: {
        char joined[2048] = "";
        for (size_t i = 0; i < json_object_array_length(v); i++)
            snprintf(joined + strlen(joined), sizeof joined - strlen(joined), "%s%s", i ? ";" : "",
                     json_object_get_string(json_object_array_get_idx(v, i)));
        return !strcmp(cell, joined);
    }
    default:
        return 0;
    }
}

static void test_csv(void) {
    const char *dir = fresh_dir("csv");
    ig_results *r = NULL;
    ig_error err = {0};
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    json_object *a = make_record(1, "ka", "ok", "h2o", 4, 512, 95.1);
    json_object_object_add(json_object_object_get(json_object_object_get(a, "config"), "policy"),
                           "params", json_tokener_parse("{\"heavy_ratio\":0.1,\"alpha\":[4,5]}"));
    json_object_object_add(a, "label", json_object_new_string("say \"hi\", then, go"));
    json_object_object_add(json_object_object_get(a, "metrics"), "breakdown_s",
                           json_tokener_parse("{\"attention\":0.5,\"ffn\":1.25}"));
    append_ok(r, a);
    json_object *b = make_record(0, "kb", "error", "full", 8, 1024, 7);
    json_object_object_del(json_object_object_get(b, "metrics"), "ppl"); /* absent metric */
    json_object_object_add(b, "note", json_object_new_string("line1\nline2"));
    append_ok(r, b);
    append_ok(r, make_record(2, "kc", "ok", "infinigen", 8, 2048, 60));
    append_ok(r, make_record(0, "kb", "ok", "full", 8, 1024, 81)); /* replaces kb */
    CU_ASSERT_EQUAL(ig_results_write_csv(r, &err), IG_OK);

    char path[4200];
    snprintf(path, sizeof path, "%s/results.csv", dir);
    char *text = slurp(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"say \"\"hi\"\", then, go\""));
    csv c;
    csv_parse(text, &c);
    free(text);
    CU_ASSERT_EQUAL_FATAL(c.n_rows, 1 + ig_results_count(r));
    int nc = c.n_fields[0];
    const char *want_cols[] = {"config.workload.batch",
                               "metrics.breakdown_s.attention",
                               "config.policy.params.alpha",
                               "config.metrics",
                               "label",
                               "key"};
    for (size_t w = 0; w < sizeof want_cols / sizeof want_cols[0]; w++) {
        int hit = 0;
        for (int k = 0; k < nc; k++) hit |= !strcmp(c.rows[0][k], want_cols[w]);
        CU_ASSERT(hit);
        if (!hit) fprintf(stderr, "missing column %s\n", want_cols[w]);
    }
    /* every cell of every row against the JSONL record with that key, read back from disk */
    ig_results *again = NULL;
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &again, &err), IG_OK);
    int checked = 0;
    for (int i = 1; i < c.n_rows; i++) {
        CU_ASSERT_EQUAL_FATAL(c.n_fields[i], nc);
        json_object *rec = ig_results_get(again, i - 1); /* point order */
        for (int k = 0; k < nc; k++) {
            int found;
            json_object *v = walk(rec, c.rows[0][k], &found);
            int ok = cell_matches(c.rows[i][k], v, found);
            CU_ASSERT(ok);
            if (!ok) fprintf(stderr, "row %d column %s: '%s'\n", i, c.rows[0][k], c.rows[i][k]);
            checked++;
        }
    }
    CU_ASSERT(checked >= 3 * 20);
    /* the replaced record's values, the point order, the embedded newline */
    int col_key = -1, col_tp = -1, col_note = -1;
    for (int k = 0; k < nc; k++) {
        if (!strcmp(c.rows[0][k], "key")) col_key = k;
        if (!strcmp(c.rows[0][k], "metrics.throughput_tok_s")) col_tp = k;
        if (!strcmp(c.rows[0][k], "note")) col_note = k;
    }
    CU_ASSERT_FATAL(col_key >= 0 && col_tp >= 0);
    CU_ASSERT_STRING_EQUAL(c.rows[1][col_key], "kb");
    CU_ASSERT_STRING_EQUAL(c.rows[1][col_tp], "81.0");
    CU_ASSERT_STRING_EQUAL(c.rows[2][col_key], "ka");
    CU_ASSERT_STRING_EQUAL(c.rows[3][col_key], "kc");
    CU_ASSERT_EQUAL(col_note, -1); /* only the replaced record had it */
    csv_free(&c);
    ig_results_free(again);
    ig_results_free(r);

    char *f = ig_results_csv_field("a,\"b\"\nc");
    CU_ASSERT_STRING_EQUAL(f, "\"a,\"\"b\"\"\nc\"");
    free(f);
    f = ig_results_csv_field("plain text");
    CU_ASSERT_STRING_EQUAL(f, "plain text");
    free(f);
}

/* ---- kill -9 in the middle of appending ---- */

static void test_kill9(void) {
    const char *dir = fresh_dir("kill9");
    char path[4200];
    snprintf(path, sizeof path, "%s/results.jsonl", dir);
    int need = 3 + (int)(getpid() % 7); /* kill after a random-ish number of records */
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        ig_results *r = NULL;
        ig_error err = {0};
        if (ig_results_open(dir, &r, &err) != IG_OK) _exit(3);
        char *big = malloc(200001);
        for (int i = 0;; i++) {
            /* records of varied sizes, some large (many pages per write) */
            size_t len = (size_t)(i % 5 == 4 ? 200000 : 100 + 37 * i % 3000);
            memset(big, 'a' + i % 26, len);
            big[len] = '\0';
            char key[32];
            snprintf(key, sizeof key, "k%06d", i);
            json_object *rec = make_record(i, key, "ok", "full", 1, 64, i);
            json_object_object_add(rec, "payload", json_object_new_string(big));
            json_object_object_add(rec, "payload_len", json_object_new_int((int)len));
            if (ig_results_append(r, rec, &err) != IG_OK) _exit(4);
            json_object_put(rec);
        }
    }
    /* wait until the child has written `need` complete lines, then kill it without warning */
    for (;;) {
        char *text = slurp(path, NULL);
        int lines = text ? count_lines(text) : 0;
        free(text);
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            CU_FAIL("the appending child exited by itself");
            return;
        }
        if (lines >= need) break;
        usleep(1000);
    }
    kill(pid, SIGKILL);
    int st;
    CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
    CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    ig_results *r = NULL;
    ig_error err = {0};
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    int n = ig_results_count(r);
    CU_ASSERT(n >= need);
    size_t len;
    char *text = slurp(path, &len);
    CU_ASSERT_EQUAL(count_lines(text), n); /* distinct keys: one line each */
    CU_ASSERT(len > 0 && text[len - 1] == '\n');
    free(text);
    for (int i = 0; i < n; i++) {
        json_object *rec = ig_results_get(r, i);
        char key[32];
        snprintf(key, sizeof key, "k%06d", i); /* complete records 0..n-1, none lost */
        CU_ASSERT_STRING_EQUAL(str_at(rec, "key"), key);
        const char *payload = str_at(rec, "payload");
        json_object *pl = json_object_object_get(rec, "payload_len");
        CU_ASSERT(payload && pl && strlen(payload) == (size_t)json_object_get_int(pl));
        CU_ASSERT(ig_results_has(r, key));
    }
    /* and the store goes on appending after the crash */
    append_ok(r, make_record(n, "after", "ok", "full", 1, 64, 1));
    ig_results_free(r);
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    CU_ASSERT_EQUAL(ig_results_count(r), n + 1);
    ig_results_free(r);
}

/* ---- summary and progress ---- */

static void test_summary(void) {
    const char *dir = fresh_dir("summary");
    ig_results *r = NULL;
    ig_error err = {0};
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    append_ok(r, make_record(0, "a", "ok", "full", 8, 512, 95.123));
    append_ok(r, make_record(1, "b", "error", "h2o", 8, 512, 1));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ig_results_print_summary(r, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "point"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "tok/s"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "95.12"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "123.5")); /* h2d MB */
    CU_ASSERT_PTR_NULL(strstr(buf, "kv_read"));   /* no point has it: no column */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "point 1 failed: engine failed"));
    /* aligned: the header and both rows put "status" values at the same column */
    char *l1 = buf, *l2 = strchr(l1, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
    CU_ASSERT_EQUAL(strstr(l1, "status") - l1, strstr(l2, "ok") - l2);
    CU_ASSERT_EQUAL(strstr(l1, "status") - l1, strstr(l3, "error") - l3);
    free(buf);
    ig_results_free(r);
}

static double fake_now;
static double fake_clock(void *ctx) {
    (void)ctx;
    return fake_now;
}

static void test_progress(void) {
    char b[256];
    ig_progress_format_duration(0, b, sizeof b);
    CU_ASSERT_STRING_EQUAL(b, "00:00");
    ig_progress_format_duration(83.4, b, sizeof b);
    CU_ASSERT_STRING_EQUAL(b, "01:23");
    ig_progress_format_duration(3725, b, sizeof b);
    CU_ASSERT_STRING_EQUAL(b, "1:02:05");
    ig_progress_format_duration(-1, b, sizeof b);
    CU_ASSERT_STRING_EQUAL(b, "--:--");
    ig_progress_format_line(b, sizeof b, 2, 12, "policy=h2o", 5, 90, 80);
    CU_ASSERT_STRING_EQUAL(b, "[3/12] policy=h2o  00:05  ETA 01:30");
    ig_progress_format_line(b, sizeof b, 2, 12, "policy=h2o workload.prompt_len=1024", 5, -1, 40);
    CU_ASSERT_STRING_EQUAL(b, "[3/12] policy=h2o ...  00:05  ETA --:--");
    CU_ASSERT(strlen(b) < 40);

    /* not a terminal: plain lines; ETA from the mean of the finished points */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fake_now = 100;
    ig_progress *p = ig_progress_start_ex(4, f, 0, fake_clock, NULL);
    ig_progress_skip_point(p, 0, "a");
    ig_progress_point(p, 1, "b");
    fake_now = 110;
    ig_progress_done_point(p, 1, "ok", 10);
    ig_progress_point(p, 2, "c");
    fake_now = 140;
    ig_progress_done_point(p, 2, "error", 30);
    ig_progress_finish(p);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(buf, "[1/4] skipped (already done): a\n"
                                "[2/4] start: b\n"
                                "[2/4] ok: b (10.0 s, ETA 00:20)\n"
                                "[3/4] start: c\n"
                                "[3/4] error: c (30.0 s, ETA 00:20)\n"
                                "4 points: 1 ok, 1 failed, 1 skipped (already done), in 00:40\n");
    free(buf);

    /* a terminal: one line redrawn with \r, failures kept on their own line */
    f = open_memstream(&buf, &len);
    fake_now = 0;
    p = ig_progress_start_ex(3, f, 1, fake_clock, NULL);
    ig_progress_point(p, 0, "x");
    fake_now = 10;
    ig_progress_done_point(p, 0, "ok", 10);
    ig_progress_point(p, 1, "y");
    fake_now = 14;
    ig_progress_tick(p);
    fake_now = 14.2; /* within half a second: no redraw */
    ig_progress_tick(p);
    ig_progress_done_point(p, 1, "error", 4.2);
    ig_progress_finish(p);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\r[1/3] x  00:00  ETA --:--\033[K"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\r[2/3] y  00:00  ETA 00:20\033[K"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\r[2/3] y  00:04  ETA 00:16\033[K"));
    CU_ASSERT_PTR_NULL(strstr(buf, "y  00:04  ETA 00:16\033[K\r[2/3] y")); /* one tick drawn */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\r\033[K[2/3] error: y (4.2 s)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "3 points: 1 ok, 1 failed, 0 skipped"));
    CU_ASSERT_PTR_NULL(strstr(buf, "[1/3] ok")); /* successes are not logged on a terminal */
    free(buf);
}

static void test_plot_errors(void) {
    const char *dir = fresh_dir("plots_skip");
    ig_results *r = NULL;
    ig_error err = {0};
    CU_ASSERT_EQUAL_FATAL(ig_results_open(dir, &r, &err), IG_OK);
    append_ok(r, make_record(0, "a", "ok", "full", 4, 512, 10));
    append_ok(r, make_record(1, "b", "ok", "h2o", 4, 512, 12));
    ig_results_free(r);
    /* gnuplot missing: a clear error, whether or not it is installed here */
    setenv("IGEN_GNUPLOT", "/nonexistent/gnuplot", 1);
    int n = -1;
    CU_ASSERT_EQUAL(ig_plot_results_ex(dir, NULL, &n, &err), IG_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "gnuplot is not installed"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "apt-get install gnuplot-nox"));
    CU_ASSERT_EQUAL(n, 0);
    unsetenv("IGEN_GNUPLOT");
    /* not a results directory */
    CU_ASSERT_EQUAL(ig_plot_results_ex("/nonexistent/results", NULL, &n, &err), IG_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "results.jsonl"));
    ig_test_run *run = malloc(sizeof *run);
    ig_test_igen(run, NULL, "plot /nonexistent/results");
    CU_ASSERT_EQUAL(run->status, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(run->err, "igen plot: "));
    ig_test_igen(run, NULL, "plot");
    CU_ASSERT_EQUAL(run->status, 2);
    ig_test_igen(run, NULL, "plot --help");
    CU_ASSERT_EQUAL(run->status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(run->out, "usage: igen plot RESULTS_DIR"));
    free(run);
}

void ig_test_register(void) {
    CU_pSuite s = CU_add_suite("results", NULL, NULL);
    CU_add_test(s, "roundtrip", test_roundtrip);
    CU_add_test(s, "torn_line", test_torn_line);
    CU_add_test(s, "invalid_line", test_invalid_line);
    CU_add_test(s, "last_record_wins", test_last_record_wins);
    CU_add_test(s, "parts_merge", test_parts_merge);
    CU_add_test(s, "csv", test_csv);
    CU_add_test(s, "kill9", test_kill9);
    CU_add_test(s, "summary", test_summary);
    CU_add_test(s, "progress", test_progress);
    CU_add_test(s, "plot_errors", test_plot_errors);
}
