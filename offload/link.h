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
/* The link as a DMA engine with one clock (*free_at: when it ends the transfers scheduled so far,
 * 0 at first): a transfer of `bytes` issued at t_issue starts then or when the link is free,
 * whichever is later (*started), and its bytes are there latency + bytes / bandwidth after that,
 * or at t_copied (when the issuer's own copy of them ended) if later. Returns that moment and
 * advances *free_at. With no bytes, or the model off or NULL: t_copied, *started = t_issue,
 * *free_at unchanged. The issuing thread (a transfer queue's) goes on; the thread that needs the
 * bytes waits with ig_link_wait_until, so that no thread sleeps and wakes on the link's behalf
 * beside the compute threads (docs/ARCHITECTURE.md, the link model). started may be NULL. */
double ig_link_schedule(const ig_link_model *m, ig_link_dir dir, double *free_at, double t_issue,
                        size_t bytes, double t_copied, double *started);

#endif
