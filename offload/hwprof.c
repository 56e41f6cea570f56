/* Hardware profiles (hwprof.h): the YAML schema as a field table, cross-field checks, saving in the
 * same schema, and lookup by name. Describes a machine; never measures or touches it (that is
 * `igen profile-hw`). */
#include "offload/hwprof.h"

#include <errno.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "offload/yamlcfg.h"

#ifndef IG_SOURCE_DIR
#define IG_SOURCE_DIR "."
#endif

#define F_NUM(k, st, m, req, ...) F_NUM_(k, st, m, req, __VA_ARGS__)
#define F_NUM_(k, st, m, req, lo, hi, excl)                                                        \
    {                                                                                              \
        .key = k, .kind = IG_YK_NUM, .off = offsetof(st, m), .required = req, .min = lo,           \
        .max = hi, .min_exclusive = excl, .present_off = -1                                        \
    }
#define F_INT(k, st, m, req, lo, hi)                                                               \
    {                                                                                              \
        .key = k, .kind = IG_YK_INT, .off = offsetof(st, m), .required = req, .min = lo,           \
        .max = hi, .present_off = -1                                                               \
    }
#define F_STR(k, st, m, req)                                                                       \
    {                                                                                              \
        .key = k, .kind = IG_YK_STR, .off = offsetof(st, m), .size = sizeof(((st *)0)->m),         \
        .required = req, .present_off = -1                                                         \
    }
#define F_END                                                                                      \
    { .key = NULL }

/* Bandwidths and FLOPS must be positive; a petabyte per second or an exaflop is a typo. */
#define POS 0.0, 1e6, 1
#define CAP 0.0, 1e7, 1

static const ig_yfield numa_fields[] = {
    F_INT("os_index", ig_hwprof_numa, os_index, 1, 0, 4095),
    F_NUM("memory_gib", ig_hwprof_numa, memory_gib, 1, CAP),
    F_END,
};

static const ig_yfield device_fields[] = {
    F_STR("name", ig_hwprof, device.name, 0),
    F_NUM("memory_gib", ig_hwprof, device.memory_gib, 1, CAP),
    F_NUM("gemm_tflops", ig_hwprof, device.gemm_tflops, 1, POS),
    F_NUM("gemm_tflops_decode", ig_hwprof, device.gemm_tflops_decode, 0, POS),
    F_NUM("mem_bandwidth_gbps", ig_hwprof, device.mem_bandwidth_gbps, 1, POS),
    F_INT("numa_node", ig_hwprof, device.numa_node, 0, 0, 4095),
    F_NUM("attn_gbps", ig_hwprof, device.attn_gbps, 0, POS),
    F_NUM("attn_int4_gbps", ig_hwprof, device.attn_int4_gbps, 0, POS),
    F_NUM("attn_sparse_gbps", ig_hwprof, device.attn_sparse_gbps, 0, POS),
    F_NUM("attn_dense_gbps", ig_hwprof, device.attn_dense_gbps, 0, POS),
    F_NUM("attn_probs_gbps", ig_hwprof, device.attn_probs_gbps, 0, POS),
    F_NUM("select_gbps", ig_hwprof, device.select_gbps, 0, POS),
    F_STR("kernel_shape", ig_hwprof, device.kernel_shape, 0),
    F_NUM("gemm_tflops_layer", ig_hwprof, device.gemm_tflops_layer, 0, POS),
    F_NUM("gemm_tflops_logits", ig_hwprof, device.gemm_tflops_logits, 0, POS),
    F_STR("matmul_shape", ig_hwprof, device.matmul_shape, 0),
    F_END,
};

static int host_check(const void *obj, const char **key, char *why, size_t n) {
    const ig_hwprof *p = obj;
    double sum = 0;
    for (int i = 0; i < p->host.n_numa; i++) {
        sum += p->host.numa[i].memory_gib;
        for (int j = 0; j < i; j++)
            if (p->host.numa[j].os_index == p->host.numa[i].os_index) {
                *key = "numa_nodes";
                snprintf(why, n, "os_index %d is listed twice", p->host.numa[i].os_index);
                return 1;
            }
    }
    if (p->host.n_numa && sum > p->host.memory_gib * (1 + 1e-9) + 1e-9) {
        *key = "numa_nodes";
        snprintf(why, n, "the nodes hold %.6g GiB in all, more than host.memory_gib (%.6g)", sum,
                 p->host.memory_gib);
        return 1;
    }
    return 0;
}

