/* Long-lived buffers (a model's weights) carved out of a few large anonymous mappings that ask the
 * kernel for transparent huge pages (madvise MADV_HUGEPAGE). A decode step streams every weight
 * once: on 4 KiB pages that is a TLB miss and a page walk every 4 KiB and hardware prefetch that
 * stops at each page; 2 MiB pages take both away (measured in docs/results/compressed_weights.md).
 * Whether the pages really are huge is the kernel's decision (THP off, fragmented memory): the
 * arena still works, and ig_arena_huge_bytes says what was granted. Buffers are freed all at once
 * with the arena. Built with AddressSanitizer, each buffer is its own heap allocation instead, so
 * overruns between buffers are still caught. */
#ifndef IG_ARENA_H
#define IG_ARENA_H

#include <stddef.h>

#include "core/base/status.h"

typedef struct ig_arena ig_arena;

ig_status ig_arena_create(ig_arena **out, ig_error *err);
/* Frees every buffer of the arena. NULL is a no-op. */
void ig_arena_free(ig_arena *a);
/* A buffer of `bytes` (0 is allowed), 64-byte aligned, zeroed, valid until ig_arena_free.
 * IG_ERR_NOMEM naming the size when the memory cannot be had. */
void *ig_arena_alloc(ig_arena *a, size_t bytes, ig_error *err);
/* Bytes handed out (each buffer rounded up to a multiple of 64, at least 64). */
size_t ig_arena_used(const ig_arena *a);
/* Bytes of the arena's mappings that the kernel backs with huge pages right now (from
 * /proc/self/smaps; 0 where unreadable, under AddressSanitizer, or when THP is off). */
size_t ig_arena_huge_bytes(const ig_arena *a);

#endif
