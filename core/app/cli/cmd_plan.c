/* igen plan: where every weight, KV sequence and activation of a workload lives on a machine (from
 * a hardware profile), the peak bytes per tier and NUMA node, and the cost model's predicted time;
 * with --search, the fastest placement that fits. Plans only: nothing is allocated or run. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/app/cli/cli.h"
#include "offload/cost.h"
#include "offload/hwprof.h"
#include "offload/topo.h"
#include "offload/modelshape.h"
#include "offload/plan.h"

static void help(void) {
    printf(
        "usage: igen plan (--shape NAME|FILE | --model PATH) --hardware NAME|FILE [options]\n\n"
        "Places a workload's weights, KV cache and activations on the tiers of a machine\n"
        "described by a hardware profile (configs/hardware/), checks that every tier fits, and\n"
        "predicts the time per token with the cost model (docs/planner.md).\n\n"
        "  --shape NAME      model shape from configs/models/ (opt-6.7b, opt-13b, opt-30b,\n"
        "                    llama-2-7b, smollm2-135m) or a shape YAML file\n"
        "  --model PATH      take the shape from a model file (GGUF or Hugging Face directory)\n"
        "  --hardware NAME   hardware profile name (configs/hardware/NAME.yaml) or file\n"
        "  --prompt-len L    prompt tokens per sequence (default 512)\n"
        "  --gen-len G       generated tokens per sequence (default 32)\n"
        "  --gpu-batch B     sequences per GPU batch (default 4)\n"
        "  --num-gpu-batches N  GPU batches per block (default 1); block = B x N sequences\n"
        "  --percent W_GPU,W_CPU,C_GPU,C_CPU,A_GPU,A_CPU\n"
        "                    percent of weights, KV cache, activations on the device and on the\n"
        "                    host; the rest of each on disk (default 100,0,100,0,100,0)\n"
        "  --weight-dtype T  f32, f16, bf16, int4 (FlexGen's compressed weights: q4g64), int8\n"
        "                    (q8g64), q4_0, q4_1 or q8_0 (default: the shape's, or the model's)\n"
        "  --kv T            KV cache format: f16 (default), f32 or int4 (group 64)\n"
        "  --policy NAME     a KV policy's cost terms from its parameters (defaults, or --set):\n"
        "                    int4 (KV int4), h2o (keep and fetch heavy + recent ratio = 0.2),\n"
        "                    streaming (window_ratio), quest (fetch budget_ratio), infinigen\n"
        "                    (fetch max_fetch 0.2, partial_ratio 0.2); full changes nothing\n"
        "  --set KEY=VALUE   a policy parameter (repeatable)\n"
        "  --fetch-fraction F  fraction of the KV cache a decode step fetches (default 1)\n"
        "  --kv-keep F       fraction of each sequence's KV rows kept at all (default 1)\n"
        "  --partial-ratio R partial key cache columns per head on the device (InfiniGen)\n"
        "  --cpu-cache-compute  decode attention over host KV runs on the CPU\n"
        "  --no-overlap      the cost model sums activities instead of overlapping them\n"
        "  --numa MODE       host memory: local (default: the device's node), interleave, or an\n"
        "                    explicit node list N,M,... filled in order\n"
        "  --this-machine    host NUMA nodes (memory per node) and the GPU's node from this\n"
        "                    machine's hwloc topology instead of the profile's host section\n"
        "  --xml FILE        the same from an hwloc XML topology (plan for another machine)\n"
        "  --synthetic DESC  the same from an hwloc synthetic description\n"
        "  --gpu N           which GPU of the topology is the device (default 0)\n"
        "  --search          search gpu batch sizes and placements for the fastest plan that fits\n"
        "                    (--gpu-batch / --num-gpu-batches, if given, are kept fixed)\n"
        "  --grid-step S     search grid step in percent (default 10; must divide 100)\n"
        "  --max-gpu-batch B, --max-num-gpu-batches N  search limits (default 64, 16)\n"
        "  --top K           candidates shown by --search (default 5)\n"
        "  --json            one JSON object\n"
        "  -h, --help        this help\n");
}

static double gib(size_t b) {
    return (double)b / 1073741824.0;
}

static json_object *bytes_json(const ig_plan_bytes *b, size_t cap, int with_cap) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "bytes", json_object_new_int64((int64_t)ig_plan_bytes_total(b)));
    if (with_cap) json_object_object_add(o, "capacity", json_object_new_int64((int64_t)cap));
    json_object_object_add(o, "weights", json_object_new_int64((int64_t)b->weights));
    json_object_object_add(o, "kv", json_object_new_int64((int64_t)b->kv));
    json_object_object_add(o, "activations", json_object_new_int64((int64_t)b->act));
    json_object_object_add(o, "buffers", json_object_new_int64((int64_t)b->buffers));
    json_object_object_add(o, "policy", json_object_new_int64((int64_t)b->policy));
    return o;
}

static json_object *times_json(const ig_cost_times *t) {
    json_object *o = json_object_new_object();
    for (int i = 0; i < IG_COST_ACTIVITY_COUNT; i++)
        json_object_object_add(o, ig_cost_activity_name((ig_cost_activity)i),
                               json_object_new_double(t->t[i]));
    json_object_object_add(o, "step", json_object_new_double(t->step));
    return o;
}

static json_object *cost_json(const ig_cost_result *c) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "prefill_s", json_object_new_double(c->prefill_s));
    json_object_object_add(o, "decode_s", json_object_new_double(c->decode_s));
    json_object_object_add(o, "total_s", json_object_new_double(c->total_s));
    json_object_object_add(o, "decode_step_s", json_object_new_double(c->decode_step_s));
    json_object_object_add(o, "throughput_tok_s", json_object_new_double(c->throughput));
    json_object_object_add(o, "decode_throughput_tok_s",
                           json_object_new_double(c->decode_throughput));
    json_object_object_add(o, "prefill_layer", times_json(&c->prefill_layer));
    json_object_object_add(o, "decode_layer_last", times_json(&c->decode_layer));
    /* bytes a decode step moves, summed over the layers (the middle step's context) */
    json_object_object_add(o, "decode_step_h2d_bytes",
                           json_object_new_double(c->decode_step_h2d_bytes));
    json_object_object_add(o, "decode_step_d2h_bytes",
                           json_object_new_double(c->decode_step_d2h_bytes));
    json_object_object_add(o, "decode_step_disk_read_bytes",
                           json_object_new_double(c->decode_step_disk_read_bytes));
    return o;
}

