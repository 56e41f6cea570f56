/* Internal to core/engine: the policy path's working set in the memory of the engine's backend
 * table (kv_device.c). The KV home stays in host memory (offload/kv_home), registered with the
 * table so that its rows are read in place; each layer the selected rows of the decode sequences
 * are gathered into a double-buffered working set on a second queue of the table (a fork),
 * ordered by events, and decode attention runs over them on the table's own queue. Every step is
 * an op of the table (kernels/backend_iface.h): the same code on any backend whose buffers are not
 * the host's. Only the CUDA engine's "cuda" table has such buffers today (test_cuda_engine_emu
 * runs it on the emulator); the host tables' engine reads the home in place instead.
 *
 * Errors: the gather and decode steps run inside hooks that cannot fail (engine_kv.c); the first
 * error is kept (ig_kv_dev_error) and every later step does nothing until ig_kv_dev_clear_error. */
#ifndef IG_KV_DEVICE_H
#define IG_KV_DEVICE_H

#include "kernels/backend_iface.h"
#include "offload/kv_home.h"

typedef struct ig_kv_dev ig_kv_dev;

/* The working set of S slots x G KV heads x cap rows per layer parity in the home's row format
 * (its codec), staging for the selections, the decode rows of up to S sequences (H query heads of
 * hd) and their probabilities (probs_stride = cap + 1 per head). Registers the home's rows with
 * be; ig_kv_dev_free unregisters them, so free this before the home. */
ig_status ig_kv_dev_create(ig_be *be, ig_kv_home *home, const ig_kv_codec *codec, int S, int G,
                           int H, int hd, int64_t cap, ig_kv_dev **out, ig_error *err);
/* Waits for both queues (work still reading the home), unregisters the home, frees everything. */
void ig_kv_dev_free(ig_kv_dev *d);
/* The first error kept since the last clear (IG_OK: none; err then untouched). */
ig_status ig_kv_dev_error(const ig_kv_dev *d, ig_error *err);
void ig_kv_dev_clear_error(ig_kv_dev *d);
/* Queues on the copy queue the gather of `layer`'s selected entries of n decode sequences (working
 * set positions [i0, i0 + n), slots[i] their cache slots; selections sel_e [S][G][cap] and sel_n
 * [S][G] indexed by slot) into working-set buffer buf, then records event ev. */
void ig_kv_dev_gather(ig_kv_dev *d, int layer, int buf, int ev, int i0, int n, const int *slots,
                      const int32_t *sel_e, const int64_t *sel_n);
/* The table's queue waits for event ev (no host block). */
void ig_kv_dev_wait(ig_kv_dev *d, int ev);
/* Decode attention of working-set positions [i0, i0 + n) over buffer buf plus each sequence's new
 * row (through the codec, as the home stores it): q, k, v, att are the layer's activation buffers
 * of the table, the sequence at position i0 + i in rows[i] of them ([H][hd] and [G][hd] rows).
 * Writes the attention rows there; returns when the table's queue has finished (the caller may
 * then store into entries the gather read). With want_probs returns the probabilities in host
 * memory, [n][H][probs_stride], valid until the next call; else, or after an error, NULL. */
const float *ig_kv_dev_decode(ig_kv_dev *d, int buf, int i0, int n, const int64_t *rows,
                              const float *q, const float *k, const float *v, float *att,
                              int want_probs);

#endif
