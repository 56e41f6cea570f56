/* Weight residency and streaming: where each layer's weights live during a run (device, host
 * memory, disk, per an ig_weight_placement) and how they reach the compute device. Tensors placed
 * on the device are copied there once at create. The others are loaded layer by layer into one of
 * two device staging buffers: from host memory through the link (offload/link), from disk through
 * the I/O threads into a host relay buffer and then through the link. With overlap on, the load of
 * the next layer runs on a transfer thread while the current layer computes (FlexGen's
 * load_weight(j+1) beside compute(j)); with overlap off, each layer is loaded when it is needed.
 * Either way the bytes reaching the kernels are the same, so logits are bit-identical. This module
 * only moves and counts bytes; which tier holds what is the planner's decision. */
#ifndef IG_WSTREAM_H
#define IG_WSTREAM_H

#include <stddef.h>

#include "core/model/model.h"
#include "core/base/status.h"
#include "offload/disk.h"
#include "offload/link.h"
#include "offload/placement.h"

typedef struct ig_wstream ig_wstream;

typedef struct ig_wstream_opts {
    const ig_model *model;
    const ig_weight_placement *place; /* NULL: every tensor on the device */
    ig_disk *disk;                    /* needed when a tensor is placed on disk; not owned */
    const ig_link_model *link;        /* NULL or off: copies at memory speed */
    int overlap;                      /* prefetch the next layer on a transfer thread */
    size_t device_capacity;           /* 0: unlimited; else create fails when exceeded */
    size_t host_capacity;             /* 0: unlimited */
    /* Host memory of tensors placed with NUMA node n >= 0 is bound to n, with -1 interleaved over
     * all nodes; NULL: unbound (offload/hostmem falls back, with one warning, where binding is
     * refused). Must outlive the stream. */
    const struct ig_topo *topo;
} ig_wstream_opts;

typedef struct ig_wstream_stats {
    double h2d_bytes;       /* host -> device copies of weights */
    double disk_read_bytes; /* disk -> host relay */
    double transfer_s;      /* time the loads took (on the transfer thread with overlap) */
    double wait_s;          /* time compute waited for a layer */
    double link_model_s;    /* of transfer_s, the part the link model added by throttling */
    int64_t layer_loads;
    /* What the link model prescribes for these loads: the sum of ig_link_time over each load's
     * bytes, computed, not measured (0 with the model off). transfer_s is never less. */
    double link_modelled_s;
} ig_wstream_stats;

ig_status ig_wstream_create(const ig_wstream_opts *o, ig_wstream **out, ig_error *err);
/* Waits for any load in flight, then frees the buffers and the tier files it created. */
void ig_wstream_free(ig_wstream *ws);

/* The weights of layer l, resident on the device until the next call after this one (two
 * buffers). Calls must walk the layers in order 0..n_layer-1 for each forward pass; with overlap
 * the call starts loading the next layer (layer 0 after the last, for the next pass). NULL when a
 * load failed (see ig_wstream_error). */
const ig_layer *ig_wstream_layer(ig_wstream *ws, int l);
/* After ig_wstream_layer returned NULL (a disk read failed): the message, naming file and offset.
 */
const char *ig_wstream_error(const ig_wstream *ws);

/* Bytes per tier: device (resident tensors + the two staging buffers), host (tensors placed
 * there + the disk relay buffer), disk. */
size_t ig_wstream_device_bytes(const ig_wstream *ws);
size_t ig_wstream_host_bytes(const ig_wstream *ws);
size_t ig_wstream_disk_bytes(const ig_wstream *ws);
/* The tier tensor group t of layer l is placed in (IG_TIER_DEVICE: resident). */
ig_tier_kind ig_wstream_tier(const ig_wstream *ws, int l, ig_wtensor t);
/* Bytes streamed to the device per forward pass (every non-device tensor once). */
size_t ig_wstream_bytes_per_pass(const ig_wstream *ws);
/* Waits for a load in flight (it updates the counters), then returns them. */
ig_wstream_stats ig_wstream_get_stats(ig_wstream *ws);
void ig_wstream_reset_stats(ig_wstream *ws);

/* Bytes of one tensor group of a layer (matrix + its vectors), as stored. */
size_t ig_wstream_group_bytes(const ig_model *m, int layer, ig_wtensor t);

#endif
