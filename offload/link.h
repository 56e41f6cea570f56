/* The link model: on the CPU backend, copies between the device region and host memory are plain
 * memcpy, far faster than a PCIe link. With the model on, each copy takes at least
 * latency + bytes / bandwidth (per direction), so the compute-to-transfer ratio of a GPU machine
 * can be studied on any machine. Off, copies run at memory speed. Results record whether it was on.
 */
#ifndef IG_LINK_H
#define IG_LINK_H

#include <stddef.h>

#include "core/base/status.h"

typedef enum ig_link_dir {
    IG_LINK_H2D = 0, /* host -> device */
    IG_LINK_D2H = 1, /* device -> host */
} ig_link_dir;

typedef struct ig_link_model {
    int on;
    double gbps[2];      /* bandwidth per direction, 1e9 bytes/s */
    double latency_s[2]; /* fixed cost per copy, per direction */
} ig_link_model;

/* Parses "h2d=GBPS,d2h=GBPS[,lat=US][,h2d_lat=US][,d2h_lat=US]" (a single number "GBPS" sets both
 * directions); "off" or "" turns the model off. Errors name the offending field. */
ig_status ig_link_parse(const char *spec, ig_link_model *out, ig_error *err);
/* "off" or "h2d 12.0 GB/s + 10 us, d2h 12.0 GB/s + 10 us". */
const char *ig_link_describe(const ig_link_model *m, char *buf, size_t n);
/* Seconds the model says a copy of `bytes` takes (0 when off). */
double ig_link_time(const ig_link_model *m, ig_link_dir dir, size_t bytes);
/* Copies n bytes and, with the model on, returns no earlier than the modelled time after the call
 * started (sleeping, then spinning the last stretch for precision). m may be NULL (plain copy).
 * Returns the seconds the call took. */
double ig_link_copy(const ig_link_model *m, ig_link_dir dir, void *dst, const void *src, size_t n);
/* Waits until `t0 + ig_link_time(m, dir, bytes)` (ig_time_s clock): for a transfer made of several
 * pieces (a disk read, then a copy) that must take the modelled time as a whole. */
void ig_link_wait_until(double deadline_s);

#endif