static const ig_yfield host_fields[] = {
    F_NUM("memory_gib", ig_hwprof, host.memory_gib, 1, CAP),
    {.key = "numa_nodes",
     .kind = IG_YK_LIST,
     .off = offsetof(ig_hwprof, host.numa),
     .size = sizeof(ig_hwprof_numa),
     .sub = numa_fields,
     .count_off = offsetof(ig_hwprof, host.n_numa),
     .max_count = IG_MAX_NUMA,
     .present_off = -1},
    F_NUM("cpu_gflops", ig_hwprof, host.cpu_gflops, 0, POS),
    F_NUM("mem_bandwidth_gbps", ig_hwprof, host.mem_bandwidth_gbps, 1, POS),
    F_END,
};

static const ig_yfield link_fields[] = {
    F_NUM("h2d_gbps", ig_hwprof, link.h2d_gbps, 1, POS),
    F_NUM("d2h_gbps", ig_hwprof, link.d2h_gbps, 1, POS),
    F_NUM("h2d_latency_us", ig_hwprof, link.h2d_latency_us, 0, 0.0, 1e6, 0),
    F_NUM("d2h_latency_us", ig_hwprof, link.d2h_latency_us, 0, 0.0, 1e6, 0),
    F_END,
};

static const ig_yfield disk_fields[] = {
    F_NUM("read_gbps", ig_hwprof, disk.read_gbps, 1, POS),
    F_NUM("write_gbps", ig_hwprof, disk.write_gbps, 1, POS),
    F_NUM("capacity_gib", ig_hwprof, disk.capacity_gib, 1, 0.0, 1e9, 0),
    F_END,
};

/* Sections point at the whole profile (offset 0) so their fields can use full offsets. */
#define F_SEC(k, fields, req, chk)                                                                 \
    {                                                                                              \
        .key = k, .kind = IG_YK_MAP, .off = 0, .required = req, .sub = fields, .present_off = -1,  \
        .check = chk                                                                               \
    }

static int top_check(const void *obj, const char **key, char *why, size_t n) {
    const ig_hwprof *p = obj;
    if (p->device.numa_node >= 0 && p->host.n_numa > 0) {
        for (int i = 0; i < p->host.n_numa; i++)
            if (p->host.numa[i].os_index == p->device.numa_node) return 0;
        *key = "device.numa_node";
        snprintf(why, n, "node %d is not among host.numa_nodes", p->device.numa_node);
        return 1;
    }
    if (p->device.numa_node > 0 && p->host.n_numa == 0) {
        *key = "device.numa_node";
        snprintf(why, n, "node %d given but host.numa_nodes is absent (one node, 0)",
                 p->device.numa_node);
        return 1;
    }
    return 0;
}

static const ig_yfield top_fields[] = {
    F_STR("name", ig_hwprof, name, 1),
    F_STR("description", ig_hwprof, description, 0),
    F_SEC("device", device_fields, 1, NULL),
    F_SEC("host", host_fields, 1, host_check),
    F_SEC("link", link_fields, 1, NULL),
    {.key = "disk",
     .kind = IG_YK_MAP,
     .off = 0,
     .sub = disk_fields,
     .present_off = offsetof(ig_hwprof, has_disk)},
    F_END,
};
static const ig_yfield root_field = {
    .key = "", .kind = IG_YK_MAP, .sub = top_fields, .present_off = -1, .check = top_check};

static void defaults(ig_hwprof *p) {
    memset(p, 0, sizeof *p);
    p->device.numa_node = -1;
}

static void finish(ig_hwprof *p) {
    if (p->device.gemm_tflops_decode <= 0) p->device.gemm_tflops_decode = p->device.gemm_tflops;
    if (p->host.n_numa == 0) {
        p->host.n_numa = 1;
        p->host.numa[0].os_index = 0;
        p->host.numa[0].memory_gib = p->host.memory_gib;
    }
}

