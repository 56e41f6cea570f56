/* Compute backends and what they can do, reported as data so callers ask instead of #ifdef-ing.
 * The CPU backend always exists; the CUDA backend exists when built with IG_CUDA and a GPU and its
 * driver answer at start-up. Any failure to reach a GPU is "no GPU", never a crash. */
#ifndef IG_BACKEND_H
#define IG_BACKEND_H

#include <stddef.h>

typedef enum ig_backend_kind {
    IG_BACKEND_CPU = 0,
    IG_BACKEND_CUDA = 1,
} ig_backend_kind;

typedef struct ig_backend_info {
    ig_backend_kind kind;
    char device_name[128];
    size_t device_mem_bytes; /* 0 on the CPU backend (the accounted region is set by the plan) */
    int async_copies;        /* copies overlap compute (streams) */
    int pinned_host;         /* page-locked host buffers available */
} ig_backend_info;

/* Whether this build contains the CUDA backend. */
int ig_backend_cuda_compiled(void);
/* Probes for a usable GPU. Returns the number of devices, or 0 with `why` explaining (no driver,
 * no device, CUDA not compiled in, cuBLAS failed). */
int ig_backend_cuda_probe(char *why, size_t why_len, ig_backend_info *info);
/* Picks a backend by name ("auto", "cpu", "cuda"): "auto" and "cuda" give CUDA when a GPU is usable
 * and fall back to the CPU otherwise ("cuda" then says so in one line on stderr). Returns the kind
 * chosen, or -1 for an unknown name. */
int ig_backend_select(const char *name, ig_backend_info *info);
const char *ig_backend_name(ig_backend_kind k);

#endif
