/* One point of an experiment (igen run): measured on this machine with the engine, or modeled with
 * the planner and the cost model. Fills the record's "metrics" object; see docs/config.md for the
 * metric names and what each one measures. */
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/cli/cli.h"
#include "core/app/cli/run.h"
#include "core/engine/ppl.h"
#include "core/app/exp/results_internal.h"
#include "core/base/log.h"
#include "core/base/mapfile.h"
#include "core/model/tokenizer/tokenizer.h"
#include "kernels/cpu/cpu_kernels.h"
#include "offload/cost.h"
#include "offload/hwprof.h"
#include "offload/modelshape.h"
#include "offload/wstream.h"
#include "core/engine/calibrate.h"
#include "policies/infinigen_skew.h"

/* The model and the tokens of the text last used, kept across points. */
static struct {
    ig_model *model;
    char path[4096];
    ig_dtype dtype;
    int keep_stored;
    int weights_mem;
    int32_t *ids;
    size_t n_ids;
    char text[4096];
} g_cache;

static void memo_free_budgets(void);

static void model_cache_free(void) {
    ig_model_free(g_cache.model);
    free(g_cache.ids);
    memset(&g_cache, 0, sizeof g_cache);
}

void ig_run_cache_free(void) {
    model_cache_free();
    memo_free_budgets();
}

/* model.dtype as load options: a storage type, or "stored" (keep_stored, f32 fallback). */
static ig_dtype point_dtype(const ig_exp_point *pt, int *keep_stored) {
    *keep_stored = !strcmp(pt->dtype, "stored");
    int t = *keep_stored ? -1 : ig_dtype_from_name(pt->dtype);
    return t >= 0 ? (ig_dtype)t : IG_DTYPE_F32;
}

/* model.act_quant: the CPU kernels' int8-activation switch is process-wide, so every measured
 * run of a point sets it for itself (the rounds of a group interleave points); the CUDA backend
 * has no such mode and refuses it. */
static ig_status act8_set(const ig_exp_point *pt, ig_backend_kind be, ig_error *err) {
    ig_cpu_set_act8(pt->act8);
    if (pt->act8 && be == IG_BACKEND_CUDA)
        return ig_error_set(err, IG_ERR_UNSUPPORTED,
                            "model.act_quant: q8 is a mode of the CPU backend's kernels; this "
                            "point runs on CUDA (backend: cpu, or drop act_quant)");
    return IG_OK;
}

static ig_model *model_get(const ig_exp_point *pt, ig_error *err) {
    int keep = 0;
    ig_dtype dt = point_dtype(pt, &keep);
    int wmem = pt->weights_mem ? ig_weights_mem_from_name(pt->weights_mem) : IG_WMEM_AUTO;
    if (wmem < 0) wmem = IG_WMEM_AUTO; /* the config check allows only the names */
    if (g_cache.model && !strcmp(g_cache.path, pt->model_path) && g_cache.dtype == dt &&
        g_cache.keep_stored == keep && g_cache.weights_mem == wmem)
        return g_cache.model;
    model_cache_free();
    ig_cli_common com;
    ig_cli_common_init(&com);
    com.model_path = strcmp(pt->model_path, "default") ? pt->model_path : NULL;
    com.dtype = dt;
    com.keep_stored = keep;
    com.weights_mem = wmem;
    com.quiet = 1;
    ig_model *m = ig_cli_load_model(&com); /* prints its error */
    if (!m) {
        ig_error_set(err, IG_ERR_IO, "cannot load the model %s (see the message above)",
                     pt->model_path);
        return NULL;
    }
    g_cache.model = m;
    snprintf(g_cache.path, sizeof g_cache.path, "%s", pt->model_path);
    g_cache.dtype = dt;
    g_cache.keep_stored = keep;
    g_cache.weights_mem = wmem;
    return m;
}

/* Tokens of the point's text (or of WikiText-2's test split when none is given and it exists);
 * NULL with n = 0 when there is no text (random prompts). */
static const int32_t *text_ids(const ig_exp_point *pt, ig_model *m, size_t *n, ig_error *err) {
    char def[4096];
    const char *path = pt->text_path;
    if (!ig_model_tokenizer(m)) { /* dummy weights: random prompts (ppl says why it cannot run) */
        *n = 0;
        return NULL;
    }
    if (!path) {
        snprintf(def, sizeof def, "%s/../shared/data/wikitext-2-raw/wiki.test.raw", IG_SOURCE_DIR);
        if (!ig_path_exists(def)) {
            *n = 0;
            return NULL;
        }
        path = def;
    }
    if (g_cache.ids && !strcmp(g_cache.text, path)) {
        *n = g_cache.n_ids;
        return g_cache.ids;
    }
    free(g_cache.ids);
    g_cache.ids = NULL;
    char *text = NULL;
    size_t len = 0;
    if (ig_read_file(path, &text, &len, err) != IG_OK) return NULL;
    ig_status st =
        ig_tokenizer_encode(ig_model_tokenizer(m), text, len, 0, &g_cache.ids, &g_cache.n_ids, err);
    free(text);
    if (st != IG_OK) return NULL;
    snprintf(g_cache.text, sizeof g_cache.text, "%s", path);
    *n = g_cache.n_ids;
    return g_cache.ids;
}

static void put_d(json_object *o, const char *k, double v) {
    json_object_object_add(o, k, json_object_new_double(v));
}

/* ---- skew=auto: InfiniGen's skew calibrated by the run itself, cached ---- */

static char g_out_dir[4096] = "results";

void ig_run_set_output_dir(const char *dir) {
    snprintf(g_out_dir, sizeof g_out_dir, "%s", dir && dir[0] ? dir : ".");
}

