/* Helpers shared by the results store, its CSV and the plots (not part of the public API). */
#ifndef IG_EXP_RESULTS_INTERNAL_H
#define IG_EXP_RESULTS_INTERNAL_H

#include <stddef.h>

#include <json-c/json.h>

#include "core/base/status.h"

/* "a/b" (malloc'ed; NULL when out of memory). */
char *ig_exp_path_join(const char *a, const char *b);
/* mkdir -p. */
ig_status ig_exp_mkdir_p(const char *dir, ig_error *err);
/* The whole file, NUL-terminated (malloc'ed). */
ig_status ig_exp_read_file(const char *path, char **out, size_t *len, ig_error *err);

/* Flattens v into `row` (path -> JSON string with the CSV text of the value): objects recurse
 * with "prefix.key"; arrays are joined with ';' (elements that are objects or arrays as their JSON
 * text); null becomes "". New paths are appended to the array `cols` and recorded in the object
 * `seen` (both may be NULL). Returns 0, or -1 when out of memory. */
int ig_exp_flatten(json_object *v, const char *prefix, json_object *row, json_object *cols,
                   json_object *seen);
/* The text of a scalar as the CSV shows it ("" for null); malloc'ed. */
char *ig_exp_scalar_text(json_object *v);

/* Writes `len` bytes to path via path.tmp.PID, fsync and rename. */
ig_status ig_exp_write_atomic(const char *path, const char *data, size_t len, ig_error *err);

/* A growing string; `oom` is set (and the text frozen) when an allocation fails. */
typedef struct ig_exp_buf {
    char *s;
    size_t n, cap;
    int oom;
} ig_exp_buf;
void ig_exp_buf_add(ig_exp_buf *b, const char *s, size_t n);
void ig_exp_buf_puts(ig_exp_buf *b, const char *s);
void ig_exp_buf_printf(ig_exp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ig_exp_buf_free(ig_exp_buf *b);

#endif
