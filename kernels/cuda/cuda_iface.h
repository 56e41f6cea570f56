/* The CUDA backend's table over a context someone else owns (kernels/backend_iface.h): what the
 * CUDA engine runs its layer on, so the table's ops queue on the engine's stream and share its
 * buffers. ig_be_cuda_create (backend_iface.h) makes a table with a context of its own. */
#ifndef IG_CUDA_IFACE_H
#define IG_CUDA_IFACE_H

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/backend_iface.h"
#include "kernels/cuda/cuda_kernels.h"

/* A "cuda" table whose ops run on ctx's stream. qs (may be NULL; copied): the compressed
 * matrices' prefill scratch for linear (ig_cuda_qlinear); x_scratch (may be NULL) of
 * x_scratch_bytes: where linear rounds x to f16/bf16 for narrow weights (grown into a buffer of
 * the table's own when a call needs more). ctx, qs's buffer and x_scratch stay the caller's and
 * must outlive the table; ig_be_free releases only what the table allocated. */
ig_status ig_be_cuda_wrap(ig_cuda_ctx *ctx, const ig_cuda_qscratch *qs, void *x_scratch,
                          size_t x_scratch_bytes, ig_be **out, ig_error *err);

#ifdef __cplusplus
}
#endif

#endif
