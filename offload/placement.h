/* Shared vocabulary of the offloading core: memory tiers, the per-layer weight tensors a plan
 * places, the machine a plan is made for, and the placement a plan hands to execution. Plain data
 * only; the topology (offload/topo), the planner (offload/plan) and the executor (offload/wstream,
 * core/engine) all speak it, so none of them depends on another's internals. */
#ifndef IG_PLACEMENT_H
#define IG_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#define IG_MAX_NUMA 64

typedef enum ig_tier_kind {
    IG_TIER_DEVICE = 0, /* GPU memory, or the accounted device region of the CPU backend */
    IG_TIER_HOST = 1,   /* host memory (one NUMA node, or interleaved) */
    IG_TIER_DISK = 2,   /* files in a directory, read and written by I/O threads */
    IG_TIER_COUNT = 3,
} ig_tier_kind;

/* Where host memory of a tier comes from. */
typedef enum ig_numa_mode {
    IG_NUMA_LOCAL = 0, /* the NUMA node the GPU hangs off (or the first node on the CPU backend) */
    IG_NUMA_INTERLEAVE =
        1,             /* pages spread over the listed nodes (all nodes when the list is empty) */
    IG_NUMA_NODES = 2, /* an explicit node list, filled in order */
} ig_numa_mode;

/* A place for bytes: a tier kind and, for host memory, the NUMA node (OS index; -1 = interleaved
 * or unbound). */
typedef struct ig_tier_ref {
    ig_tier_kind kind;
    int numa;
} ig_tier_ref;

/* The tensors of one transformer block, in the order they are used (FlexGen places weights by
 * whole tensor within a layer). Vectors (norms, biases) travel with the matrix they belong to:
 * ATTN_NORM carries the attention norm, QKV each its bias, and so on. Absent tensors (W_GATE on
 * OPT) have zero bytes. */
typedef enum ig_wtensor {
    IG_WT_ATTN_NORM = 0,
    IG_WT_Q,
    IG_WT_K,
    IG_WT_V,
    IG_WT_O,
    IG_WT_FFN_NORM,
    IG_WT_GATE,
    IG_WT_UP,
    IG_WT_DOWN,
    IG_WT_COUNT,
} ig_wtensor;

/* The machine a plan is made for: capacities per tier (after any user limits) and which NUMA node
 * the compute device is attached to. Filled from the topology (offload/topo) and/or a hardware
 * profile (configs/hardware). */
typedef struct ig_machine {
    size_t device_bytes;
    int n_numa;
    int numa_os[IG_MAX_NUMA];       /* OS index of each NUMA node */
    size_t numa_bytes[IG_MAX_NUMA]; /* usable host memory per node */
    size_t disk_bytes;              /* 0: no disk tier */
    int device_numa; /* OS index of the NUMA node of the compute device; -1 unknown */
} ig_machine;

/* Where each layer's weights live during a run: [n_layer][IG_WT_COUNT]. The embedding, final norm
 * and lm_head (the "outer" tensors) are placed by `outer`. Owned by whoever built it. */
typedef struct ig_weight_placement {
    int n_layer;
    ig_tier_ref *tensor; /* n_layer * IG_WT_COUNT entries, index layer * IG_WT_COUNT + tensor */
    ig_tier_ref outer;
} ig_weight_placement;

const char *ig_tier_kind_name(ig_tier_kind k);
const char *ig_wtensor_name(ig_wtensor t);

#endif
