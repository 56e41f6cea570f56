/* The results directory of an experiment: results.jsonl (one JSON record per completed point, the
 * shape given in docs/config.md), results.csv derived from it, parts/ for points run on other
 * machines, a summary table, and the progress line printed while points run.
 *
 * Durability: every record is one line, appended with a single write() to a file opened with
 * O_APPEND and fsync'ed before ig_results_append returns. A process killed (even with SIGKILL)
 * leaves either the whole line or, only if it died inside that write(), a last line without its
 * newline; ig_results_open discards such a torn line (with a warning) and truncates the file back
 * to the last complete line. One process appends to results.jsonl at a time; runs on several
 * machines write parts (ig_results_append_part) that ig_results_merge folds in afterwards.
 *
 * When one key has several records (a failed point rerun), the last one wins. */
#ifndef IG_EXP_RESULTS_H
#define IG_EXP_RESULTS_H

#include <stdio.h>

#include <json-c/json.h>

#include "core/base/status.h"

typedef struct ig_results ig_results;

/* Opens the results directory `dir` (created with its parents if needed) and loads its
 * results.jsonl if present. A complete line that is not a JSON object with a string "key" is an
 * IG_ERR_FORMAT error naming `DIR/results.jsonl:LINE`. */
ig_status ig_results_open(const char *dir, ig_results **out, ig_error *err);
void ig_results_free(ig_results *r);
const char *ig_results_dir(const ig_results *r);

/* 1 when the last record with this key has status "ok" (the runner skips that point). */
int ig_results_has(const ig_results *r, const char *key);
/* Number of distinct keys (the last record of each). */
int ig_results_count(const ig_results *r);
/* The i-th record (0 <= i < count) in point order ("point", then file order); borrowed, valid
 * until the next append or merge. */
json_object *ig_results_get(const ig_results *r, int i);
/* The last record with this key, or NULL; borrowed as above. */
json_object *ig_results_find(const ig_results *r, const char *key);

/* Appends one record (a JSON object with a string "key" and an integer "point"; not consumed:
 * the caller keeps its reference) as one line of results.jsonl, durably (see above). Doubles are
 * written in their shortest round-trip form; NaN and infinities, which JSON cannot hold, as null.
 */
ig_status ig_results_append(ig_results *r, json_object *record, ig_error *err);

/* Writes one point's record to DIR/parts/point-NNNNNN.json (NNNNNN = point_index, zero-padded)
 * atomically (a temporary file, fsync, rename), for runs where each machine runs some points.
 * Creates DIR and DIR/parts if needed. */
ig_status ig_results_append_part(const char *dir, int point_index, json_object *record,
                                 ig_error *err);
/* Folds every part in DIR/parts into results.jsonl in point order, skipping a part whose key
 * already has an "ok" record or an identical last record, then removes the parts it folded (and
 * parts/ when it is left empty). Safe to rerun after an interruption: nothing is lost, nothing
 * is duplicated. A part that does not parse is an error naming it (nothing is removed). */
ig_status ig_results_merge(ig_results *r, ig_error *err);

/* Writes DIR/results.csv (via a temporary file and rename): one row per key (the last record), in
 * point order; one column per flattened leaf path ("config.workload.batch",
 * "metrics.breakdown_s.attention"), in order of first appearance; arrays joined with ';'; null
 * and absent values empty; fields with a comma, quote, CR or LF quoted as RFC 4180 says (quotes
 * doubled); lines end with LF. */
ig_status ig_results_write_csv(const ig_results *r, ig_error *err);

/* Prints a table of the points: point, label, status, and the metrics that some point has
 * (throughput tok/s, ppl, kv_read_fraction, h2d MB, elapsed s), in aligned columns; then the error
 * message of each failed point. */
void ig_results_print_summary(const ig_results *r, FILE *f);

/* One CSV field as written by ig_results_write_csv (quoted only when needed); the returned string
 * is malloc'ed. Exposed for tests. */
char *ig_results_csv_field(const char *s);

/* ---- Progress while the points run ----
 * On a terminal (isatty of the stream) one line, `[i/N] label  elapsed  ETA mm:ss`, redrawn in
 * place with \r; elsewhere one plain log line per started and per finished point. The ETA is the
 * mean time of the points finished in this run times the points left. */
typedef struct ig_progress ig_progress;
/* Seconds on a monotonic clock. */
typedef double (*ig_progress_clock)(void *ctx);

/* NULL only when out of memory (then every ig_progress_* call is a no-op on NULL). */
ig_progress *ig_progress_start(int n_points, FILE *f);
/* As above with the terminal decision and the clock given (tests); clock NULL = CLOCK_MONOTONIC. */
ig_progress *ig_progress_start_ex(int n_points, FILE *f, int tty, ig_progress_clock clock,
                                  void *clock_ctx);
/* Point i (0-based) starts. */
void ig_progress_point(ig_progress *p, int i, const char *label);
/* Makes point i the current one (its label for the done line) without printing a start line. */
void ig_progress_point_quiet(ig_progress *p, int i, const char *label);
/* Point i was already done (resume): counted, not timed. */
void ig_progress_skip_point(ig_progress *p, int i, const char *label);
/* Redraws the terminal line (the current point's elapsed time), at most twice a second; nothing
 * when not a terminal. */
void ig_progress_tick(ig_progress *p);
/* Point i finished with this status ("ok", "error") after `elapsed` seconds. */
void ig_progress_done_point(ig_progress *p, int i, const char *status, double elapsed);
/* Prints the final line ("N points: A ok, B failed, C skipped in mm:ss") and frees p. */
void ig_progress_finish(ig_progress *p);

/* "mm:ss", or "h:mm:ss" from an hour on; "--:--" for a negative or non-finite time. */
void ig_progress_format_duration(double s, char *buf, size_t n);
/* The terminal line without \r: "[i+1/N] label  elapsed  ETA mm:ss" (eta < 0: "ETA --:--"),
 * the label cut with "..." so that the line fits `width` columns. */
void ig_progress_format_line(char *buf, size_t n, int i, int n_points, const char *label,
                             double elapsed, double eta, int width);

#endif
