/* The KV cache's home tier: per (layer, slot, KV head) a table of entries, each holding one token's
 * key and value rows encoded by a codec (f32, f16, or group-wise quantized) plus the token position
 * it belongs to. Capacity is set at create time (a memory-limited pool holds fewer entries than the
 * sequence has tokens); evicting an entry really frees it for the next token. This module only
 * stores and encodes; which entries to keep or fetch is a policy's decision. */
#ifndef IG_KV_HOME_H
#define IG_KV_HOME_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"
#include "core/base/status.h"
#include "offload/kv_format.h"

/* Encoding and decoding rows (the format itself: offload/kv_format.h). */
void ig_kv_codec_encode(const ig_kv_codec *c, const float *x, int64_t n_rows, int hd, void *out);
void ig_kv_codec_decode(const ig_kv_codec *c, const void *in, int64_t n_rows, int hd, float *out);

typedef struct ig_kv_home ig_kv_home;

typedef struct ig_kv_home_opts {
    int n_layer, n_slots, n_kv_head, head_dim;
    int64_t capacity; /* entries per (layer, slot, KV head) */
    ig_kv_codec codec;
    /* Host memory of the K and V rows: bound to NUMA node `numa` of `topo` (-1: interleaved over
     * its nodes) through offload/hostmem; topo NULL: plain memory. */
    const struct ig_topo *topo;
    int numa;
    /* Slots [disk_slot0, n_slots) keep their rows in a file of this disk tier (FlexGen's
     * cache_disk_percent): written row by row as tokens are stored, read back for attention. Their
     * rows have no address (k_base/v_base must not be used for them; read through
     * ig_kv_home_read). NULL: every slot in memory. The file is preallocated at create, so a full
     * disk fails there, never in the middle of a run. */
    struct ig_disk *disk;
    int disk_slot0;
} ig_kv_home_opts;

ig_status ig_kv_home_create(const ig_kv_home_opts *o, ig_kv_home **out, ig_error *err);
void ig_kv_home_free(ig_kv_home *h);
const ig_kv_home_opts *ig_kv_home_get_opts(const ig_kv_home *h);
size_t ig_kv_home_row_bytes(const ig_kv_home *h); /* one K (or one V) row */
/* The NUMA node the rows are bound to (-1: interleaved, unbound or no topology). */
int ig_kv_home_numa(const ig_kv_home *h);

/* Entries of (layer, slot, head): pos[e] is the token position stored in entry e, or -1 if free.
 * Entries 0 .. high_water-1 have been used at some point. */
const int32_t *ig_kv_home_pos(const ig_kv_home *h, int layer, int slot, int head);
int64_t ig_kv_home_n_used(const ig_kv_home *h, int layer, int slot, int head);
int64_t ig_kv_home_high_water(const ig_kv_home *h, int layer, int slot, int head);

/* Takes a free entry (the most recently released first, else the next never-used one); -1 if
 * the table is full. */
int64_t ig_kv_home_take(ig_kv_home *h, int layer, int slot, int head);
/* Encodes and stores one token's key and value rows into entry e: ig_kv_home_write_rows, then
 * ig_kv_home_set_pos. */
void ig_kv_home_write(ig_kv_home *h, int layer, int slot, int head, int64_t e, int32_t pos,
                      const float *k, const float *v);
/* The two halves of a write, so that the bytes can be written on a transfer thread while the
 * caller's thread goes on with the metadata (FlexGen's store_cache overlapped with compute).
 * write_rows encodes k and v into entry e's rows (memory, or pwrite for a slot on disk) and touches
 * no metadata: it may run on another thread concurrently with take, set_pos, release, reset_slot
 * and the pos/n_used/high_water getters of any entry, with reads and writes of other entries'
 * rows, and with the disk counters and io_error (kept under the home's lock). The caller orders it
 * before any read of entry e's rows and before another write of entry e, and keeps e taken (not
 * released or reset) until it has finished. set_pos records the token position of a taken entry
 * (metadata only, the caller's thread). */
void ig_kv_home_write_rows(ig_kv_home *h, int layer, int slot, int head, int64_t e, const float *k,
                           const float *v);
void ig_kv_home_set_pos(ig_kv_home *h, int layer, int slot, int head, int64_t e, int32_t pos);
/* Frees entry e (its bytes are reused by the next write). */
void ig_kv_home_release(ig_kv_home *h, int layer, int slot, int head, int64_t e);
/* Frees every entry of a slot (all layers and heads). */
void ig_kv_home_reset_slot(ig_kv_home *h, int slot);

/* Whether slot's rows live on the disk tier. */
int ig_kv_home_on_disk(const ig_kv_home *h, int slot);
/* Bytes read from / written to the disk tier since create (all threads). */
double ig_kv_home_disk_read_bytes(const ig_kv_home *h);
double ig_kv_home_disk_write_bytes(const ig_kv_home *h);
/* The first disk I/O error of the run (a message naming the file and offset), or NULL. Reads and
 * writes after an error leave the rows as they were; the caller must abort the forward pass. */
const char *ig_kv_home_io_error(const ig_kv_home *h);

/* Encoded rows of (layer, slot, head): entry e's key at k_base + e * row_bytes (memory slots). */
const void *ig_kv_home_k_base(const ig_kv_home *h, int layer, int slot, int head);
const void *ig_kv_home_v_base(const ig_kv_home *h, int layer, int slot, int head);
/* Decodes the listed entries' rows into f32 [n][hd] (k_out, v_out). */
void ig_kv_home_read(const ig_kv_home *h, int layer, int slot, int head, const int32_t *entries,
                     int64_t n, float *k_out, float *v_out);

/* The memory slots' K and V rows in host memory, `bytes` each: table (layer, slot, head) of a
 * memory slot starts at byte ((layer * n_slots + slot) * n_kv_head + head) * capacity * row_bytes
 * of each (disk slots have none). A device backend registers them for its copies (the CUDA engine
 * pins and maps them, keeping their NUMA placement, and unregisters them before the home is
 * freed); this module moves and counts bytes and never calls a backend. */
void ig_kv_home_row_memory(const ig_kv_home *h, void **k, void **v, size_t *bytes);
/* Bytes of the entries in use (K and V), and of the whole allocation. */
size_t ig_kv_home_resident_bytes(const ig_kv_home *h);
/* The same for slots [slot0, slot1) only. */
size_t ig_kv_home_resident_bytes_slots(const ig_kv_home *h, int slot0, int slot1);
size_t ig_kv_home_allocated_bytes(const ig_kv_home *h);

#endif
