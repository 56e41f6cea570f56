/* Offloading options of the commands that run a model (generate, ppl, bench-decode): a FlexGen
 * placement (--percent), the NUMA choice, the disk tier, the link model and overlap. The placement
 * goes through the planner (offload/plan) against this machine's topology, so a run uses exactly
 * the plan `igen plan --this-machine` prints; the weight stream (offload/wstream) then executes it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/cli/cli.h"
#include "offload/disk.h"
#include "offload/plan.h"
#include "offload/topo.h"
#include "offload/wstream.h"

int ig_cli_parse_percent(const char *cmd, const char *s, ig_plan_percent *p) {
    double v[6];
    const char *q = s;
    for (int i = 0; i < 6; i++) {
        char *end = NULL;
        v[i] = strtod(q, &end);
        if (end == q || (i < 5 && *end != ',') || (i == 5 && *end != '\0')) {
            fprintf(stderr,
                    "igen %s: --percent: '%s' is not six comma-separated numbers "
                    "W_GPU,W_CPU,C_GPU,C_CPU,A_GPU,A_CPU\n",
                    cmd, s);
            return -1;
        }
        q = end + 1;
    }
    *p = (ig_plan_percent){v[0], v[1], v[2], v[3], v[4], v[5]};
    return 0;
}

int ig_cli_parse_numa(const char *cmd, const char *s, ig_plan_opts *o) {
    if (!strcmp(s, "local")) {
        o->numa_mode = IG_NUMA_LOCAL;
        return 0;
    }
    if (!strcmp(s, "interleave")) {
        o->numa_mode = IG_NUMA_INTERLEAVE;
        return 0;
    }
    o->numa_mode = IG_NUMA_NODES;
    o->n_numa_nodes = 0;
    const char *q = s;
    while (*q) {
        char *end = NULL;
        long v = strtol(q, &end, 10);
        if (end == q || v < 0 || v > 4095 || (*end && *end != ',') ||
            o->n_numa_nodes >= IG_MAX_NUMA) {
            fprintf(stderr,
                    "igen %s: --numa: '%s' is not local, interleave or a node list like 0,1\n", cmd,
                    s);
            return -1;
        }
        o->numa_nodes[o->n_numa_nodes++] = (int)v;
        q = *end ? end + 1 : end;
    }
    if (!o->n_numa_nodes) {
        fprintf(stderr, "igen %s: --numa: empty node list\n", cmd);
        return -1;
    }
    return 0;
}

void ig_cli_offload_init(ig_cli_offload *o) {
    memset(o, 0, sizeof *o);
}

int ig_cli_offload_opt(ig_cli_offload *o, int opt, const char *arg) {
    switch (opt) {
    case IG_OPT_PERCENT:
        o->percent = arg;
        return 1;
    case IG_OPT_NUMA:
        o->numa = arg;
        return 1;
    case IG_OPT_DISK_DIR:
        o->disk_dir = arg;
        return 1;
    case IG_OPT_LINK:
        o->link_spec = arg;
        return 1;
    case IG_OPT_NO_OVERLAP:
        o->no_overlap = 1;
        return 1;
    case IG_OPT_DEVICE_MEM: {
        char *end = NULL;
        double g = strtod(arg, &end);
        if (end == arg || *end || !(g > 0 && g < 1e6)) {
            fprintf(stderr, "igen: --device-mem: '%s' is not a size in GiB\n", arg);
            return -1;
        }
        o->device_gib = g;
        return 1;
    }
    case IG_OPT_GPU_BATCH: {
        char *end = NULL;
        long g = strtol(arg, &end, 10);
        if (end == arg || *end || g < 1 || g > 4096) {
            fprintf(stderr, "igen: --gpu-batch: '%s' is not a number of sequences (1..4096)\n",
                    arg);
            return -1;
        }
        o->gpu_batch = (int)g;
        return 1;
    }
    default:
        return 0;
    }
}

int ig_cli_offload_setup(const char *cmd, ig_cli_offload *o, const ig_model *m, int n_seqs,
                         int prompt_len, int gen_len, const ig_cli_policy *pol,
                         ig_engine_opts *eo) {
    ig_error err;
    ig_error_clear(&err);
    if (ig_cli_offload_setup_err(cmd, o, m, n_seqs, prompt_len, gen_len, pol, eo, &err) == IG_OK)
        return 0;
    if (err.msg[0]) ig_cli_error(cmd, &err); /* else the option parser has printed it */
    return -1;
}

