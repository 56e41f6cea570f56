/* Host memory for the host tier, bound to NUMA nodes with hwloc. Always page-aligned (the disk tier
 * reads and writes these buffers with O_DIRECT). When binding is impossible (a topology that is not
 * this system, no binding support, a kernel or container that refuses mbind) the memory is still
 * allocated, unbound, with one warning per process; asking for a node that does not exist is an
 * error. Allocates once per tier buffer at plan time, never on a per-step path. */
#ifndef IG_HOSTMEM_H
#define IG_HOSTMEM_H

#include <stddef.h>

#include "core/base/status.h"
#include "offload/placement.h"
#include "offload/topo.h"

typedef struct ig_hostmem ig_hostmem;

/* What binding the allocation actually got. */
typedef enum ig_hostmem_binding {
    IG_HOSTMEM_BOUND = 0,       /* pages bound to the requested node(s) (MPOL_BIND) */
    IG_HOSTMEM_INTERLEAVED = 1, /* pages interleaved over the requested nodes */
    IG_HOSTMEM_UNBOUND = 2,     /* plain page-aligned memory: no topology, or the fallback */
} ig_hostmem_binding;

/* Allocates `bytes` (> 0; rounded up to whole pages) of host memory. `nodes` are NUMA OS indices:
 *  - IG_NUMA_LOCAL: bound to nodes[0] (the GPU's node, ig_machine.device_numa), or to the first
 *    node of t when n_nodes == 0 or nodes[0] == -1 (GPU node unknown, CPU backend);
 *  - IG_NUMA_INTERLEAVE: pages interleaved over the listed nodes (all nodes when n_nodes == 0);
 *  - IG_NUMA_NODES: bound to the listed nodes (n_nodes >= 1); with several, the kernel fills the
 *    nearest first. A planner that needs exact bytes per node makes one allocation per node.
 * A node t does not have: IG_ERR_INVALID_ARG naming it and listing the valid ones. t == NULL:
 * plain page-aligned memory, nodes ignored, no warning. t must outlive the allocation. */
ig_status ig_hostmem_alloc(const ig_topo *t, ig_numa_mode mode, const int *nodes, int n_nodes,
                           size_t bytes, ig_hostmem **out, ig_error *err);
void ig_hostmem_free(ig_hostmem *h);

void *ig_hostmem_ptr(const ig_hostmem *h);
/* The size asked for (the mapping may be larger by up to a page). */
size_t ig_hostmem_size(const ig_hostmem *h);
ig_hostmem_binding ig_hostmem_bound(const ig_hostmem *h);
const char *ig_hostmem_binding_name(ig_hostmem_binding b);
/* The node (OS index) when bound to exactly one, else -1: an ig_tier_ref's numa. */
int ig_hostmem_numa(const ig_hostmem *h);
/* Why the memory is unbound ("" when it is bound or interleaved). */
const char *ig_hostmem_unbound_reason(const ig_hostmem *h);
/* 1 when the range is registered with the CUDA driver for DMA (never, until the CUDA build
 * implements it: see the marked place in hostmem.c). */
int ig_hostmem_dma_registered(const ig_hostmem *h);

#endif
