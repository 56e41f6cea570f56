/* Policy options shared by the commands that run a KV policy, and their result fields. */
#include <stdio.h>
#include <string.h>

#include "core/app/cli/cli.h"
#include "core/base/mapfile.h"

void ig_cli_policy_init(ig_cli_policy *p) {
    memset(p, 0, sizeof *p);
    p->kv_dtype = IG_DTYPE_F32;
    p->kv_access = IG_KV_ACCESS_AUTO;
}

int ig_cli_policy_opt(ig_cli_policy *p, int opt, const char *arg) {
    switch (opt) {
    case IG_OPT_POLICY:
        p->name = arg;
        return 1;
    case IG_OPT_SET:
        if (p->n_sets == IG_CLI_POLICY_MAX_SETS) {
            fprintf(stderr, "igen: at most %d --set options\n", IG_CLI_POLICY_MAX_SETS);
            return -1;
        }
        p->sets[p->n_sets++] = arg;
        return 1;
    case IG_OPT_KV_DTYPE: {
        int t = ig_dtype_from_name(arg);
        if (t != IG_DTYPE_F32 && t != IG_DTYPE_F16) {
            fprintf(stderr, "igen: --kv-dtype: '%s' is not one of f32, f16\n", arg);
            return -1;
        }
        p->kv_dtype = (ig_dtype)t;
        return 1;
    }
    case IG_OPT_KV_ACCESS:
        if (!strcmp(arg, "auto"))
            p->kv_access = IG_KV_ACCESS_AUTO;
        else if (!strcmp(arg, "inplace"))
            p->kv_access = IG_KV_ACCESS_INPLACE;
        else if (!strcmp(arg, "copy"))
            p->kv_access = IG_KV_ACCESS_COPY;
        else if (!strcmp(arg, "cpu"))
            p->kv_access = IG_KV_ACCESS_CPU;
        else {
            fprintf(stderr, "igen: --kv-access: '%s' is not one of auto, inplace, copy, cpu\n",
                    arg);
            return -1;
        }
        return 1;
    case IG_OPT_RECALL:
        p->recall = 1;
        return 1;
    default:
        return 0;
    }
}

int ig_cli_policy_resolve(const char *cmd, ig_cli_policy *p) {
    if (!p->name) {
        if (p->n_sets > 0 || p->recall) {
            fprintf(stderr, "igen %s: --set and --recall need --policy NAME\n", cmd);
            return -1;
        }
        return 0;
    }
    p->ops = ig_policy_find(p->name);
    if (!p->ops) {
        char names[512] = "";
        const ig_policy_ops *const *all = ig_policy_list();
        for (int i = 0; all[i]; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     all[i]->name);
        fprintf(stderr, "igen %s: unknown policy '%s' (policies: %s)\n", cmd, p->name, names);
        return -1;
    }
    ig_error err;
    ig_error_clear(&err);
    if (ig_policy_params_parse(p->ops, p->sets, p->n_sets, &p->params, &err) != IG_OK) {
        fprintf(stderr, "igen %s: %s\n", cmd, err.msg);
        return -1;
    }
    return 0;
}

void ig_cli_policy_free(ig_cli_policy *p) {
    ig_policy_params_free(p->params);
    p->params = NULL;
}

void ig_cli_policy_apply(const ig_cli_policy *p, ig_engine_opts *eo) {
    eo->policy = p->ops;
    eo->policy_params = p->params;
    eo->kv_dtype = p->kv_dtype;
    eo->kv_access = p->kv_access;
    eo->recall = p->recall;
}

static double per(double x, double n) {
    return n > 0 ? x / n : 0;
}

