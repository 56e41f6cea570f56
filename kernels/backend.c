/* Backend selection with a visible CPU fallback. */
#include "kernels/backend.h"

#include <stdio.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

#ifdef IG_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

int ig_backend_cuda_compiled(void) {
#ifdef IG_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

const char *ig_backend_name(ig_backend_kind k) {
    return k == IG_BACKEND_CUDA ? "cuda" : "cpu";
}

int ig_backend_cuda_probe(char *why, size_t why_len, ig_backend_info *info) {
#ifdef IG_HAVE_CUDA
    ig_cuda_info ci;
    int n = ig_cuda_probe(&ci, why, why_len);
    if (n > 0 && info) {
        memset(info, 0, sizeof *info);
        info->kind = IG_BACKEND_CUDA;
        snprintf(info->device_name, sizeof info->device_name, "%.127s", ci.name);
        info->device_mem_bytes = ci.total_mem;
        info->async_copies = 1;
        info->pinned_host = 1;
    }
    return n;
#else
    snprintf(why, why_len, "this build has no CUDA backend (configure with -DIG_CUDA=ON)");
    (void)info;
    return 0;
#endif
}

int ig_backend_select(const char *name, ig_backend_info *info) {
    memset(info, 0, sizeof *info);
    info->kind = IG_BACKEND_CPU;
    snprintf(info->device_name, sizeof info->device_name, "CPU (%d threads, %s)",
             ig_cpu_get_threads(), ig_cpu_simd_name());
    if (!strcmp(name, "cpu")) return IG_BACKEND_CPU;
    if (strcmp(name, "auto") && strcmp(name, "cuda")) return -1;
    char why[256] = "";
    ig_backend_info gpu;
    if (ig_backend_cuda_probe(why, sizeof why, &gpu) > 0) {
        *info = gpu;
        return IG_BACKEND_CUDA;
    }
    if (!strcmp(name, "cuda")) fprintf(stderr, "igen: no GPU (%s); using the CPU\n", why);
    return IG_BACKEND_CPU;
}