static json_object *config_json(const ig_workload *w, const ig_plan_percent *p) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "prompt_len", json_object_new_int(w->prompt_len));
    json_object_object_add(o, "gen_len", json_object_new_int(w->gen_len));
    json_object_object_add(o, "gpu_batch_size", json_object_new_int(w->gpu_batch_size));
    json_object_object_add(o, "num_gpu_batches", json_object_new_int(w->num_gpu_batches));
    json_object *a = json_object_new_array();
    double v[6] = {p->w_gpu, p->w_cpu, p->cache_gpu, p->cache_cpu, p->act_gpu, p->act_cpu};
    for (int i = 0; i < 6; i++) json_object_array_add(a, json_object_new_double(v[i]));
    json_object_object_add(o, "percent", a);
    return o;
}

static const char *tier_where(ig_tier_ref r, char *buf, size_t n) {
    if (r.kind == IG_TIER_HOST && r.numa >= 0)
        snprintf(buf, n, "host:%d", r.numa);
    else if (r.kind == IG_TIER_HOST)
        snprintf(buf, n, "host:interleaved");
    else
        snprintf(buf, n, "%s", ig_tier_kind_name(r.kind));
    return buf;
}

static void print_bytes_row(const char *name, const ig_plan_bytes *b, double cap) {
    printf("  %-13s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", name, gib(ig_plan_bytes_total(b)),
           cap, gib(b->weights), gib(b->kv), gib(b->act), gib(b->buffers), gib(b->policy));
}

static void print_times(const char *what, const ig_cost_times *t) {
    printf("  %-22s", what);
    for (int i = 0; i < IG_COST_ACTIVITY_COUNT; i++) printf(" %10.3f", t->t[i] * 1e3);
    printf(" %10.3f\n", t->step * 1e3);
}

