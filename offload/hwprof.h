/* Hardware profiles: the capacities, bandwidths and FLOPS of a machine, as YAML files in
 * configs/hardware/ (schema in docs/planner.md). The planner and the cost model read them; `igen
 * profile-hw` writes one for this machine. Plain data; loading validates every field and reports
 * "FILE:LINE:COL: key.path: what is wrong". Never touches the machine it describes. */
#ifndef IG_HWPROF_H
#define IG_HWPROF_H

#include <stddef.h>

#include "core/base/status.h"
#include "offload/placement.h"

#define IG_HWPROF_NAME_MAX 128
#define IG_HWPROF_TEXT_MAX 1024

typedef struct ig_hwprof_numa {
    int os_index;
    double memory_gib;
} ig_hwprof_numa;

/* Units: GiB (2^30 bytes) for capacities, GB/s (1e9 bytes/s) for bandwidths, TFLOPS / GFLOPS
 * (1e12 / 1e9 flop/s), microseconds for latencies. Optional fields are 0 when absent (the loader
 * fills gemm_tflops_decode from gemm_tflops and host.numa_nodes with one node 0 holding all host
 * memory). */
typedef struct ig_hwprof {
    char name[IG_HWPROF_NAME_MAX];
    char description[IG_HWPROF_TEXT_MAX];
    struct {
        char name[IG_HWPROF_NAME_MAX];
        double memory_gib;
        double gemm_tflops;        /* large-M matmul (prefill) */
        double gemm_tflops_decode; /* small-M matmul (decode) */
        double mem_bandwidth_gbps;
        int numa_node; /* OS index of the NUMA node the device hangs off; -1: the first node */
        /* Optional rates of the decode kernels a KV policy's step runs, measured with igen's own
         * kernels at one model's attention shape (kernel_shape, free text); 0 when absent, and the
         * cost model then prices those bytes at mem_bandwidth_gbps (a GPU kernel's usual bound).
         * attn_gbps: decode attention over f32 KV rows, GB/s of f32-equivalent KV (2 x hd x 4
         * bytes per KV head and row); attn_int4_gbps: the same over 4-bit rows decoded inside the
         * kernel, in the same f32-equivalent unit; attn_sparse_gbps: f32 rows of a scattered
         * selection (one in five, as a speculating policy reads them); select_gbps: a speculating
         * policy's selection (partial scores, threshold counts, top entries), GB/s of partial keys;
         * attn_dense_gbps: every f32 row of a contiguous table through the dense kernel, as a
         * dense policy whose rows never move reads them (0: at attn_gbps); attn_probs_gbps: f32
         * rows as attn_gbps, the kernel also writing each query head's probabilities and each
         * added to its row's running sum, as a policy that scores rows by attention (H2O) runs
         * it (0: at attn_gbps). */
        double attn_gbps, attn_int4_gbps, attn_sparse_gbps, select_gbps, attn_dense_gbps;
        double attn_probs_gbps;
        char kernel_shape[IG_HWPROF_NAME_MAX];
        /* Optional rates of one model's decode matmuls, f32 weights, at that model's own shapes
         * (matmul_shape "d_model,q_dim,kv_dim,d_ffn,ffn_mats,vocab,n_layer,rows", free text): the
         * layers' chain of matmuls (gemm_tflops_layer) and the logits (lm_head,
         * gemm_tflops_logits); 0 when absent, and the cost model then uses gemm_tflops_decode for
         * both. */
        double gemm_tflops_layer, gemm_tflops_logits;
        char matmul_shape[IG_HWPROF_NAME_MAX];
    } device;
    struct {
        double memory_gib;
        int n_numa; /* entries in numa */
        ig_hwprof_numa numa[IG_MAX_NUMA];
        double cpu_gflops;
        double mem_bandwidth_gbps;
    } host;
    struct {
        double h2d_gbps, d2h_gbps;
        double h2d_latency_us, d2h_latency_us;
    } link;
    int has_disk;
    struct {
        double read_gbps, write_gbps;
        double capacity_gib;
    } disk;
} ig_hwprof;

/* Loads and validates a profile file. */
ig_status ig_hwprof_load(const char *path, ig_hwprof *out, ig_error *err);
/* The same from memory (tests); `name` is used as the file name in messages. */
ig_status ig_hwprof_load_string(const char *text, size_t len, const char *name, ig_hwprof *out,
                                ig_error *err);
/* Writes p as YAML that ig_hwprof_load reads back to the same values. `comment` (may be NULL;
 * several lines allowed) goes at the top as '#' lines. */
ig_status ig_hwprof_save(const ig_hwprof *p, const char *path, const char *comment, ig_error *err);
/* Resolves a profile: a path (contains '/' or ends in .yaml) as given; otherwise a name looked up
 * as $IGEN_HOME/configs/hardware/NAME.yaml, then <source dir>/configs/hardware/NAME.yaml. */
ig_status ig_hwprof_find(const char *name_or_path, char *path, size_t n, ig_error *err);
/* ig_hwprof_find + ig_hwprof_load. */
ig_status ig_hwprof_open(const char *name_or_path, ig_hwprof *out, ig_error *err);
/* Fills a machine's capacities from the profile (until the topology module provides them). */
void ig_hwprof_to_machine(const ig_hwprof *p, ig_machine *m);

#endif
