/* The decode measurement shared by `igen bench-decode` and measured experiment points. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/cli/cli.h"
#include "core/base/log.h"
#include "kernels/cpu/cpu_kernels.h"
#include "offload/wstream.h"

ig_status ig_cli_measure_prefill(ig_engine *e, const int32_t *prompt, int B, int P,
                                 const char *progress, int32_t *next, double *prefill_s,
                                 ig_error *err) {
    int V = ig_model_get_config(ig_engine_model(e))->vocab;
    float *logits = malloc((size_t)V * sizeof(float));
    int tty = progress && ig_cli_stderr_is_tty();
    if (!logits) return ig_error_set(err, IG_ERR_NOMEM, "out of memory for the logits");
    ig_status st = IG_OK;
    { /* warm-up (threads, first touch of the buffers), not timed */
        ig_seq_tokens q = {0, prompt, P < 16 ? P : 16};
        st = ig_engine_forward(e, &q, 1, err);
        if (st != IG_OK) goto out;
        ig_engine_seq_reset(e, 0);
    }
    ig_engine_reset_stats(e);
    double t0 = ig_time_s();
    for (int s = 0; s < B; s++) { /* one sequence per call (bounded activations) */
        ig_seq_tokens q = {s, prompt + (size_t)s * (size_t)P, P};
        st = ig_engine_forward(e, &q, 1, err);
        if (st != IG_OK) goto out;
        ig_engine_logits(e, P - 1, 1, logits);
        next[s] = ig_sample_argmax(logits, V);
        if (progress)
            fprintf(stderr, "%s%s: prefill %d/%d%s", tty ? "\r" : "", progress, s + 1, B,
                    tty ? "" : "\n");
    }
    *prefill_s = ig_time_s() - t0;
    if (tty) fputc('\n', stderr);
out:
    free(logits);
    return st;
}

ig_status ig_cli_measure_steps(ig_engine *e, struct ig_wstream *ws, int B, int warmup_steps, int G,
                               int32_t *next, ig_decode_measure *out, ig_error *err) {
    memset(out, 0, sizeof *out);
    int V = ig_model_get_config(ig_engine_model(e))->vocab;
    ig_seq_tokens *seqs = malloc((size_t)B * sizeof *seqs);
    float *logits = malloc((size_t)B * (size_t)V * sizeof(float));
    ig_status st = IG_OK;
    if (!seqs || !logits) {
        st = ig_error_set(err, IG_ERR_NOMEM, "out of memory for %d sequences' logits", B);
        goto out;
    }
    double t1 = ig_time_s();
    for (int step = 0; step < warmup_steps + G; step++) {
        if (step == warmup_steps) {
            ig_engine_reset_stats(e);
            if (ws) ig_wstream_reset_stats(ws);
            t1 = ig_time_s();
        }
        for (int s = 0; s < B; s++) seqs[s] = (ig_seq_tokens){s, &next[s], 1};
        st = ig_engine_forward(e, seqs, B, err);
        if (st != IG_OK) goto out;
        ig_engine_logits(e, 0, B, logits);
        for (int s = 0; s < B; s++) next[s] = ig_sample_argmax(logits + (size_t)s * (size_t)V, V);
    }
    out->decode_s = ig_time_s() - t1;
    out->es = ig_engine_get_stats(e);
    out->kv = ig_engine_get_kv_stats(e);
    if (ws) out->ws = ig_wstream_get_stats(ws);
out:
    free(seqs);
    free(logits);
    return st;
}

ig_status ig_cli_measure_decode(ig_engine *e, struct ig_wstream *ws, const int32_t *prompt, int B,
                                int P, int G, int warmup_steps, const char *progress,
                                ig_decode_measure *out, ig_error *err) {
    memset(out, 0, sizeof *out);
    int32_t *next = malloc((size_t)(B > 0 ? B : 1) * sizeof(int32_t));
    if (!next) return ig_error_set(err, IG_ERR_NOMEM, "out of memory for %d sequences", B);
    double prefill_s = 0;
    ig_status st = ig_cli_measure_prefill(e, prompt, B, P, progress, next, &prefill_s, err);
    if (st == IG_OK) st = ig_cli_measure_steps(e, ws, B, warmup_steps, G, next, out, err);
    out->prefill_s = prefill_s;
    free(next);
    return st;
}