static void print_plan(const ig_plan *p, const ig_cost_result *c, const char *model,
                       const ig_hwprof *hw) {
    const ig_plan_opts *o = ig_plan_get_opts(p);
    const ig_machine *m = ig_plan_get_machine(p);
    const ig_plan_usage *u = ig_plan_get_usage(p);
    int B = o->wl.gpu_batch_size * o->wl.num_gpu_batches;
    printf("plan       %s (%s weights) on %s\n", model, ig_plan_dtype_name(o->weight_dtype),
           hw->name);
    printf("workload   prompt %d + %d generated, block %d = %d x %d GPU batches\n",
           o->wl.prompt_len, o->wl.gen_len, B, o->wl.gpu_batch_size, o->wl.num_gpu_batches);
    printf("placement  weights %g/%g/%g, KV %g/%g/%g, activations %g/%g/%g (device/host/disk %%)\n",
           o->pct.w_gpu, o->pct.w_cpu, 100 - o->pct.w_gpu - o->pct.w_cpu, o->pct.cache_gpu,
           o->pct.cache_cpu, 100 - o->pct.cache_gpu - o->pct.cache_cpu, o->pct.act_gpu,
           o->pct.act_cpu, 100 - o->pct.act_gpu - o->pct.act_cpu);
    printf("KV         %s, keep %g, fetch %g%s\n",
           o->kv_format[0] ? o->kv_format : ig_plan_dtype_name(o->kv_dtype), o->kv_keep_fraction,
           o->fetch_fraction, o->cpu_cache_compute ? ", attention over host KV on the CPU" : "");
    if (o->partial_ratio > 0) printf("           partial key cache ratio %g\n", o->partial_ratio);
    if (o->fetch_source[0]) printf("           fetch: %s\n", o->fetch_source);
    printf("\n  %-13s %9s %9s %9s %9s %9s %9s %9s   (GiB)\n", "tier", "peak", "capacity", "weights",
           "KV", "activ.", "buffers", "policy");
    print_bytes_row("device", &u->device, gib(m->device_bytes));
    for (int i = 0; i < m->n_numa; i++) {
        char name[32];
        snprintf(name, sizeof name, "host node %d", m->numa_os[i]);
        print_bytes_row(name, &u->host_node[i], gib(m->numa_bytes[i]));
    }
    print_bytes_row("disk", &u->disk, gib(m->disk_bytes));
    printf("\nKV sequences  %d on device, %d on host, %d on disk (%.3f GiB each)\n",
           ig_plan_kv_sequences(p, IG_TIER_DEVICE), ig_plan_kv_sequences(p, IG_TIER_HOST),
           ig_plan_kv_sequences(p, IG_TIER_DISK), gib(ig_plan_kv_bytes_per_sequence(p)));
    printf("activations   %d on device, %d on host, %d on disk (sequences)\n",
           ig_plan_act_sequences(p, IG_TIER_DEVICE), ig_plan_act_sequences(p, IG_TIER_HOST),
           ig_plan_act_sequences(p, IG_TIER_DISK));
    const ig_weight_placement *wp = ig_plan_weights(p);
    char where[48];
    printf("layer 0       ");
    for (int t = 0; t < IG_WT_COUNT; t++) {
        if (!ig_plan_tensor_bytes(p, 0, (ig_wtensor)t)) continue;
        printf("%s=%s ", ig_wtensor_name((ig_wtensor)t), tier_where(wp->tensor[t], where, 48));
    }
    printf("\nouter         embeddings/lm_head (%.3f GiB) on %s\n", gib(ig_plan_outer_bytes(p)),
           tier_where(wp->outer, where, 48));
    printf("\ncost per layer (ms)       %10s %10s %10s %10s %10s %10s\n", "h2d", "d2h", "disk_read",
           "disk_write", "compute", "step");
    print_times("prefill", &c->prefill_layer);
    print_times("decode (last step)", &c->decode_layer);
    printf("\npredicted  prefill %.3f s, decode %.4f s per token (block of %d), total %.2f s\n",
           c->prefill_s, c->decode_step_s, B, c->total_s);
    printf("throughput %.2f tokens/s (decode only: %.2f tokens/s)%s\n", c->throughput,
           c->decode_throughput, o->overlap ? "" : " without overlap");
}