ig_status ig_hwprof_load_string(const char *text, size_t len, const char *name, ig_hwprof *out,
                                ig_error *err) {
    ig_hwprof p;
    defaults(&p);
    IG_TRY(ig_yamlcfg_load_string(text, len, name, &root_field, &p, err));
    finish(&p);
    *out = p;
    return IG_OK;
}

ig_status ig_hwprof_load(const char *path, ig_hwprof *out, ig_error *err) {
    ig_hwprof *p = ig_malloc(sizeof *p, err);
    if (!p) return IG_ERR_NOMEM;
    defaults(p);
    ig_status st = ig_yamlcfg_load_file(path, &root_field, p, err);
    if (st == IG_OK) {
        finish(p);
        *out = *p;
    }
    free(p);
    return st;
}

static void put_num(FILE *f, const char *indent, const char *key, double v) {
    char b[64];
    ig_yamlcfg_fmt_double(b, sizeof b, v);
    fprintf(f, "%s%s: %s\n", indent, key, b);
}

static void put_str(FILE *f, const char *indent, const char *key, const char *s) {
    char b[4 * IG_HWPROF_TEXT_MAX + 8];
    ig_yamlcfg_fmt_string(b, sizeof b, s);
    fprintf(f, "%s%s: %s\n", indent, key, b);
}

