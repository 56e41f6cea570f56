/* NUMA-bound host memory with hwloc_alloc_membind, and the unbound fallback. Binding is asked for
 * STRICTly so that what was obtained is known (hwloc otherwise falls back silently); a refusal is
 * logged once per process, never fatal. A node that does not exist is the caller's error. */
#include "offload/hostmem.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hwloc.h>

#include "core/base/log.h"

struct ig_hostmem {
    void *ptr;
    size_t bytes;  /* asked for */
    size_t mapped; /* whole pages */
    ig_hostmem_binding binding;
    int numa;            /* single bound node, else -1 */
    hwloc_topology_t hw; /* non-NULL: allocated by hwloc_alloc_membind, free with hwloc_free */
    int dma_registered;  /* CUDA build: cudaHostRegister succeeded */
    char unbound_reason[256];
};

static atomic_int g_warned;

static void warn_unbound_once(const char *why) {
    if (atomic_exchange(&g_warned, 1) == 0)
        IG_WARN("host memory is not NUMA-bound (%s); pages go wherever the kernel first puts them",
                why);
}

const char *ig_hostmem_binding_name(ig_hostmem_binding b) {
    switch (b) {
    case IG_HOSTMEM_BOUND:
        return "bound";
    case IG_HOSTMEM_INTERLEAVED:
        return "interleaved";
    case IG_HOSTMEM_UNBOUND:
        return "unbound";
    }
    return "?";
}

/* Resolves the request into OS node indices (validated against t) and an hwloc policy. */
static ig_status resolve_nodes(const ig_topo *t, ig_numa_mode mode, const int *nodes, int n_nodes,
                               hwloc_bitmap_t set, hwloc_membind_policy_t *policy, ig_error *err) {
    if (n_nodes < 0 || (n_nodes > 0 && !nodes))
        return ig_error_set(err, IG_ERR_INVALID_ARG, "host memory: bad NUMA node list (%d nodes)",
                            n_nodes);
    char valid[512];
    ig_topo_numa_list(t, valid, sizeof valid);
    switch (mode) {
    case IG_NUMA_LOCAL:
        if (n_nodes > 1)
            return ig_error_set(
                err, IG_ERR_INVALID_ARG,
                "host memory: NUMA mode 'local' takes one node (the GPU's), got %d; "
                "use an explicit node list for several",
                n_nodes);
        *policy = HWLOC_MEMBIND_BIND;
        if (n_nodes == 0 || nodes[0] == -1) {
            hwloc_bitmap_only(set, (unsigned)ig_topo_numa_at(t, 0)->os_index);
            return IG_OK;
        }
        break;
    case IG_NUMA_INTERLEAVE:
        *policy = HWLOC_MEMBIND_INTERLEAVE;
        if (n_nodes == 0) {
            for (int i = 0; i < ig_topo_n_numa(t); i++)
                hwloc_bitmap_set(set, (unsigned)ig_topo_numa_at(t, i)->os_index);
            return IG_OK;
        }
        break;
    case IG_NUMA_NODES:
        *policy = HWLOC_MEMBIND_BIND;
        if (n_nodes == 0)
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "host memory: the explicit NUMA node list is empty (nodes: %s)",
                                valid);
        break;
    default:
        return ig_error_set(err, IG_ERR_INVALID_ARG, "host memory: unknown NUMA mode %d",
                            (int)mode);
    }
    for (int i = 0; i < n_nodes; i++) {
        if (ig_topo_numa_find(t, nodes[i]) < 0)
            return ig_error_set(err, IG_ERR_INVALID_ARG,
                                "NUMA node %d does not exist (this topology's nodes: %s)", nodes[i],
                                valid);
        hwloc_bitmap_set(set, (unsigned)nodes[i]);
    }
    return IG_OK;
}

static ig_status alloc_plain(ig_hostmem *h, ig_error *err) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *p = NULL;
    int rc = posix_memalign(&p, page, h->mapped);
    if (rc != 0)
        return ig_error_set(err, IG_ERR_NOMEM, "host memory: cannot allocate %zu bytes: %s",
                            h->bytes, strerror(rc));
    h->ptr = p;
    h->hw = NULL;
    h->binding = IG_HOSTMEM_UNBOUND;
    h->numa = -1;
    return IG_OK;
}