void ig_cli_fetch_profile_of(const ig_cli_policy *p, const ig_engine *e, ig_fetch_profile *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->policy, sizeof out->policy, "%s", p->ops ? p->ops->name : "none");
    if (p->params) ig_policy_params_describe(p->params, out->params, sizeof out->params);
    ig_kv_stats s = ig_engine_get_kv_stats(e);
    int G = ig_model_get_config(ig_engine_model(e))->n_kv_head;
    for (int b = 0; b < IG_KV_PROFILE_BUCKETS && out->n < IG_FETCH_PROFILE_MAX; b++) {
        if (s.len_steps[b] <= 0 || s.len_context_rows[b] <= 0) continue;
        ig_fetch_profile_point *q = &out->pts[out->n++];
        q->ctx = s.len_context_rows[b] / (s.len_steps[b] * G);
        q->fraction = s.len_selected_rows[b] / s.len_context_rows[b];
        q->steps = s.len_steps[b];
    }
}

void ig_cli_policy_budget_json(const ig_engine *e, json_object *o) {
    ig_kv_stats s = ig_engine_get_kv_stats(e);
    ig_policy_budget_info b;
    ig_engine_policy_budget(e, &b);
    json_object_object_add(
        o, "kv_read_fraction_selected_layers",
        json_object_new_double(per(s.sel_layer_selected_rows, s.sel_layer_context_rows)));
    json_object_object_add(o, "policy_budget", json_object_new_string(b.budget));
    json_object_object_add(o, "policy_dense_layers", json_object_new_int(b.dense_layers));
    json_object_object_add(o, "policy_meta_device_bytes",
                           json_object_new_int64((int64_t)b.meta_device_bytes));
    json_object_object_add(o, "policy_wq_device_bytes",
                           json_object_new_int64((int64_t)b.wq_device_bytes));
    json_object_object_add(o, "policy_meta_host_bytes",
                           json_object_new_int64((int64_t)b.meta_host_bytes));
    json_object_object_add(
        o, "policy_meta_fraction",
        json_object_new_double(per((double)b.meta_device_bytes, (double)b.kv_cache_bytes)));
}

void ig_cli_policy_json(const ig_cli_policy *p, const ig_engine *e, json_object *o) {
    char buf[1024];
    json_object_object_add(o, "policy", json_object_new_string(p->ops ? p->ops->name : "none"));
    json_object_object_add(
        o, "policy_params",
        json_object_new_string(p->params ? ig_policy_params_describe(p->params, buf, sizeof buf)
                                         : ""));
    json_object_object_add(o, "kv_dtype", json_object_new_string(ig_dtype_name(p->kv_dtype)));
    static const char *acc[] = {"auto", "inplace", "copy", "cpu"};
    json_object_object_add(o, "kv_access", json_object_new_string(acc[p->kv_access]));
    ig_kv_stats s = ig_engine_get_kv_stats(e);
    double tok = (double)s.decode_tokens;
    json_object_object_add(o, "kv_decode_tokens", json_object_new_int64(s.decode_tokens));
    json_object_object_add(o, "kv_home_bytes",
                           json_object_new_int64((int64_t)ig_engine_kv_home_bytes(e)));
    json_object_object_add(o, "kv_device_bytes",
                           json_object_new_int64((int64_t)ig_engine_kv_device_bytes(e)));
    json_object_object_add(o, "kv_h2d_bytes_per_token",
                           json_object_new_double(per(s.h2d_bytes, tok)));
    json_object_object_add(o, "kv_h2d_bytes_per_step",
                           json_object_new_double(per(s.h2d_bytes, (double)s.decode_calls)));
    json_object_object_add(o, "kv_d2h_bytes_per_token",
                           json_object_new_double(per(s.d2h_bytes, tok)));
    json_object_object_add(o, "kv_read_bytes_per_token",
                           json_object_new_double(per(s.read_bytes, tok)));
    json_object_object_add(o, "kv_prefill_d2h_bytes", json_object_new_double(s.prefill_d2h_bytes));
    json_object_object_add(o, "kv_fetch_fraction",
                           json_object_new_double(per(s.selected_rows, s.resident_rows)));
    json_object_object_add(o, "kv_context_fraction",
                           json_object_new_double(per(s.selected_rows, s.context_rows)));
    json_object_object_add(o, "kv_resident_fraction",
                           json_object_new_double(per(s.resident_rows, s.context_rows)));
    ig_cli_policy_budget_json(e, o);
    if (p->ops) {
        ig_fetch_profile fp;
        ig_cli_fetch_profile_of(p, e, &fp);
        json_object *a = json_object_new_array();
        for (int i = 0; i < fp.n; i++) {
            json_object *q = json_object_new_object();
            json_object_object_add(q, "ctx", json_object_new_double(fp.pts[i].ctx));
            json_object_object_add(q, "fraction", json_object_new_double(fp.pts[i].fraction));
            json_object_array_add(a, q);
        }
        json_object_object_add(o, "kv_fetch_profile", a);
    }
    json_object_object_add(o, "kv_evictions", json_object_new_int64(s.evictions));
    json_object_object_add(o, "kv_disk_read_bytes", json_object_new_double(s.disk_read_bytes));
    json_object_object_add(o, "kv_disk_write_bytes", json_object_new_double(s.disk_write_bytes));
    json_object_object_add(o, "time_select_s", json_object_new_double(s.select_s));
    json_object_object_add(o, "time_transfer_s", json_object_new_double(s.transfer_s));
    json_object_object_add(o, "time_transfer_wait_s", json_object_new_double(s.transfer_wait_s));
    json_object_object_add(o, "time_attention_s", json_object_new_double(s.attention_s));
    json_object_object_add(o, "time_store_s", json_object_new_double(s.store_s));
    json_object_object_add(o, "kv_store_jobs", json_object_new_int64(s.store_jobs));
    if (s.recall_n > 0)
        json_object_object_add(o, "recall",
                               json_object_new_double(s.recall_sum / (double)s.recall_n));
}

