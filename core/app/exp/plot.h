/* Plots of a results directory, drawn by gnuplot (run as a child process) as PNG and SVG into
 * DIR/plots/, each from a script and a data file written beside it (plots/NAME.gp, plots/NAME.dat;
 * `cd DIR/plots && gnuplot NAME.gp` redraws one by hand):
 *   throughput_vs_seqlen  metrics.throughput_tok_s against prompt_len + gen_len, one line per
 * policy variant; with several batch sizes one panel per batch, and also one file per batch,
 * throughput_vs_seqlen_bB (needs 2 sequence lengths) speedup_vs_batch      throughput over the
 * `full` policy's at the same other settings against workload.batch, at the largest sequence length
 * (needs 2 batch sizes) ppl_vs_budget         metrics.ppl against metrics.kv_read_fraction, one
 * point set per policy (needs 2 such points) latency_breakdown     stacked bars of
 * metrics.breakdown_s.{attention,ffn,transfer,prediction, other} per policy variant at the largest
 * sequence length (and the largest batch among those) Only records with status "ok" are plotted. A
 * policy variant is the policy's name, with its params when the results hold more than one variant
 * of it; config keys other than the plotted axes that vary between points split the lines further
 * ("model.dtype=f16"). */
#ifndef IG_EXP_PLOT_H
#define IG_EXP_PLOT_H

#include <stdio.h>

#include "core/base/status.h"

/* Draws every plot the records allow; *n_written (may be NULL) is the number of plots drawn (each
 * as NAME.png and NAME.svg). Prints one line per plot written or skipped (with the reason) to
 * stdout. IG_ERR_NOT_FOUND when DIR has no results.jsonl or gnuplot is not installed (the message
 * says how to install it); the gnuplot binary is $IGEN_GNUPLOT if set, else `gnuplot` on PATH. */
ig_status ig_plot_results(const char *dir, int *n_written, ig_error *err);
/* As above, the lines going to `log` (NULL: none). */
ig_status ig_plot_results_ex(const char *dir, FILE *log, int *n_written, ig_error *err);

#endif