#define AUTO_SKEW_TOKENS 2048 /* igen calibrate's default, the artifact's */

static uint64_t fnv1a(uint64_t h, const char *s) {
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h ^ 0xff; /* a separator between fields */
}

/* The skew file for a "skew=auto" setting: calibrated on the point's text from the token after the
 * perplexity windows (so the calibration never sees a scored token), or from the text's start when
 * the point measures no perplexity; kept in OUTPUT/skew/ and reused by later points and reruns.
 * Records what it did in mx.skew. */
static ig_status auto_skew(const ig_exp_point *pt, ig_model *m, json_object *mx, char *path,
                           size_t np, ig_error *err) {
    size_t n_ids = 0;
    const int32_t *ids = text_ids(pt, m, &n_ids, err);
    if (!ids)
        return err->code ? err->code
                         : ig_error_set(err, IG_ERR_INVALID_ARG,
                                        "skew=auto calibrates on workload.text; the point has "
                                        "none (or the model has no tokenizer)");
    int64_t skip = pt->metric_ppl ? (int64_t)pt->ppl_windows * pt->ppl_ctx : 0;
    int64_t n = AUTO_SKEW_TOKENS;
    const ig_model_config *c = ig_model_get_config(m);
    if (n > c->max_pos) n = c->max_pos;
    if ((int64_t)n_ids < skip + n)
        return ig_error_set(err, IG_ERR_INVALID_ARG,
                            "skew=auto: %s has %zu tokens; calibrating on %lld tokens after the "
                            "%lld of the perplexity windows needs %lld (give a skew file, or "
                            "fewer windows)",
                            pt->text_path ? pt->text_path : "the text", n_ids, (long long)n,
                            (long long)skip, (long long)(skip + n));
    char key[256];
    snprintf(key, sizeof key, "|%s|%lld|%lld", pt->dtype, (long long)skip, (long long)n);
    uint64_t h = fnv1a(
        fnv1a(fnv1a(14695981039346656037ull, pt->model_path), pt->text_path ? pt->text_path : ""),
        key);
    char dir[4000];
    snprintf(dir, sizeof dir, "%.3990s/skew", g_out_dir);
    snprintf(path, np, "%s/%016llx.skew", dir, (unsigned long long)h);
    int reused = ig_path_exists(path);
    if (!reused) {
        if (ig_exp_mkdir_p(dir, err) != IG_OK) return err->code;
        ig_skew *sk = NULL;
        fprintf(stderr,
                "igen run: skew=auto: calibrating on %lld tokens of %s from token %lld -> %s\n",
                (long long)n, pt->text_path ? pt->text_path : "the text", (long long)skip, path);
        char part[4300];
        snprintf(part, sizeof part, "%s.part", path);
        ig_status st = ig_calibrate_skew(m, ids + skip, n, 256, pt->threads, NULL, NULL, &sk, err);
        if (st == IG_OK) st = ig_skew_save(sk, part, err);
        ig_skew_free(sk);
        if (st == IG_OK && rename(part, path) != 0) {
            remove(part);
            st = ig_error_set(err, IG_ERR_IO, "cannot rename %s to %s", part, path);
        }
        if (st != IG_OK) return st;
    }
    json_object *o = json_object_new_object();
    if (o) {
        json_object_object_add(o, "file", json_object_new_string(path));
        json_object_object_add(o, "text",
                               json_object_new_string(pt->text_path ? pt->text_path : ""));
        json_object_object_add(o, "skip_tokens", json_object_new_int64(skip));
        json_object_object_add(o, "tokens", json_object_new_int64(n));
        json_object_object_add(o, "reused", json_object_new_boolean(reused));
        json_object_object_add(mx, "skew", o);
    }
    return IG_OK;
}

/* skew_set: where a skew=auto setting's replacement lives (4300 bytes; it must outlive pol). */
static int policy_setup_m(const ig_exp_point *pt, ig_model *m, json_object *mx, ig_cli_policy *pol,
                          char *skew_set, ig_error *err) {
    ig_cli_policy_init(pol);
    pol->name = pt->policy;
    for (int i = 0; i < pt->n_settings && i < IG_CLI_POLICY_MAX_SETS; i++) {
        pol->sets[pol->n_sets++] = pt->settings[i];
        if (!strcmp(pt->settings[i], "skew=auto") && m) {
            char path[4200];
            if (auto_skew(pt, m, mx, path, sizeof path, err) != IG_OK) return -1;
            snprintf(skew_set, 4300, "skew=%s", path);
            pol->sets[pol->n_sets - 1] = skew_set;
        }
    }
    pol->recall = pt->metric_recall;
    const char *acc = pt->kv_access ? pt->kv_access : "auto";
    pol->kv_access = !strcmp(acc, "inplace") ? IG_KV_ACCESS_INPLACE
                     : !strcmp(acc, "copy")  ? IG_KV_ACCESS_COPY
                     : !strcmp(acc, "cpu")   ? IG_KV_ACCESS_CPU
                                             : IG_KV_ACCESS_AUTO;
    if (ig_cli_policy_resolve("run", pol) != 0) {
        ig_error_set(err, IG_ERR_INVALID_ARG, "policy %s: bad parameters (see the message above)",
                     pt->policy);
        return -1;
    }
    return 0;
}