int ig_cmd_plan(int argc, char **argv) {
    enum {
        O_SHAPE = IG_OPT_FIRST_FREE,
        O_MODEL,
        O_HW,
        O_PROMPT,
        O_GEN,
        O_GB,
        O_NGB,
        O_PCT,
        O_WDT,
        O_KV,
        O_POLICY,
        O_FETCH,
        O_KEEP,
        O_PARTIAL,
        O_CPU_CC,
        O_NO_OVERLAP,
        O_NUMA,
        O_SEARCH,
        O_STEP,
        O_MAX_GB,
        O_MAX_NGB,
        O_TOP,
        O_JSON,
        O_TOPO_THIS,
        O_TOPO_XML,
        O_TOPO_SYN,
        O_GPU,
        O_SET,
    };
    static const struct option longopts[] = {
        {"shape", required_argument, NULL, O_SHAPE},
        {"model", required_argument, NULL, O_MODEL},
        {"hardware", required_argument, NULL, O_HW},
        {"prompt-len", required_argument, NULL, O_PROMPT},
        {"gen-len", required_argument, NULL, O_GEN},
        {"gpu-batch", required_argument, NULL, O_GB},
        {"num-gpu-batches", required_argument, NULL, O_NGB},
        {"percent", required_argument, NULL, O_PCT},
        {"weight-dtype", required_argument, NULL, O_WDT},
        {"kv", required_argument, NULL, O_KV},
        {"policy", required_argument, NULL, O_POLICY},
        {"set", required_argument, NULL, O_SET},
        {"fetch-fraction", required_argument, NULL, O_FETCH},
        {"kv-keep", required_argument, NULL, O_KEEP},
        {"partial-ratio", required_argument, NULL, O_PARTIAL},
        {"cpu-cache-compute", no_argument, NULL, O_CPU_CC},
        {"no-overlap", no_argument, NULL, O_NO_OVERLAP},
        {"numa", required_argument, NULL, O_NUMA},
        {"search", no_argument, NULL, O_SEARCH},
        {"grid-step", required_argument, NULL, O_STEP},
        {"max-gpu-batch", required_argument, NULL, O_MAX_GB},
        {"max-num-gpu-batches", required_argument, NULL, O_MAX_NGB},
        {"top", required_argument, NULL, O_TOP},
        {"json", no_argument, NULL, O_JSON},
        {"this-machine", no_argument, NULL, O_TOPO_THIS},
        {"xml", required_argument, NULL, O_TOPO_XML},
        {"synthetic", required_argument, NULL, O_TOPO_SYN},
        {"gpu", required_argument, NULL, O_GPU},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *shape_name = NULL, *model_path = NULL, *hw_name = NULL, *policy = NULL;
    const char *topo_xml = NULL, *topo_syn = NULL;
    int topo_this = 0, gpu = 0;
    ig_plan_opts o;
    ig_plan_opts_init(&o);
    o.wl = (ig_workload){512, 32, 4, 1};
    ig_plan_search_opts so;
    ig_plan_search_opts_init(&so);
    int wdt = -1, json = 0, search = 0, pct_given = 0, gb_given = 0, ngb_given = 0;
    double fetch = -1, keep = -1, partial = -1;
    const char *sets[IG_CLI_POLICY_MAX_SETS];
    int n_sets = 0;
    int kv = -1;
    long v;
    double d;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h':
            help();
            return 0;
        case O_TOPO_THIS:
            topo_this = 1;
            break;
        case O_TOPO_XML:
            topo_xml = optarg;
            break;
        case O_TOPO_SYN:
            topo_syn = optarg;
            break;
        case O_GPU:
            if (ig_cli_parse_int("plan", "--gpu", optarg, 0, 1024, &v) != 0) return IG_EXIT_ERROR;
            gpu = (int)v;
            break;
        case O_SHAPE:
            shape_name = optarg;
            break;
        case O_MODEL:
            model_path = optarg;
            break;
        case O_HW:
            hw_name = optarg;
            break;
        case O_PROMPT:
            if (ig_cli_parse_int("plan", "--prompt-len", optarg, 1, 10000000, &v))
                return IG_EXIT_ERROR;
            o.wl.prompt_len = (int)v;
            break;
        case O_GEN:
            if (ig_cli_parse_int("plan", "--gen-len", optarg, 1, 10000000, &v))
                return IG_EXIT_ERROR;
            o.wl.gen_len = (int)v;
            break;
        case O_GB:
            if (ig_cli_parse_int("plan", "--gpu-batch", optarg, 1, 65536, &v)) return IG_EXIT_ERROR;
            o.wl.gpu_batch_size = (int)v;
            gb_given = 1;
            break;
        case O_NGB:
            if (ig_cli_parse_int("plan", "--num-gpu-batches", optarg, 1, 65536, &v))
                return IG_EXIT_ERROR;
            o.wl.num_gpu_batches = (int)v;
            ngb_given = 1;
            break;
        case O_PCT:
            if (ig_cli_parse_percent("plan", optarg, &o.pct)) return IG_EXIT_ERROR;
            pct_given = 1;
            break;
        case O_WDT:
            wdt = ig_plan_dtype_from_name(optarg);
            if (wdt < 0) {
                fprintf(stderr,
                        "igen plan: --weight-dtype: '%s' is not f32, f16, bf16, int4, int8, q4_0, "
                        "q4_1 or q8_0\n",
                        optarg);
                return IG_EXIT_ERROR;
            }
            break;
        case O_KV:
            kv = ig_plan_dtype_from_name(optarg);
            if (kv < 0 || kv == IG_PLAN_BF16 || kv > IG_PLAN_INT4) {
                fprintf(stderr, "igen plan: --kv: '%s' is not f16, f32 or int4\n", optarg);
                return IG_EXIT_ERROR;
            }
            break;
        case O_POLICY:
            policy = optarg;
            break;
        case O_SET:
            if (n_sets == IG_CLI_POLICY_MAX_SETS) {
                fprintf(stderr, "igen plan: more than %d --set options\n", IG_CLI_POLICY_MAX_SETS);
                return IG_EXIT_ERROR;
            }
            sets[n_sets++] = optarg;
            break;
        case O_FETCH:
            if (ig_cli_parse_float("plan", "--fetch-fraction", optarg, 0, 1, &fetch))
                return IG_EXIT_ERROR;
            break;
        case O_KEEP:
            if (ig_cli_parse_float("plan", "--kv-keep", optarg, 1e-9, 1, &keep))
                return IG_EXIT_ERROR;
            break;
        case O_PARTIAL:
            if (ig_cli_parse_float("plan", "--partial-ratio", optarg, 0, 1, &partial))
                return IG_EXIT_ERROR;
            break;
        case O_CPU_CC:
            o.cpu_cache_compute = 1;
            break;
        case O_NO_OVERLAP:
            o.overlap = 0;
            break;
        case O_NUMA:
            if (ig_cli_parse_numa("plan", optarg, &o)) return IG_EXIT_ERROR;
            break;
        case O_SEARCH:
            search = 1;
            break;
        case O_STEP:
            if (ig_cli_parse_float("plan", "--grid-step", optarg, 1, 100, &d)) return IG_EXIT_ERROR;
            so.step_percent = d;
            break;
        case O_MAX_GB:
            if (ig_cli_parse_int("plan", "--max-gpu-batch", optarg, 1, 4096, &v))
                return IG_EXIT_ERROR;
            so.max_gpu_batch = (int)v;
            break;
        case O_MAX_NGB:
            if (ig_cli_parse_int("plan", "--max-num-gpu-batches", optarg, 1, 4096, &v))
                return IG_EXIT_ERROR;
            so.max_num_gpu_batches = (int)v;
            break;
        case O_TOP:
            if (ig_cli_parse_int("plan", "--top", optarg, 1, IG_PLAN_SEARCH_TOP_MAX, &v))
                return IG_EXIT_ERROR;
            so.top_k = (int)v;
            break;
        case O_JSON:
            json = 1;
            break;
        default:
            fprintf(stderr, "igen plan: see 'igen plan --help'\n");
            return IG_EXIT_ERROR;
        }
    }
    if (ig_cli_no_operands("plan", argc, argv)) return IG_EXIT_ERROR;
    if (!!shape_name + !!model_path != 1) {
        fprintf(stderr, "igen plan: give exactly one of --shape NAME and --model PATH\n");
        return IG_EXIT_ERROR;
    }
    if (!hw_name) {
        fprintf(stderr, "igen plan: --hardware NAME|FILE is required (see configs/hardware/)\n");
        return IG_EXIT_ERROR;
    }
    if (topo_this + !!topo_xml + !!topo_syn > 1) {
        fprintf(stderr, "igen plan: give at most one of --this-machine, --xml and --synthetic\n");
        return IG_EXIT_ERROR;
    }
    if (search && pct_given) {
        fprintf(stderr, "igen plan: --percent and --search exclude each other (the search "
                        "chooses the placement)\n");
        return IG_EXIT_ERROR;
    }
    if (n_sets > 0 && !policy) {
        fprintf(stderr, "igen plan: --set needs --policy NAME\n");
        return IG_EXIT_ERROR;
    }

    ig_error err;
    ig_error_clear(&err);
    ig_model_shape shape;
    if (shape_name) {
        if (ig_model_shape_open(shape_name, &shape, &err) != IG_OK) {
            ig_cli_error("plan", &err);
            return IG_EXIT_ERROR;
        }
    } else {
        ig_model_load_opts lo = {wdt == IG_PLAN_F32 ? IG_DTYPE_F32 : IG_DTYPE_F16, 1, 0,
                                 IG_WMEM_AUTO};
        ig_model *m = NULL;
        if (ig_model_load(model_path, &lo, &m, &err) != IG_OK) {
            ig_cli_error("plan", &err);
            return IG_EXIT_ERROR;
        }
        ig_model_shape_from_model(m, &shape);
        ig_model_free(m);
    }
    o.model = shape.config;
    o.weight_dtype = wdt >= 0 ? (ig_plan_dtype)wdt : shape.weight_dtype;
    /* the policy's terms for this model from its parameters, then explicit overrides */
    if (policy) {
        ig_error perr;
        if (ig_cli_policy_cost(policy, sets, n_sets, &o, &perr) != IG_OK) {
            fprintf(stderr, "igen plan: --policy: %s\n", perr.msg);
            return IG_EXIT_ERROR;
        }
    }
    if (kv >= 0) { /* --kv replaces the policy's row format */
        o.kv_dtype = (ig_plan_dtype)kv;
        o.kv_head_row_bytes = 0;
        o.kv_format[0] = '\0';
    }
    if (keep >= 0) o.kv_keep_fraction = keep;
    if (fetch >= 0) {
        o.fetch_fraction = fetch;
        o.fetch_profile_n = 0;
        snprintf(o.fetch_source, sizeof o.fetch_source, "--fetch %g at every length", fetch);
    }
    if (partial >= 0) o.partial_ratio = partial;
    ig_hwprof *hw = malloc(sizeof *hw);
    if (!hw) return IG_EXIT_ERROR;
    if (ig_hwprof_open(hw_name, hw, &err) != IG_OK) {
        ig_cli_error("plan", &err);
        free(hw);
        return IG_EXIT_ERROR;
    }
    ig_machine m;
    ig_hwprof_to_machine(hw, &m);
    if (topo_this || topo_xml || topo_syn) { /* host NUMA nodes and the GPU's node from hwloc */
        ig_topo *t = NULL;
        ig_status ts = topo_xml   ? ig_topo_load_xml(topo_xml, &t, &err)
                       : topo_syn ? ig_topo_load_synthetic(topo_syn, &t, &err)
                                  : ig_topo_discover(&t, &err);
        if (ts == IG_OK) {
            ig_machine tm;
            memset(&tm, 0, sizeof tm);
            ts = ig_topo_fill_machine(t, ig_topo_n_gpus(t) ? gpu : -1, &tm);
            if (ts != IG_OK)
                ig_error_set(&err, IG_ERR_INVALID_ARG, "--gpu %d: the topology has %d GPUs (%s)",
                             gpu, ig_topo_n_gpus(t), ig_topo_source_desc(t));
            tm.device_bytes = m.device_bytes;
            tm.disk_bytes = m.disk_bytes;
            m = tm;
        }
        ig_topo_free(t);
        if (ts != IG_OK) {
            ig_cli_error("plan", &err);
            free(hw);
            return IG_EXIT_ERROR;
        }
    }
    ig_cost_hw rates;
    char kernel_rates[512];
    ig_cost_kernel_rates_desc(hw, &o.model, ig_cost_hw_from_profile_for(hw, &o.model, &rates),
                              kernel_rates, sizeof kernel_rates);
    /* the model-shape matmul rates hold at one GPU batch: not for a search that varies it */
    char matmul_rates[512];
    if (search && !gb_given)
        snprintf(matmul_rates, sizeof matmul_rates,
                 "none: the search varies the GPU batch; decode matmuls at gemm_tflops_decode");
    else
        ig_cost_hw_matmul_for(hw, &o.model, o.wl.gpu_batch_size, o.weight_dtype == IG_PLAN_F32,
                              &rates, matmul_rates, sizeof matmul_rates);

    int rc = IG_EXIT_ERROR;
    ig_plan *p = NULL;
    ig_plan_candidate *top = NULL;
    json_object *jo = json ? json_object_new_object() : NULL;
    int n_top = 0;
    long n_feasible = 0, n_tried = 0;
    if (search) {
        if (gb_given) so.fixed_gpu_batch = o.wl.gpu_batch_size;
        if (ngb_given) so.fixed_num_gpu_batches = o.wl.num_gpu_batches;
        top = calloc(IG_PLAN_SEARCH_TOP_MAX, sizeof *top);
        if (!top) goto done;
        if (ig_plan_search(&o, &m, &rates, &so, top, &n_top, &n_feasible, &n_tried, &err) !=
            IG_OK) {
            ig_cli_error("plan", &err);
            goto done;
        }
        o.wl = top[0].wl;
        o.pct = top[0].pct;
    }
    if (ig_plan_create(&o, &m, &p, &err) != IG_OK) {
        ig_cli_error("plan", &err);
        goto done;
    }
    ig_cost_result cost;
    if (ig_cost_estimate(p, &rates, &cost, &err) != IG_OK) {
        ig_cli_error("plan", &err);
        goto done;
    }
    if (json) {
        const ig_plan_usage *u = ig_plan_get_usage(p);
        json_object_object_add(jo, "model", json_object_new_string(shape.name));
        json_object_object_add(jo, "hardware", json_object_new_string(hw->name));
        json_object_object_add(jo, "weight_dtype",
                               json_object_new_string(ig_plan_dtype_name(o.weight_dtype)));
        json_object_object_add(
            jo, "kv_dtype",
            json_object_new_string(o.kv_format[0] ? o.kv_format : ig_plan_dtype_name(o.kv_dtype)));
        json_object_object_add(jo, "kv_keep_fraction", json_object_new_double(o.kv_keep_fraction));
        json_object_object_add(jo, "fetch_fraction", json_object_new_double(o.fetch_fraction));
        json_object_object_add(jo, "fetch_source", json_object_new_string(o.fetch_source));
        json_object_object_add(jo, "kernel_rates", json_object_new_string(kernel_rates));
        json_object_object_add(jo, "matmul_rates", json_object_new_string(matmul_rates));
        json_object_object_add(jo, "partial_ratio", json_object_new_double(o.partial_ratio));
        json_object_object_add(jo, "cpu_cache_compute",
                               json_object_new_boolean(o.cpu_cache_compute));
        json_object_object_add(jo, "overlap", json_object_new_boolean(o.overlap));
        json_object_object_add(jo, "config", config_json(&o.wl, &o.pct));
        json_object *tiers = json_object_new_object();
        json_object_object_add(tiers, "device", bytes_json(&u->device, m.device_bytes, 1));
        json_object *hosts = json_object_new_array();
        for (int i = 0; i < m.n_numa; i++) {
            json_object *h = bytes_json(&u->host_node[i], m.numa_bytes[i], 1);
            json_object_object_add(h, "numa", json_object_new_int(m.numa_os[i]));
            json_object_array_add(hosts, h);
        }
        json_object_object_add(tiers, "host", bytes_json(&u->host, 0, 0));
        json_object_object_add(tiers, "host_nodes", hosts);
        json_object_object_add(tiers, "disk", bytes_json(&u->disk, m.disk_bytes, 1));
        json_object_object_add(jo, "tiers", tiers);
        json_object *kvj = json_object_new_object();
        for (int k = 0; k < IG_TIER_COUNT; k++)
            json_object_object_add(kvj, ig_tier_kind_name((ig_tier_kind)k),
                                   json_object_new_int(ig_plan_kv_sequences(p, (ig_tier_kind)k)));
        json_object_object_add(kvj, "bytes_per_sequence",
                               json_object_new_int64((int64_t)ig_plan_kv_bytes_per_sequence(p)));
        json_object_object_add(jo, "kv_sequences", kvj);
        json_object *w = json_object_new_object();
        const ig_weight_placement *wp = ig_plan_weights(p);
        char where[48];
        for (int t = 0; t < IG_WT_COUNT; t++)
            json_object_object_add(w, ig_wtensor_name((ig_wtensor)t),
                                   json_object_new_string(tier_where(wp->tensor[t], where, 48)));
        json_object_object_add(w, "outer",
                               json_object_new_string(tier_where(wp->outer, where, 48)));
        json_object_object_add(jo, "layer0_weights", w);
        json_object_object_add(jo, "cost", cost_json(&cost));
        if (search) {
            json_object *s = json_object_new_object();
            json_object_object_add(s, "tried", json_object_new_int64(n_tried));
            json_object_object_add(s, "feasible", json_object_new_int64(n_feasible));
            json_object_object_add(s, "grid_step", json_object_new_double(so.step_percent));
            json_object *arr = json_object_new_array();
            for (int i = 0; i < n_top; i++) {
                json_object *c = config_json(&top[i].wl, &top[i].pct);
                json_object_object_add(c, "throughput_tok_s",
                                       json_object_new_double(top[i].cost.throughput));
                json_object_object_add(c, "decode_step_s",
                                       json_object_new_double(top[i].cost.decode_step_s));
                json_object_array_add(arr, c);
            }
            json_object_object_add(s, "top", arr);
            json_object_object_add(jo, "search", s);
        }
        printf("%s\n", json_object_to_json_string_ext(jo, JSON_C_TO_STRING_PLAIN));
    } else {
        if (search) {
            printf("search     %ld placements tried on a %g%% grid, %ld fit; the fastest:\n\n",
                   n_tried, so.step_percent, n_feasible);
        }
        print_plan(p, &cost, shape.name, hw);
        if (search) {
            printf("\ntop %d  %-14s %-12s %-12s %-8s %10s\n", n_top, "gpu batch x n", "weights",
                   "KV", "act", "tok/s");
            for (int i = 0; i < n_top; i++) {
                const ig_plan_percent *q = &top[i].pct;
                char bx[32], w[48], k[48], a[48];
                snprintf(bx, sizeof bx, "%d x %d", top[i].wl.gpu_batch_size,
                         top[i].wl.num_gpu_batches);
                snprintf(w, sizeof w, "%g/%g/%g", q->w_gpu, q->w_cpu, 100 - q->w_gpu - q->w_cpu);
                snprintf(k, sizeof k, "%g/%g/%g", q->cache_gpu, q->cache_cpu,
                         100 - q->cache_gpu - q->cache_cpu);
                snprintf(a, sizeof a, "%g/%g", q->act_gpu, q->act_cpu);
                printf("  %3d   %-14s %-12s %-12s %-8s %10.2f\n", i + 1, bx, w, k, a,
                       top[i].cost.throughput);
            }
        }
    }
    rc = 0;
done:
    if (jo) json_object_put(jo);
    ig_plan_free(p);
    free(top);
    free(hw);
    return rc;
}