void ig_cli_policy_print(const ig_cli_policy *p, const ig_engine *e, FILE *f) {
    if (!p->ops) return;
    ig_kv_stats s = ig_engine_get_kv_stats(e);
    double tok = (double)s.decode_tokens;
    fprintf(f,
            "kv: policy %s, %.0f KiB moved home->device per decode token (%.1f%% of resident rows, "
            "%.1f%% of context; %.1f%% in the selected layers), %lld evictions",
            p->ops->name, per(s.h2d_bytes, tok) / 1024, 100 * per(s.selected_rows, s.resident_rows),
            100 * per(s.selected_rows, s.context_rows),
            100 * per(s.sel_layer_selected_rows, s.sel_layer_context_rows), (long long)s.evictions);
    ig_policy_budget_info b;
    ig_engine_policy_budget(e, &b);
    fprintf(f, "\nkv: budget: %s; metadata %.1f MiB on the device (%.2f%% of the KV cache)",
            b.budget, (double)b.meta_device_bytes / (1 << 20),
            100 * per((double)b.meta_device_bytes, (double)b.kv_cache_bytes));
    if (b.wq_device_bytes)
        fprintf(f, ", of which %.1f MiB W_q read ahead (placed off the device, held resident)",
                (double)b.wq_device_bytes / (1 << 20));
    if (s.recall_n > 0) fprintf(f, ", recall %.3f", s.recall_sum / (double)s.recall_n);
    fputc('\n', f);
}

void ig_cli_kv_format_apply(const ig_policy_cost_terms *t, ig_plan_opts *o) {
    if (t->codec_set && t->codec.kind == IG_KV_CODEC_QUANT) {
        int hd = o->model.head_dim;
        o->kv_dtype = t->codec.bits > 4 ? IG_PLAN_INT8 : IG_PLAN_INT4;
        size_t rb = ig_kv_codec_row_bytes(&t->codec, hd);
        o->kv_head_row_bytes = 0;
        o->kv_format[0] = '\0';
        if (hd > 0 && rb != ig_plan_row_bytes(o->kv_dtype, (size_t)hd)) {
            o->kv_head_row_bytes = rb;
            snprintf(o->kv_format, sizeof o->kv_format, "%d-bit, groups of %d", t->codec.bits,
                     t->codec.group);
        }
    } else if (t->codec_set) {
        o->kv_dtype = t->codec.kind == IG_KV_CODEC_F16 ? IG_PLAN_F16 : IG_PLAN_F32;
    }
}