ig_status ig_hwprof_save(const ig_hwprof *p, const char *path, const char *comment, ig_error *err) {
    FILE *f = fopen(path, "wb");
    if (!f) return ig_error_set(err, IG_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    if (comment) {
        const char *s = comment;
        while (*s) {
            size_t l = strcspn(s, "\n");
            fprintf(f, "# %.*s\n", (int)l, s);
            s += l;
            if (*s) s++;
        }
    }
    put_str(f, "", "name", p->name);
    if (p->description[0]) put_str(f, "", "description", p->description);
    fprintf(f, "device:\n");
    if (p->device.name[0]) put_str(f, "  ", "name", p->device.name);
    put_num(f, "  ", "memory_gib", p->device.memory_gib);
    put_num(f, "  ", "gemm_tflops", p->device.gemm_tflops);
    put_num(f, "  ", "gemm_tflops_decode", p->device.gemm_tflops_decode);
    put_num(f, "  ", "mem_bandwidth_gbps", p->device.mem_bandwidth_gbps);
    if (p->device.numa_node >= 0) fprintf(f, "  numa_node: %d\n", p->device.numa_node);
    if (p->device.attn_gbps > 0) put_num(f, "  ", "attn_gbps", p->device.attn_gbps);
    if (p->device.attn_int4_gbps > 0) put_num(f, "  ", "attn_int4_gbps", p->device.attn_int4_gbps);
    if (p->device.attn_sparse_gbps > 0)
        put_num(f, "  ", "attn_sparse_gbps", p->device.attn_sparse_gbps);
    if (p->device.select_gbps > 0) put_num(f, "  ", "select_gbps", p->device.select_gbps);
    if (p->device.attn_dense_gbps > 0)
        put_num(f, "  ", "attn_dense_gbps", p->device.attn_dense_gbps);
    if (p->device.attn_probs_gbps > 0)
        put_num(f, "  ", "attn_probs_gbps", p->device.attn_probs_gbps);
    if (p->device.kernel_shape[0]) put_str(f, "  ", "kernel_shape", p->device.kernel_shape);
    if (p->device.gemm_tflops_layer > 0)
        put_num(f, "  ", "gemm_tflops_layer", p->device.gemm_tflops_layer);
    if (p->device.gemm_tflops_logits > 0)
        put_num(f, "  ", "gemm_tflops_logits", p->device.gemm_tflops_logits);
    if (p->device.matmul_shape[0]) put_str(f, "  ", "matmul_shape", p->device.matmul_shape);
    fprintf(f, "host:\n");
    put_num(f, "  ", "memory_gib", p->host.memory_gib);
    if (p->host.n_numa > 0) {
        fprintf(f, "  numa_nodes:\n");
        for (int i = 0; i < p->host.n_numa; i++) {
            fprintf(f, "    - os_index: %d\n", p->host.numa[i].os_index);
            put_num(f, "      ", "memory_gib", p->host.numa[i].memory_gib);
        }
    }
    if (p->host.cpu_gflops > 0) put_num(f, "  ", "cpu_gflops", p->host.cpu_gflops);
    put_num(f, "  ", "mem_bandwidth_gbps", p->host.mem_bandwidth_gbps);
    fprintf(f, "link:\n");
    put_num(f, "  ", "h2d_gbps", p->link.h2d_gbps);
    put_num(f, "  ", "d2h_gbps", p->link.d2h_gbps);
    put_num(f, "  ", "h2d_latency_us", p->link.h2d_latency_us);
    put_num(f, "  ", "d2h_latency_us", p->link.d2h_latency_us);
    if (p->has_disk) {
        fprintf(f, "disk:\n");
        put_num(f, "  ", "read_gbps", p->disk.read_gbps);
        put_num(f, "  ", "write_gbps", p->disk.write_gbps);
        put_num(f, "  ", "capacity_gib", p->disk.capacity_gib);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        remove(path);
        return ig_error_set(err, IG_ERR_IO, "%s: write failed", path);
    }
    return IG_OK;
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

ig_status ig_hwprof_find(const char *name, char *path, size_t n, ig_error *err) {
    size_t l = strlen(name);
    if (l == 0) return ig_error_set(err, IG_ERR_INVALID_ARG, "empty hardware profile name");
    int looks_path = strchr(name, '/') || (l > 5 && !strcmp(name + l - 5, ".yaml")) ||
                     (l > 4 && !strcmp(name + l - 4, ".yml"));
    if (looks_path) {
        if (!is_file(name))
            return ig_error_set(err, IG_ERR_NOT_FOUND, "%s: no such hardware profile file", name);
        snprintf(path, n, "%s", name);
        return IG_OK;
    }
    for (size_t i = 0; i < l; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "'%s' is not a profile name (letters, digits, '-', '_', '.') or a "
                                "path",
                                name);
    }
    const char *home = getenv("IGEN_HOME");
    char a[4096] = "", b[4096];
    if (home && *home) {
        snprintf(a, sizeof a, "%s/configs/hardware/%s.yaml", home, name);
        if (is_file(a)) {
            snprintf(path, n, "%s", a);
            return IG_OK;
        }
    }
    snprintf(b, sizeof b, "%s/configs/hardware/%s.yaml", IG_SOURCE_DIR, name);
    if (is_file(b)) {
        snprintf(path, n, "%s", b);
        return IG_OK;
    }
    return ig_error_set(err, IG_ERR_NOT_FOUND,
                        "no hardware profile '%s' (looked for %s%s%s; give a path, or see "
                        "configs/hardware/)",
                        name, a[0] ? a : "", a[0] ? " and " : "", b);
}

ig_status ig_hwprof_open(const char *name_or_path, ig_hwprof *out, ig_error *err) {
    char path[4096];
    IG_TRY(ig_hwprof_find(name_or_path, path, sizeof path, err));
    return ig_hwprof_load(path, out, err);
}

void ig_hwprof_to_machine(const ig_hwprof *p, ig_machine *m) {
    memset(m, 0, sizeof *m);
    const double gib = 1073741824.0;
    m->device_bytes = (size_t)(p->device.memory_gib * gib);
    m->n_numa = p->host.n_numa;
    for (int i = 0; i < p->host.n_numa && i < IG_MAX_NUMA; i++) {
        m->numa_os[i] = p->host.numa[i].os_index;
        m->numa_bytes[i] = (size_t)(p->host.numa[i].memory_gib * gib);
    }
    m->disk_bytes = p->has_disk ? (size_t)(p->disk.capacity_gib * gib) : 0;
    m->device_numa = p->device.numa_node >= 0 ? p->device.numa_node : m->numa_os[0];
}
