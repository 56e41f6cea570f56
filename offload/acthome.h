/* The home of activations placed off the device (FlexGen's act_cpu_percent / act_disk_percent):
 * a host buffer of rows, and for the rows homed on disk a file of the disk tier, with the host
 * buffer as its relay. The engine decides which rows go where (the sequences in its last slots);
 * this module moves their bytes between the device's activation rows and their home, through the
 * link model (and the disk), and counts them. */
#ifndef IG_ACTHOME_H
#define IG_ACTHOME_H

#include <stddef.h>

#include "core/base/status.h"
#include "offload/disk.h"
#include "offload/link.h"

typedef struct ig_act_home ig_act_home;

typedef struct ig_act_home_stats {
    double h2d_bytes, d2h_bytes;              /* across the link */
    double disk_read_bytes, disk_write_bytes; /* rows homed on disk */
    double transfer_s;                        /* time the link copies took (throttled included) */
} ig_act_home_stats;

/* A home of `bytes` (the largest span of rows a call moves, offsets below it); with `disk` a file
 * of that size on it too (named "activations"). link: NULL or off, copies at memory speed. */
ig_status ig_act_home_create(size_t bytes, const ig_link_model *link, ig_disk *disk,
                             ig_act_home **out, ig_error *err);
void ig_act_home_free(ig_act_home *h);

/* Bytes [off, off + n) of the rows at `dev` go to their home: across the link into host memory,
 * then (on_disk) written to the file at the same offset. A disk error is returned (naming the
 * file); the home's copy of those rows is then not valid. */
ig_status ig_act_home_store(ig_act_home *h, size_t off, const void *dev, size_t n, int on_disk,
                            ig_error *err);
/* The reverse: (on_disk) read from the file, then across the link into `dev`. */
ig_status ig_act_home_load(ig_act_home *h, size_t off, void *dev, size_t n, int on_disk,
                           ig_error *err);

ig_act_home_stats ig_act_home_get_stats(const ig_act_home *h);
void ig_act_home_reset_stats(ig_act_home *h);

#endif