ig_status ig_cli_offload_setup_err(const char *cmd, ig_cli_offload *o, const ig_model *m,
                                   int n_seqs, int prompt_len, int gen_len,
                                   const ig_cli_policy *pol, ig_engine_opts *eo, ig_error *errp) {
    if (o->gpu_batch > 0 && n_seqs % o->gpu_batch != 0)
        return ig_error_set(errp, IG_ERR_INVALID_ARG,
                            "--gpu-batch %d does not divide the %d sequences into equal GPU "
                            "batches",
                            o->gpu_batch, n_seqs);
    eo->gpu_batch_seqs = o->gpu_batch;
    if (!o->percent) {
        if (o->numa || o->disk_dir || o->link_spec || o->no_overlap || o->device_gib > 0)
            return ig_error_set(errp, IG_ERR_INVALID_ARG,
                                "--numa, --disk-dir, --link, --no-overlap and --device-mem "
                                "need --percent (the placement)");
        return IG_OK;
    }
    ig_error err;
    ig_error_clear(&err);
    ig_plan_opts po;
    ig_plan_opts_init(&po);
    if (ig_cli_parse_percent(cmd, o->percent, &po.pct) != 0 ||
        (o->numa && ig_cli_parse_numa(cmd, o->numa, &po) != 0)) {
        ig_error_clear(errp); /* printed by the parser */
        errp->code = IG_ERR_INVALID_ARG;
        return IG_ERR_INVALID_ARG;
    }
    if (ig_link_parse(o->link_spec, &o->link, &err) != IG_OK) goto fail;
    const ig_model_config *c = ig_model_get_config(m);
    po.model = *c;
    po.weight_dtype = ig_plan_dtype_of_weight(ig_model_dtype(m));
    po.act_dtype = IG_PLAN_F32;
    po.kv_dtype = pol && pol->name && pol->kv_dtype == IG_DTYPE_F16 ? IG_PLAN_F16 : IG_PLAN_F32;
    if (pol && pol->ops) { /* a policy's own row format (int4's codes) */
        ig_policy_cost_terms t;
        if (ig_policy_get_cost_terms(pol->ops, pol->params, c, &t, &err) != IG_OK) goto fail;
        ig_cli_kv_format_apply(&t, &po);
    }
    po.overlap = !o->no_overlap;
    int gb = o->gpu_batch > 0 ? o->gpu_batch : n_seqs;
    po.wl =
        (ig_workload){prompt_len > 0 ? prompt_len : 1, gen_len > 0 ? gen_len : 1, gb, n_seqs / gb};
    /* the machine: this one's NUMA nodes; the device region is host memory on the CPU backend */
    if (ig_topo_discover(&o->topo, &err) != IG_OK) goto fail;
    ig_machine mach;
    memset(&mach, 0, sizeof mach);
    if (ig_topo_fill_machine(o->topo, -1, &mach) != IG_OK) {
        ig_error_set(&err, IG_ERR_INTERNAL, "cannot describe this machine's memory");
        goto fail;
    }
    mach.device_bytes =
        o->device_gib > 0 ? (size_t)(o->device_gib * 1073741824.0) : ig_topo_total_memory(o->topo);
    if (o->disk_dir) {
        if (ig_disk_create(o->disk_dir, 0, 2, &o->disk, &err) != IG_OK) goto fail;
        mach.disk_bytes = ig_disk_capacity(o->disk);
    }
    if (ig_plan_create(&po, &mach, &o->plan, &err) != IG_OK) {
        if (!o->disk_dir && strstr(err.msg, "no disk tier")) {
            size_t n = strlen(err.msg);
            const char *hint = " (give --disk-dir DIR)";
            if (n + strlen(hint) < sizeof err.msg) memcpy(err.msg + n, hint, strlen(hint) + 1);
        }
        goto fail;
    }
    /* the executor runs every placement the planner accepts: weights per tensor group on any
     * tier, KV and activations in whole sequences (device first, then host, then disk) */
    int n_kv_disk = ig_plan_kv_sequences(o->plan, IG_TIER_DISK);
    int n_act_host = ig_plan_act_sequences(o->plan, IG_TIER_HOST);
    int n_act_disk = ig_plan_act_sequences(o->plan, IG_TIER_DISK);
    if ((n_kv_disk > 0 || n_act_disk > 0) && !o->disk) {
        ig_error_set(&err, IG_ERR_INVALID_ARG,
                     "--percent %s puts KV cache or activations on disk: give --disk-dir DIR",
                     o->percent);
        goto fail;
    }
    int kv_dev = ig_plan_kv_sequences(o->plan, IG_TIER_DEVICE);
    for (int i = 0; i < n_seqs; i++) /* the executor homes slots 0..kv_dev-1 on the device */
        if ((ig_plan_kv_sequence(o->plan, i).kind == IG_TIER_DEVICE) != (i < kv_dev)) {
            ig_error_set(&err, IG_ERR_INTERNAL, "plan: device KV sequences are not the first ones");
            goto fail;
        }
    if (ig_plan_kv_sequences(o->plan, IG_TIER_HOST) + n_kv_disk > 0 && !(pol && pol->name)) {
        ig_error_set(&err, IG_ERR_UNSUPPORTED,
                     "--percent %s homes KV in host memory or on disk, which needs a KV policy "
                     "(--policy full for FlexGen's dense attention); without one the KV cache is "
                     "the engine's plain cache on the device (C_GPU 100)",
                     o->percent);
        goto fail;
    }
    if (n_kv_disk > 0 && pol && pol->kv_access == IG_KV_ACCESS_INPLACE) {
        ig_error_set(&err, IG_ERR_INVALID_ARG,
                     "--percent %s puts KV on disk, which is read through a working set: "
                     "--kv-access inplace is not possible",
                     o->percent);
        goto fail;
    }
    ig_wstream_opts wo = {
        m,      ig_plan_weights(o->plan), o->disk, &o->link, !o->no_overlap, mach.device_bytes, 0,
        o->topo};
    if (ig_wstream_create(&wo, &o->ws, &err) != IG_OK) goto fail;
    eo->weights = o->ws;
    eo->kv_device_slots = kv_dev;
    eo->kv_disk = o->disk;
    eo->kv_disk_slots = n_kv_disk;
    eo->act_host_seqs = n_act_host;
    eo->act_disk = o->disk;
    eo->act_disk_seqs = n_act_disk;
    eo->act_link = &o->link;
    eo->kv_link = &o->link;
    eo->kv_topo = o->topo; /* the KV home: on the node the plan chose for host KV */
    eo->kv_numa = o->kv_numa = -1;
    for (int i = 0; i < n_seqs; i++)
        if (ig_plan_kv_sequence(o->plan, i).kind == IG_TIER_HOST) {
            eo->kv_numa = o->kv_numa = ig_plan_kv_sequence(o->plan, i).numa;
            break;
        }
    o->active = 1;
    return IG_OK;
fail:
    if (errp) *errp = err;
    ig_cli_offload_free(o);
    return err.code ? err.code : IG_ERR_INTERNAL;
}