/* The point's placement as the CLI's offloading options. */
static void offload_setup(const ig_exp_point *pt, ig_cli_offload *off, char *pct, size_t np,
                          char *link, size_t nl) {
    ig_cli_offload_init(off);
    snprintf(pct, np, "%.17g,%.17g,%.17g,%.17g,%.17g,%.17g", pt->weights.gpu, pt->weights.cpu,
             pt->kv.gpu, pt->kv.cpu, pt->activations.gpu, pt->activations.cpu);
    off->percent = pct;
    off->numa = pt->numa;
    off->disk_dir = pt->disk_dir;
    off->no_overlap = !pt->overlap;
    off->gpu_batch = pt->gpu_batch_size;
    if (pt->link) {
        snprintf(link, nl, "h2d=%.17g,d2h=%.17g,lat=%.17g", pt->link_h2d_gbps, pt->link_d2h_gbps,
                 pt->link_latency_us);
        off->link_spec = link;
    }
}

/* For tests of the noise flag and the ranks only: IGEN_RUN_INJECT_DELAY="POINT:REPEAT:SECONDS"
 * sleeps SECONDS after repeat REPEAT (0-based, the warm-up is -1; `*`: every timed repeat) of point
 * POINT and counts them as decode time, as a decode step that stalled would. */
static int g_repeat = -1;

void ig_run_set_repeat(int r) {
    g_repeat = r;
}