ig_status ig_hostmem_alloc(const ig_topo *t, ig_numa_mode mode, const int *nodes, int n_nodes,
                           size_t bytes, ig_hostmem **out, ig_error *err) {
    if (!out) return ig_error_set(err, IG_ERR_INVALID_ARG, "ig_hostmem_alloc: out is NULL");
    *out = NULL;
    if (bytes == 0)
        return ig_error_set(err, IG_ERR_INVALID_ARG, "host memory: a buffer of 0 bytes");
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (bytes > SIZE_MAX - page)
        return ig_error_set(err, IG_ERR_NOMEM, "host memory: %zu bytes is too large", bytes);
    ig_hostmem *h = ig_calloc(1, sizeof *h, err);
    if (!h) return IG_ERR_NOMEM;
    h->bytes = bytes;
    h->mapped = (bytes + page - 1) / page * page;
    h->numa = -1;

    if (!t) {
        snprintf(h->unbound_reason, sizeof h->unbound_reason, "no topology given");
        ig_status rc = alloc_plain(h, err);
        if (rc != IG_OK) {
            free(h);
            return rc;
        }
        *out = h;
        return IG_OK;
    }

    hwloc_topology_t hw = ig_topo_hwloc(t);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (!set) {
        free(h);
        return ig_error_set(err, IG_ERR_NOMEM, "host memory: cannot allocate a node set");
    }
    hwloc_membind_policy_t policy = HWLOC_MEMBIND_BIND;
    ig_status rc = resolve_nodes(t, mode, nodes, n_nodes, set, &policy, err);
    if (rc != IG_OK) {
        hwloc_bitmap_free(set);
        free(h);
        return rc;
    }

    const struct hwloc_topology_support *sup = hwloc_topology_get_support(hw);
    int can = sup && sup->membind && sup->membind->alloc_membind &&
              (policy == HWLOC_MEMBIND_INTERLEAVE ? sup->membind->interleave_membind
                                                  : sup->membind->bind_membind);
    if (!ig_topo_is_this_system(t)) {
        snprintf(h->unbound_reason, sizeof h->unbound_reason, "the topology is not this system: %s",
                 ig_topo_source_desc(t));
    } else if (!can) {
        snprintf(h->unbound_reason, sizeof h->unbound_reason,
                 "hwloc has no memory binding support on this system");
    } else {
        errno = 0;
        void *p = hwloc_alloc_membind(hw, h->mapped, set, policy,
                                      HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_STRICT);
        if (p) {
            h->ptr = p;
            h->hw = hw;
            h->binding =
                policy == HWLOC_MEMBIND_INTERLEAVE ? IG_HOSTMEM_INTERLEAVED : IG_HOSTMEM_BOUND;
            if (policy == HWLOC_MEMBIND_BIND && hwloc_bitmap_weight(set) == 1)
                h->numa = hwloc_bitmap_first(set);
        } else if (errno == ENOMEM) {
            hwloc_bitmap_free(set);
            free(h);
            return ig_error_set(err, IG_ERR_NOMEM,
                                "host memory: cannot allocate %zu bytes (NUMA-bound): %s", bytes,
                                strerror(ENOMEM));
        } else {
            /* ENOSYS/EXDEV from hwloc, EPERM/EINVAL from mbind under a seccomp profile or a
             * cpuset that excludes the node: the memory is still usable, only unbound. */
            snprintf(h->unbound_reason, sizeof h->unbound_reason,
                     "binding was refused: %s (containers often forbid mbind)",
                     strerror(errno ? errno : ENOSYS));
        }
    }
    hwloc_bitmap_free(set);
    if (!h->ptr) {
        rc = alloc_plain(h, err);
        if (rc != IG_OK) {
            free(h);
            return rc;
        }
        warn_unbound_once(h->unbound_reason);
    }

    /* The CUDA engine registers a KV home's rows pinned+mapped (ig_kv_home_row_memory, then
     * cudaHostRegister, which keeps this NUMA placement). */
    *out = h;
    return IG_OK;
}

void ig_hostmem_free(ig_hostmem *h) {
    if (!h) return;
    if (h->hw)
        hwloc_free(h->hw, h->ptr, h->mapped);
    else
        free(h->ptr);
    free(h);
}

void *ig_hostmem_ptr(const ig_hostmem *h) {
    return h->ptr;
}
size_t ig_hostmem_size(const ig_hostmem *h) {
    return h->bytes;
}
ig_hostmem_binding ig_hostmem_bound(const ig_hostmem *h) {
    return h->binding;
}
int ig_hostmem_numa(const ig_hostmem *h) {
    return h->numa;
}
const char *ig_hostmem_unbound_reason(const ig_hostmem *h) {
    return h->binding == IG_HOSTMEM_UNBOUND ? h->unbound_reason : "";
}
int ig_hostmem_dma_registered(const ig_hostmem *h) {
    return h->dma_registered;
}