void ig_cli_offload_free(ig_cli_offload *o) {
    ig_wstream_free(o->ws);
    ig_plan_free(o->plan);
    ig_disk_free(o->disk);
    ig_topo_free(o->topo);
    o->ws = NULL;
    o->plan = NULL;
    o->disk = NULL;
    o->topo = NULL;
    o->active = 0;
}

void ig_cli_offload_json(const ig_cli_offload *o, json_object *j) {
    json_object_object_add(j, "offload", json_object_new_boolean(o->active));
    if (!o->active) return;
    char buf[160];
    json_object_object_add(j, "placement_percent", json_object_new_string(o->percent));
    json_object_object_add(j, "numa", json_object_new_string(o->numa ? o->numa : "local"));
    json_object_object_add(j, "link_model",
                           json_object_new_string(ig_link_describe(&o->link, buf, sizeof buf)));
    json_object_object_add(j, "link_model_on", json_object_new_boolean(o->link.on));
    json_object_object_add(j, "overlap", json_object_new_boolean(!o->no_overlap));
    json_object_object_add(j, "disk_dir",
                           o->disk ? json_object_new_string(ig_disk_dir(o->disk)) : NULL);
    json_object_object_add(j, "disk_direct_io",
                           json_object_new_boolean(o->disk && ig_disk_is_direct(o->disk)));
    json_object_object_add(j, "weight_device_bytes",
                           json_object_new_int64((int64_t)ig_wstream_device_bytes(o->ws)));
    json_object_object_add(j, "weight_host_bytes",
                           json_object_new_int64((int64_t)ig_wstream_host_bytes(o->ws)));
    json_object_object_add(j, "weight_disk_bytes",
                           json_object_new_int64((int64_t)ig_wstream_disk_bytes(o->ws)));
    json_object_object_add(j, "weight_bytes_per_pass",
                           json_object_new_int64((int64_t)ig_wstream_bytes_per_pass(o->ws)));
    ig_wstream_stats st = ig_wstream_get_stats(o->ws);
    json_object_object_add(j, "weight_h2d_bytes", json_object_new_double(st.h2d_bytes));
    json_object_object_add(j, "weight_disk_read_bytes", json_object_new_double(st.disk_read_bytes));
    json_object_object_add(j, "weight_layer_loads", json_object_new_int64(st.layer_loads));
    json_object_object_add(j, "time_weight_transfer_s", json_object_new_double(st.transfer_s));
    json_object_object_add(j, "time_weight_wait_s", json_object_new_double(st.wait_s));
    json_object_object_add(j, "kv_device_sequences",
                           json_object_new_int(ig_plan_kv_sequences(o->plan, IG_TIER_DEVICE)));
    json_object_object_add(j, "kv_host_numa", json_object_new_int(o->kv_numa));
    json_object_object_add(j, "kv_host_sequences",
                           json_object_new_int(ig_plan_kv_sequences(o->plan, IG_TIER_HOST)));
}

void ig_cli_offload_print(const ig_cli_offload *o, FILE *f) {
    if (!o->active) return;
    char buf[160];
    ig_wstream_stats st = ig_wstream_get_stats(o->ws);
    fprintf(f,
            "offload: --percent %s, link %s, overlap %s; weights %.1f MiB device / %.1f MiB host / "
            "%.1f MiB disk; %.1f MiB streamed per pass; transfer %.2f s, compute waited %.2f s\n",
            o->percent, ig_link_describe(&o->link, buf, sizeof buf), o->no_overlap ? "off" : "on",
            (double)ig_wstream_device_bytes(o->ws) / 1048576.0,
            (double)ig_wstream_host_bytes(o->ws) / 1048576.0,
            (double)ig_wstream_disk_bytes(o->ws) / 1048576.0,
            (double)ig_wstream_bytes_per_pass(o->ws) / 1048576.0, st.transfer_s, st.wait_s);
}