static double injected_delay(const ig_exp_point *pt) {
    const char *s = getenv("IGEN_RUN_INJECT_DELAY");
    int p = -1, r = -2;
    double sec = 0;
    if (s && sscanf(s, "%d:*:%lf", &p, &sec) == 2)
        r = g_repeat >= 0 ? g_repeat : -2; /* every timed repeat */
    else if (!s || sscanf(s, "%d:%d:%lf", &p, &r, &sec) != 3)
        return 0;
    if (p != pt->index || r != g_repeat || !(sec > 0 && sec < 3600)) return 0;
    struct timespec ts = {(time_t)sec, (long)((sec - (double)(time_t)sec) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
    return sec;
}

/* What a measured throughput point holds while it runs: the policy, the placement (and their
 * option strings), the prompts, the engine. With measure.prefill: once it outlives one
 * measurement (ig_run_session). */
struct ig_run_session {
    const ig_exp_point *pt;
    ig_cli_policy pol;
    ig_cli_offload off;
    char pct[256], link[256], skew_set[4300];
    int32_t *prompt, *next;
    ig_engine *e;
    int link_on, pol_ok, off_ok;
    int steps;          /* decode steps run so far (after the prompt) */
    double prefill_s;   /* measured once (session) */
    json_object *fixed; /* metrics of the setup, the same in every measurement */
    ig_backend_kind backend;
};

static void sess_teardown(ig_run_session *s) {
    ig_engine_free(s->e);
    if (s->off_ok) ig_cli_offload_free(&s->off);
    if (s->pol_ok) ig_cli_policy_free(&s->pol);
    free(s->prompt);
    free(s->next);
    json_object_put(s->fixed);
    memset(s, 0, sizeof *s);
}

/* Policy, placement, prompts and an engine with room for max_ctx tokens per sequence; the setup's
 * metrics go to s->fixed. On error s is torn down. */
static ig_status sess_setup(const ig_exp_point *pt, ig_model *m, int max_ctx, ig_run_session *s,
                            ig_error *err) {
    memset(s, 0, sizeof *s);
    s->pt = pt;
    s->fixed = json_object_new_object();
    const ig_model_config *cfg = ig_model_get_config(m);
    int B = pt->batch, P = pt->prompt_len;
    ig_status st = IG_OK;
    if (!s->fixed) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    if (max_ctx > cfg->max_pos) {
        st = ig_error_set(err, IG_ERR_CAPACITY,
                          "prompt_len %d + the decode steps of the run (%d) exceed the model's "
                          "context of %d",
                          P, max_ctx - P, cfg->max_pos);
        goto fail;
    }
    size_t n_ids = 0, need = (size_t)B * (size_t)P;
    const int32_t *ids = text_ids(pt, m, &n_ids, err);
    if (!ids && err->code) {
        st = err->code;
        goto fail;
    }
    if (policy_setup_m(pt, m, s->fixed, &s->pol, s->skew_set, err) != 0) {
        st = err->code;
        goto fail;
    }
    s->pol_ok = 1;
    offload_setup(pt, &s->off, s->pct, sizeof s->pct, s->link, sizeof s->link);
    s->off_ok = 1;
    s->prompt = malloc(need * sizeof(int32_t));
    s->next = malloc((size_t)B * sizeof(int32_t));
    if (!s->prompt || !s->next) {
        st = ig_error_set(err, IG_ERR_NOMEM, "out of memory for %d prompts", B);
        goto fail;
    }
    if (ids && n_ids >= need) {
        memcpy(s->prompt, ids, need * sizeof(int32_t));
    } else {
        if (ids)
            IG_WARN("the text has %zu tokens, fewer than %d x %d: random prompts", n_ids, B, P);
        ig_rng rng;
        ig_rng_seed(&rng, 42);
        for (size_t i = 0; i < need; i++)
            s->prompt[i] = (int32_t)(ig_rng_next(&rng) % (uint64_t)cfg->vocab);
    }
    json_object_object_add(s->fixed, "prompt_source",
                           json_object_new_string(ids && n_ids >= need ? "text" : "random"));
    ig_engine_opts eo = {.max_seqs = B,
                         .max_ctx = max_ctx,
                         .max_batch_tokens = P > B ? P : B,
                         .threads = pt->threads};
    ig_cli_policy_apply(&s->pol, &eo);
    eo.backend = ig_cli_select_backend(pt->backend ? pt->backend : "cpu");
    st = act8_set(pt, eo.backend, err);
    if (st != IG_OK) goto fail;
    s->backend = eo.backend;
    json_object_object_add(s->fixed, "act_quant", json_object_new_string(pt->act8 ? "q8" : "none"));
    json_object_object_add(s->fixed, "weights_mem",
                           json_object_new_string(ig_model_copies_mapped(m) ? "copy" : "map"));
    st = ig_cli_offload_setup_err("run", &s->off, m, B, P, max_ctx - P, &s->pol, &eo, err);
    if (st != IG_OK) {
        if (!err->msg[0]) ig_error_set(err, st, "bad placement (see the message above)");
        goto fail;
    }
    s->link_on = s->off.active && s->off.link.on;
    st = ig_engine_create(m, &eo, &s->e, err);
    if (st != IG_OK) goto fail;
    json_object_object_add(s->fixed, "backend",
                           json_object_new_string(ig_backend_name(ig_engine_backend(s->e))));
    return IG_OK;
fail:
    sess_teardown(s);
    return st;
}

/* The metrics of one measurement: decode steps [ctx0, ctx0 + G) after the prompt. */
static void put_decode(const ig_run_session *s, json_object *mx, double prefill_s,
                       const ig_decode_measure *dm, int ctx0, int prefill_once) {
    const ig_exp_point *pt = s->pt;
    int B = pt->batch, G = pt->gen_len;
    json_object_object_foreach(s->fixed, fk, fv)
        json_object_object_add(mx, fk, json_object_get(fv));
    double decode_s = dm->decode_s + injected_delay(pt);
    ig_engine_stats es = dm->es;
    ig_kv_stats kv = dm->kv;
    ig_wstream_stats ws = dm->ws;
    double tokens = (double)B * (double)G;
    json_object *dc = json_object_new_array();
    json_object_array_add(dc, json_object_new_int(ctx0));
    json_object_array_add(dc, json_object_new_int(ctx0 + G));
    json_object_object_add(mx, "decode_context", dc);
    json_object_object_add(mx, "prefill_measured",
                           json_object_new_string(prefill_once ? "once" : "every"));
    if (pt->metric_throughput) {
        put_d(mx, "throughput_tok_s", tokens / (prefill_s + decode_s));
        put_d(mx, "decode_throughput_tok_s", tokens / decode_s);
        put_d(mx, "prefill_s", prefill_s);
        put_d(mx, "decode_s", decode_s);
        /* the decode phase split as the paper's latency breakdown: every matmul (projections,
         * FFN, lm_head) is "ffn"; "transfer" is time compute waited for a transfer */
        double transfer = kv.transfer_wait_s + ws.wait_s + es.act_transfer_s;
        double prediction = kv.select_s;
        double attention = kv.attention_s + kv.store_s;
        double ffn = es.linear_s + es.logits_s;
        double other = decode_s - transfer - prediction - attention - ffn;
        json_object *bd = json_object_new_object();
        put_d(bd, "attention", attention);
        put_d(bd, "ffn", ffn);
        put_d(bd, "transfer", transfer);
        put_d(bd, "prediction", prediction);
        put_d(bd, "other", other > 0 ? other : 0);
        json_object_object_add(mx, "breakdown_s", bd);
    }
    if (kv.context_rows > 0) put_d(mx, "kv_read_fraction", kv.selected_rows / kv.context_rows);
    if (pt->metric_recall && kv.recall_n > 0)
        put_d(mx, "recall", kv.recall_sum / (double)kv.recall_n);
    if (pt->metric_bytes) { /* the decode phase's traffic */
        put_d(mx, "h2d_bytes", kv.h2d_bytes + ws.h2d_bytes + es.act_h2d_bytes);
        put_d(mx, "d2h_bytes", kv.d2h_bytes + es.act_d2h_bytes);
        put_d(mx, "disk_read_bytes",
              kv.disk_read_bytes + ws.disk_read_bytes + es.act_disk_read_bytes);
        put_d(mx, "disk_write_bytes", kv.disk_write_bytes + es.act_disk_write_bytes);
        put_d(mx, "kv_h2d_bytes", kv.h2d_bytes);
        put_d(mx, "weight_h2d_bytes", ws.h2d_bytes);
        put_d(mx, "act_h2d_bytes", es.act_h2d_bytes);
    }
}

/* Throughput, traffic and recall: batch prompts of prompt_len tokens prefilled one sequence per
 * call, then gen_len greedy decode steps of the whole batch (igen bench-decode's procedure). */
static ig_status measure_decode(const ig_exp_point *pt, ig_model *m, json_object *mx, int *link_on,
                                ig_error *err) {
    ig_run_session s;
    ig_status st = sess_setup(pt, m, pt->prompt_len + pt->gen_len, &s, err);
    if (st != IG_OK) return st;
    *link_on = s.link_on;
    ig_decode_measure dm;
    st = ig_cli_measure_decode(s.e, s.off.ws, s.prompt, pt->batch, pt->prompt_len, pt->gen_len, 0,
                               NULL, &dm, err);
    if (st == IG_OK) put_decode(&s, mx, dm.prefill_s, &dm, pt->prompt_len, 0);
    sess_teardown(&s);
    return st;
}

ig_status ig_run_session_open(const ig_exp_point *pt, int repeats, int warmup_steps,
                              ig_run_session **out, int *link_on, ig_error *err) {
    ig_error_clear(err);
    *out = NULL;
    *link_on = 0;
    if (pt->mode != IG_EXP_MEASURED)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "a session is for measured points");
    ig_model *m = model_get(pt, err);
    if (!m) return err->code;
    ig_run_session *s = malloc(sizeof *s);
    if (!s) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    int max_ctx = pt->prompt_len + warmup_steps + repeats * pt->gen_len;
    ig_status st = sess_setup(pt, m, max_ctx, s, err);
    if (st != IG_OK) {
        free(s);
        return st;
    }
    *link_on = s->link_on;
    st = ig_cli_measure_prefill(s->e, s->prompt, pt->batch, pt->prompt_len, NULL, s->next,
                                &s->prefill_s, err);
    ig_decode_measure dm;
    if (st == IG_OK && warmup_steps > 0)
        st = ig_cli_measure_steps(s->e, s->off.ws, pt->batch, warmup_steps, 0, s->next, &dm, err);
    if (st != IG_OK) {
        ig_run_session_close(s);
        return st;
    }
    s->steps = warmup_steps;
    *out = s;
    return IG_OK;
}

ig_status ig_run_session_decode(ig_run_session *s, json_object *metrics, ig_error *err) {
    ig_error_clear(err);
    const ig_exp_point *pt = s->pt;
    ig_decode_measure dm;
    ig_status st = act8_set(pt, s->backend, err);
    if (st != IG_OK) return st;
    st = ig_cli_measure_steps(s->e, s->off.ws, pt->batch, 0, pt->gen_len, s->next, &dm, err);
    if (st != IG_OK) return st;
    put_decode(s, metrics, s->prefill_s, &dm, pt->prompt_len + s->steps, 1);
    s->steps += pt->gen_len;
    return IG_OK;
}

void ig_run_session_close(ig_run_session *s) {
    if (!s) return;
    sess_teardown(s);
    free(s);
}

/* Perplexity depends on the model, text, policy and ppl settings only, not on the prompt length,
 * batch or placement of the throughput run: a point whose inputs match an earlier one of this
 * process reuses its numbers. */
#define PPL_MEMO 64
static struct {
    char key[2048];
    double ppl, read_fraction;
    int64_t tokens;
    int windows;
    json_object *budget; /* the budget accounting of the ppl run */
} g_memo[PPL_MEMO];
static int g_n_memo;

static void memo_free_budgets(void) {
    for (int i = 0; i < g_n_memo; i++) {
        json_object_put(g_memo[i].budget);
        g_memo[i].budget = NULL;
    }
    g_n_memo = 0;
}

static void ppl_key(const ig_exp_point *pt, char *k, size_t n) {
    int len = snprintf(k, n, "%s|%s%s|%s|%d|%d|%d|%d|%s", pt->model_path, pt->dtype,
                       pt->act8 ? "+q8" : "", pt->text_path ? pt->text_path : "", pt->ppl_ctx,
                       pt->ppl_windows, pt->ppl_prefill,
                       pt->batch < pt->ppl_windows ? pt->batch : pt->ppl_windows, pt->policy);
    for (int i = 0; i < pt->n_settings && len > 0 && (size_t)len < n; i++)
        len += snprintf(k + len, n - (size_t)len, "|%s", pt->settings[i]);
}

/* The ppl run's own budget accounting, as ppl_* metrics (the throughput run's are kv_*). */
static void put_ppl_budget(json_object *mx, json_object *b) {
    json_object_object_foreach(b, k, v) {
        char name[128];
        snprintf(name, sizeof name, "ppl_%s", k);
        json_object_object_add(mx, name, json_object_get(v));
    }
}

static void put_ppl(json_object *mx, double ppl, int64_t tokens, int windows, double rf, int memo) {
    put_d(mx, "ppl", ppl);
    if (rf >= 0) put_d(mx, "ppl_read_fraction", rf);
    json_object_object_add(mx, "ppl_tokens", json_object_new_int64(tokens));
    json_object_object_add(mx, "ppl_windows", json_object_new_int(windows));
    json_object_object_add(mx, "ppl_reused", json_object_new_boolean(memo));
    if (rf >= 0 && !json_object_object_get_ex(mx, "kv_read_fraction", NULL))
        put_d(mx, "kv_read_fraction", rf);
}

/* Perplexity with the policy active: windows of ppl.ctx tokens, the first ppl.prefill tokens a
 * prompt and the rest decoded one by one (placement does not change it: tests/test_cli.c). */
static ig_status measure_ppl(const ig_exp_point *pt, ig_model *m, json_object *mx, ig_error *err) {
    char key[2048];
    ppl_key(pt, key, sizeof key);
    for (int i = 0; i < g_n_memo; i++)
        if (!strcmp(g_memo[i].key, key)) {
            put_ppl(mx, g_memo[i].ppl, g_memo[i].tokens, g_memo[i].windows, g_memo[i].read_fraction,
                    1);
            if (g_memo[i].budget) put_ppl_budget(mx, g_memo[i].budget);
            return IG_OK;
        }
    size_t n_ids = 0;
    const int32_t *ids = text_ids(pt, m, &n_ids, err);
    if (!ids)
        return err->code ? err->code
               : !ig_model_tokenizer(m)
                   ? ig_error_set(err, IG_ERR_UNSUPPORTED,
                                  "ppl needs a tokenizer; %s has none (dummy weights)",
                                  ig_model_name(m))
                   : ig_error_set(err, IG_ERR_INVALID_ARG, "ppl needs workload.text");
    ig_cli_policy pol;
    static char skew_set[4300]; /* this function's pol ends with it */
    if (policy_setup_m(pt, m, mx, &pol, skew_set, err) != 0) return err->code;
    int batch = pt->batch < pt->ppl_windows ? pt->batch : pt->ppl_windows;
    ig_engine_opts eo = {.max_seqs = batch,
                         .max_ctx = pt->ppl_ctx,
                         .max_batch_tokens = pt->ppl_ctx * (pt->ppl_prefill > 0 ? 1 : batch),
                         .threads = pt->threads};
    if (pt->ppl_prefill > 0 && eo.max_batch_tokens < batch) eo.max_batch_tokens = batch;
    ig_cli_policy_apply(&pol, &eo);
    eo.recall = 0;
    eo.backend = ig_cli_select_backend(pt->backend ? pt->backend : "cpu");
    ig_engine *e = NULL;
    ig_status st = act8_set(pt, eo.backend, err);
    if (st == IG_OK) st = ig_engine_create(m, &eo, &e, err);
    if (st == IG_OK) {
        ig_ppl_opts po = {pt->ppl_ctx, batch, pt->ppl_windows, pt->ppl_prefill};
        ig_ppl_result res;
        memset(&res, 0, sizeof res);
        st = ig_ppl_run(e, ids, (int64_t)n_ids, &po, NULL, NULL, &res, err);
        if (st == IG_OK) {
            ig_kv_stats kv = ig_engine_get_kv_stats(e);
            double rf = kv.context_rows > 0 ? kv.selected_rows / kv.context_rows : -1;
            put_ppl(mx, res.ppl, res.tokens, res.windows, rf, 0);
            json_object *b = json_object_new_object();
            if (b) {
                ig_cli_policy_budget_json(e, b);
                put_ppl_budget(mx, b);
            }
            if (g_n_memo < PPL_MEMO) {
                snprintf(g_memo[g_n_memo].key, sizeof g_memo[g_n_memo].key, "%s", key);
                g_memo[g_n_memo].ppl = res.ppl;
                g_memo[g_n_memo].tokens = res.tokens;
                g_memo[g_n_memo].windows = res.windows;
                g_memo[g_n_memo].read_fraction = rf;
                g_memo[g_n_memo].budget = b;
                b = NULL;
                g_n_memo++;
            }
            json_object_put(b);
        }
        ig_ppl_result_free(&res);
    }
    ig_engine_free(e);
    ig_cli_policy_free(&pol);
    return st;
}

/* hardware: this, sampled during the job: the model's decode matmuls (igen profile-hw's
 * --matmul-shape probe, a second or more) once per timed round of every measured group, so that
 * a modeled point is priced at the matmul speed of the minutes its measured twin ran in, not at
 * the one snapshot of the profile (on the 2-core VM the rate moved 85-153 GFLOPS between the
 * repeats of one job). */
#define MM_SAMPLES_MAX 256
static struct mm_sample {
    char shape[128];
    int prompt_len, batch;
    double layer, logits; /* GFLOP/s */
} g_mm[MM_SAMPLES_MAX];
static int g_n_mm;

void ig_run_sample_matmuls(const ig_exp_point *pt) {
    if (!pt || pt->mode != IG_EXP_MEASURED || !pt->hardware_path ||
        strcmp(pt->hardware_path, "this") || !pt->shape_path || g_n_mm >= MM_SAMPLES_MAX)
        return;
    ig_model_shape shape;
    ig_error err;
    ig_error_clear(&err);
    if (ig_model_shape_load(pt->shape_path, &shape, &err) != IG_OK) return;
    int gbs = pt->gpu_batch_size > 0 ? pt->gpu_batch_size : pt->batch;
    struct mm_sample *m = &g_mm[g_n_mm];
    ig_cost_matmul_shape(&shape.config, gbs, m->shape, sizeof m->shape);
    int d[8];
    if (sscanf(m->shape, "%d,%d,%d,%d,%d,%d,%d,%d", &d[0], &d[1], &d[2], &d[3], &d[4], &d[5], &d[6],
               &d[7]) != 8)
        return;
    const char *quick = getenv("IGEN_PROFILE_HW_QUICK");
    if (ig_cli_measure_matmul_shape(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7],
                                    quick && !strcmp(quick, "1"), &m->layer, &m->logits, NULL) != 0)
        return;
    m->prompt_len = pt->prompt_len;
    m->batch = pt->batch;
    g_n_mm++;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The samples of the profile's matmul shape: those of the point's own prompt length and batch
 * (its measured twin's group) where there are any, else all; their medians replace the profile's
 * gemm_tflops_layer / _logits, and the record says so. */
static void use_mm_samples(const ig_exp_point *pt, ig_hwprof *hw, json_object *mx) {
    double lay[MM_SAMPLES_MAX], lgt[MM_SAMPLES_MAX];
    int n = 0, own = 0;
    for (int pass = 0; pass < 2 && n == 0; pass++)
        for (int i = 0; i < g_n_mm; i++) {
            const struct mm_sample *m = &g_mm[i];
            if (strcmp(m->shape, hw->device.matmul_shape)) continue;
            if (pass == 0 && (m->prompt_len != pt->prompt_len || m->batch != pt->batch)) continue;
            lay[n] = m->layer;
            lgt[n++] = m->logits;
            own = pass == 0;
        }
    if (n == 0) return;
    json_object *o = json_object_new_object(), *al = json_object_new_array(),
                *ag = json_object_new_array();
    for (int i = 0; i < n; i++) {
        json_object_array_add(al, json_object_new_double(lay[i]));
        json_object_array_add(ag, json_object_new_double(lgt[i]));
    }
    qsort(lay, (size_t)n, sizeof *lay, cmp_dbl);
    qsort(lgt, (size_t)n, sizeof *lgt, cmp_dbl);
    double ml = n % 2 ? lay[n / 2] : (lay[n / 2 - 1] + lay[n / 2]) / 2;
    double mg = n % 2 ? lgt[n / 2] : (lgt[n / 2 - 1] + lgt[n / 2]) / 2;
    json_object_object_add(
        o, "from",
        json_object_new_string(own ? "the measured twin's group" : "every measured group"));
    json_object_object_add(o, "layer_gflops", al);
    json_object_object_add(o, "logits_gflops", ag);
    json_object_object_add(o, "profile_layer_gflops",
                           json_object_new_double(hw->device.gemm_tflops_layer * 1000));
    json_object_object_add(o, "profile_logits_gflops",
                           json_object_new_double(hw->device.gemm_tflops_logits * 1000));
    json_object_object_add(o, "used_layer_gflops", json_object_new_double(ml));
    json_object_object_add(o, "used_logits_gflops", json_object_new_double(mg));
    json_object_object_add(mx, "matmul_samples", o);
    hw->device.gemm_tflops_layer = ml / 1000;
    hw->device.gemm_tflops_logits = mg / 1000;
}

/* hardware: this. The profile of this machine, measured by `igen profile-hw` on first use and
 * kept as OUTPUT/hardware-this.yaml (delete it to measure again); with the point's link model on,
 * its link section is replaced by that model, which is what the measured twin's copies obey (the
 * profile's own link is a memcpy). IGEN_PROFILE_HW_QUICK=1 profiles with --quick (tests). */
static ig_status this_profile(const ig_exp_point *pt, const ig_model_config *model, ig_hwprof *hw,
                              json_object *mx, ig_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%.4000s/hardware-this.yaml", g_out_dir);
    int reused = ig_path_exists(path);
    if (!reused) {
        if (ig_exp_mkdir_p(g_out_dir, err) != IG_OK) return err->code;
        char self[4096];
        ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
        if (len <= 0)
            return ig_error_set(err, IG_ERR_IO, "hardware: this: cannot find this igen executable");
        self[len] = 0;
        const char *quick = getenv("IGEN_PROFILE_HW_QUICK");
        /* the decode kernels at the model's attention shape (the first point's: a point of
         * another shape gets memory bandwidth, as its record says) */
        char shp[64], msh[128];
        ig_cost_kernel_shape(model, shp, sizeof shp);
        /* and its decode matmuls at its own shapes, at the first point's GPU batch */
        int gbs = pt->gpu_batch_size > 0 ? pt->gpu_batch_size : pt->batch;
        ig_cost_matmul_shape(model, gbs, msh, sizeof msh);
        char *argv[12] = {
            self, "profile-hw", "--out", path, "--kernel-shape", shp, "--matmul-shape", msh,
            NULL, NULL,         NULL,    NULL};
        char th[32];
        int k = 8;
        if (quick && !strcmp(quick, "1")) argv[k++] = "--quick";
        if (pt->threads > 0) {
            snprintf(th, sizeof th, "%d", pt->threads);
            argv[k++] = "--threads";
            argv[k++] = th;
        }
        fprintf(stderr, "igen run: hardware: this: profiling this machine -> %s\n", path);
        pid_t pid;
        int ws = 0;
        extern char **environ;
        if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0 || waitpid(pid, &ws, 0) < 0 ||
            !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            remove(path);
            return ig_error_set(err, IG_ERR_IO,
                                "hardware: this: igen profile-hw failed (see its message above)");
        }
    }
    IG_TRY(ig_hwprof_load(path, hw, err));
    json_object *o = json_object_new_object();
    json_object_object_add(o, "file", json_object_new_string(path));
    json_object_object_add(o, "reused", json_object_new_boolean(reused));
    json_object_object_add(
        o, "link", json_object_new_string(pt->link ? "placement.link" : "measured (memcpy)"));
    json_object_object_add(mx, "hardware_this", o);
    use_mm_samples(pt, hw, mx);
    if (pt->link) {
        hw->link.h2d_gbps = pt->link_h2d_gbps;
        hw->link.d2h_gbps = pt->link_d2h_gbps;
        hw->link.h2d_latency_us = hw->link.d2h_latency_us = pt->link_latency_us;
    }
    return IG_OK;
}

static ig_status modeled(const ig_exp_point *pt, json_object *mx, ig_error *err) {
    if (pt->act8) /* said, not priced: the matmul rates are the exact kernels' */
        json_object_object_add(
            mx, "act_quant",
            json_object_new_string("q8, not modeled: the matmuls are priced as the exact kernels"));
    ig_model_shape shape;
    IG_TRY(ig_model_shape_load(pt->shape_path, &shape, err));
    ig_hwprof *hw = malloc(sizeof *hw);
    if (!hw) return ig_error_set(err, IG_ERR_NOMEM, "out of memory");
    ig_status st = !strcmp(pt->hardware_path, "this") ? this_profile(pt, &shape.config, hw, mx, err)
                                                      : ig_hwprof_load(pt->hardware_path, hw, err);
    ig_plan *plan = NULL;
    if (st != IG_OK) goto out;
    ig_machine mach;
    ig_hwprof_to_machine(hw, &mach);
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    o.model = shape.config;
    o.weight_dtype = shape.weight_dtype;
    if (!strcmp(pt->hardware_path, "this")) {
        /* the prediction of this machine's own run: weights as the measured twin stores them
         * (model.dtype), KV rows as the CPU engine's home keeps them (f32) */
        int keep = 0;
        o.weight_dtype = ig_plan_dtype_of_weight(point_dtype(pt, &keep));
        if (keep) { /* the types the file stores: those of the loaded model */
            ig_model *m = model_get(pt, err);
            if (!m) {
                st = IG_ERR_IO;
                goto out;
            }
            o.weight_dtype = ig_plan_dtype_of_weight(ig_model_dtype(m));
        }
        o.kv_dtype = IG_PLAN_F32;
    }
    int gbs = pt->gpu_batch_size > 0 ? pt->gpu_batch_size : pt->batch;
    if (pt->batch % gbs) {
        st = ig_error_set(err, IG_ERR_INVALID_ARG,
                          "placement.gpu_batch_size %d does not divide workload.batch %d", gbs,
                          pt->batch);
        goto out;
    }
    o.wl = (ig_workload){pt->prompt_len, pt->gen_len, gbs, pt->batch / gbs};
    o.pct = (ig_plan_percent){pt->weights.gpu, pt->weights.cpu,     pt->kv.gpu,
                              pt->kv.cpu,      pt->activations.gpu, pt->activations.cpu};
    o.overlap = pt->overlap;
    if (ig_cli_parse_numa("run", pt->numa, &o) != 0) {
        st = ig_error_set(err, IG_ERR_INVALID_ARG, "placement.numa: '%s'", pt->numa);
        goto out;
    }
    st = ig_cli_policy_cost(pt->policy, pt->settings, pt->n_settings, &o, err);
    if (st == IG_OK) st = ig_plan_create(&o, &mach, &plan, err);
    ig_cost_hw rates;
    char kernel_rates[512], matmul_rates[512];
    ig_cost_kernel_rates_desc(hw, &o.model, ig_cost_hw_from_profile_for(hw, &o.model, &rates),
                              kernel_rates, sizeof kernel_rates);
    ig_cost_hw_matmul_for(hw, &o.model, gbs, o.weight_dtype == IG_PLAN_F32, &rates, matmul_rates,
                          sizeof matmul_rates);
    ig_cost_result c, cd;
    if (st == IG_OK) st = ig_cost_estimate(plan, &rates, &c, err);
    if (st != IG_OK) goto out;
    /* the decode steps the measured twin times: with measure.prefill: once its repeats decode on
     * from one prefill, after IG_RUN_WARMUP_STEPS untimed steps, so its median repeat runs at a
     * longer context than the workload's first gen_len steps (at 512 tokens, 64 steps and 3
     * repeats, 610 against 544 in the middle); the decode figures are predicted over that whole
     * window, the prefill ones as the workload gives them */
    int ctx0 = pt->prompt_len, steps = pt->gen_len;
    if (pt->prefill_once && pt->repeat > 0) {
        ctx0 += pt->warmup ? IG_RUN_WARMUP_STEPS : 0;
        steps = pt->repeat * pt->gen_len;
    }
    cd = c;
    if (ctx0 != pt->prompt_len || steps != pt->gen_len) {
        ig_plan_opts ow = o;
        ow.wl.prompt_len = ctx0;
        ow.wl.gen_len = steps;
        ig_plan *pw = NULL;
        st = ig_plan_create(&ow, &mach, &pw, err);
        if (st == IG_OK) st = ig_cost_estimate(pw, &rates, &cd, err);
        ig_plan_free(pw);
        if (st != IG_OK) goto out;
    }
    put_d(mx, "throughput_tok_s", c.throughput);
    put_d(mx, "decode_throughput_tok_s", cd.decode_throughput);
    put_d(mx, "prefill_s", c.prefill_s);
    put_d(mx, "decode_s", cd.decode_step_s * (pt->gen_len > 1 ? pt->gen_len - 1 : 0));
    put_d(mx, "decode_step_s", cd.decode_step_s);
    json_object *dc = json_object_new_array();
    json_object_array_add(dc, json_object_new_int(ctx0));
    json_object_array_add(dc, json_object_new_int(ctx0 + steps));
    json_object_object_add(mx, "decode_context", dc);
    /* the read at the middle of the decode window (the profile's where one was given) */
    put_d(mx, "kv_read_fraction", ig_cost_fetch_fraction(&o, ctx0 + 0.5 * steps));
    json_object_object_add(mx, "fetch_source", json_object_new_string(o.fetch_source));
    json_object_object_add(mx, "kernel_rates", json_object_new_string(kernel_rates));
    json_object_object_add(mx, "matmul_rates", json_object_new_string(matmul_rates));
    if (pt->metric_bytes) { /* per decode step, all layers */
        put_d(mx, "h2d_bytes_per_step", cd.decode_step_h2d_bytes);
        put_d(mx, "d2h_bytes_per_step", cd.decode_step_d2h_bytes);
        put_d(mx, "disk_read_bytes_per_step", cd.decode_step_disk_read_bytes);
    }
out:
    ig_plan_free(plan);
    free(hw);
    return st;
}

ig_status ig_run_point_timed(const ig_exp_point *pt, json_object *metrics, int *link_on,
                             ig_error *err) {
    ig_error_clear(err);
    *link_on = 0;
    if (pt->mode == IG_EXP_MODELED) return modeled(pt, metrics, err);
    if (!(pt->metric_throughput || pt->metric_bytes || pt->metric_recall)) return IG_OK;
    ig_model *m = model_get(pt, err);
    if (!m) return err->code;
    return measure_decode(pt, m, metrics, link_on, err);
}

ig_status ig_run_point_ppl(const ig_exp_point *pt, json_object *metrics, ig_error *err) {
    ig_error_clear(err);
    if (pt->mode == IG_EXP_MODELED || !pt->metric_ppl) return IG_OK;
    ig_model *m = model_get(pt, err);
    if (!m) return err->code;
    return measure_ppl(pt, m, metrics, err);
}

ig_status ig_run_point(const ig_exp_point *pt, json_object *metrics, int *link_on, ig_error *err) {
    ig_error_clear(err);
    *link_on = 0;
    if (pt->mode == IG_EXP_MODELED) return modeled(pt, metrics, err);
    ig_model *m = model_get(pt, err);
    if (!m) return err->code;
    ig_status st = IG_OK;
    if (pt->metric_throughput || pt->metric_bytes || pt->metric_recall)
        st = measure_decode(pt, m, metrics, link_on, err);
    if (st == IG_OK && pt->metric_ppl) st = measure_ppl(pt, m, metrics, err);
    return st;
}