static void cost_terms_apply(const ig_policy_cost_terms *t, ig_plan_opts *o) {
    ig_cli_kv_format_apply(t, o);
    o->kv_keep_fraction = t->keep;
    o->fetch_fraction = t->fetch;
    o->partial_ratio = t->partial;
    o->dense_layers = t->dense_layers;
    o->attn_probs = t->attn_probs;
}

ig_status ig_cli_policy_cost(const char *name, const char *const *settings, int n, ig_plan_opts *o,
                             ig_error *err) {
    const ig_policy_ops *ops = ig_policy_find(name);
    if (!ops) {
        char names[512] = "";
        const ig_policy_ops *const *all = ig_policy_list();
        for (int i = 0; all[i]; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     all[i]->name);
        return ig_error_set(err, IG_ERR_INVALID_ARG, "unknown policy '%s' (policies: %s)", name,
                            names);
    }
    ig_policy_params *p = NULL;
    IG_TRY(ig_policy_params_parse(ops, settings, n, &p, err));
    ig_policy_cost_terms t;
    ig_status st = ig_policy_get_cost_terms(ops, p, &o->model, &t, err);
    ig_policy_params_free(p);
    IG_TRY(st);
    cost_terms_apply(&t, o);
    const char *fp = t.fetch_profile[0] ? t.fetch_profile : NULL;
    char fp_src[4200];
    if (fp && fp[0] != '/' && !ig_path_exists(fp)) { /* relative: the source tree's */
        snprintf(fp_src, sizeof fp_src, "%s/%s", IG_SOURCE_DIR, fp);
        if (ig_path_exists(fp_src)) fp = fp_src;
    }
    if (fp) {
        ig_fetch_profile prof;
        IG_TRY(ig_fetch_profile_load(fp, &prof, err));
        if (strcmp(prof.policy, name) != 0)
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "%s: a fetch profile of policy '%s', not of '%s'", fp, prof.policy,
                                name);
        o->fetch_profile_n = prof.n;
        for (int i = 0; i < prof.n; i++) {
            o->fetch_profile_ctx[i] = prof.pts[i].ctx;
            o->fetch_profile_frac[i] = prof.pts[i].fraction;
        }
        snprintf(o->fetch_source, sizeof o->fetch_source,
                 "measured profile %.200s (%s, %d points from context %.0f to %.0f)", fp,
                 prof.model, prof.n, prof.pts[0].ctx, prof.pts[prof.n - 1].ctx);
    } else if (t.fetch_is_cap) {
        snprintf(o->fetch_source, sizeof o->fetch_source,
                 "the cap: %g of the context at every length (no fetch profile given: --set "
                 "fetch_profile=FILE from 'igen ppl --fetch-profile')",
                 o->fetch_fraction);
    }
    if (!o->fetch_source[0])
        snprintf(o->fetch_source, sizeof o->fetch_source,
                 "%s: %g of the context per step, as its parameters fix it", name,
                 o->fetch_fraction);
    /* a zero budget is not a plan the cost model can price; clamp to one row in a thousand */
    if (o->fetch_fraction <= 0) o->fetch_fraction = 1e-3;
    if (o->kv_keep_fraction <= 0) o->kv_keep_fraction = 1e-3;
    if (o->fetch_fraction > o->kv_keep_fraction) o->fetch_fraction = o->kv_keep_fraction;
    return IG_OK;
}
