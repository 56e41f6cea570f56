/* Bump allocation over 2 MiB-aligned anonymous mappings advised for transparent huge pages. */
#include "core/base/arena.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#define ARENA_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_HEAP 1
#endif
#endif
#ifndef ARENA_HEAP
#define ARENA_HEAP 0
#endif

#define ARENA_HUGE  ((size_t)2 << 20)  /* the x86-64 / arm64 PMD page */
#define ARENA_CHUNK ((size_t)32 << 20) /* small buffers share chunks of this size */

typedef struct arena_chunk {
    char *base;
    size_t size;
} arena_chunk;

struct ig_arena {
    arena_chunk *chunks; /* mappings, or (heap mode) one per buffer with size the buffer's */
    size_t n_chunks, cap_chunks;
    char *cur; /* the free tail of the last shared chunk */
    size_t left;
    size_t used;
};

ig_status ig_arena_create(ig_arena **out, ig_error *err) {
    *out = ig_calloc(1, sizeof **out, err);
    return *out ? IG_OK : IG_ERR_NOMEM;
}

void ig_arena_free(ig_arena *a) {
    if (!a) return;
    for (size_t i = 0; i < a->n_chunks; i++) {
        if (ARENA_HEAP)
            free(a->chunks[i].base);
        else
            munmap(a->chunks[i].base, a->chunks[i].size);
    }
    free(a->chunks);
    free(a);
}

static int push_chunk(ig_arena *a, char *base, size_t size) {
    if (a->n_chunks == a->cap_chunks) {
        size_t cap = a->cap_chunks ? 2 * a->cap_chunks : 16;
        arena_chunk *c = realloc(a->chunks, cap * sizeof *c);
        if (!c) return 0;
        a->chunks = c;
        a->cap_chunks = cap;
    }
    a->chunks[a->n_chunks++] = (arena_chunk){base, size};
    return 1;
}

/* A mapping of `size` bytes (a multiple of ARENA_HUGE) at a 2 MiB boundary, advised for huge
 * pages: map one huge page more than asked and unmap the unaligned ends. */
static char *map_aligned(size_t size) {
    size_t span = size + ARENA_HUGE;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uintptr_t start = ((uintptr_t)p + ARENA_HUGE - 1) & ~(uintptr_t)(ARENA_HUGE - 1);
    char *base = (char *)start;
    size_t head = (size_t)(base - p), tail = span - head - size;
    if (head) munmap(p, head);
    if (tail) munmap(base + size, tail);
#ifdef MADV_HUGEPAGE
    (void)madvise(base, size, MADV_HUGEPAGE); /* refused (THP off): 4 KiB pages, same contents */
#endif
    return base;
}

void *ig_arena_alloc(ig_arena *a, size_t bytes, ig_error *err) {
    if (bytes > SIZE_MAX / 2) {
        ig_error_set(err, IG_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    size_t need = bytes ? (bytes + 63) & ~(size_t)63 : 64; /* a 0-byte buffer is still distinct */
    if (ARENA_HEAP) {
        void *p = ig_aligned_alloc(bytes, err);
        if (!p) return NULL;
        memset(p, 0, need);
        if (!push_chunk(a, p, need)) {
            free(p);
            ig_error_set(err, IG_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
            return NULL;
        }
        a->used += need;
        return p;
    }
    if (need > a->left) {
        /* a buffer of half a chunk or more gets a mapping of its own; the shared chunk's tail
         * stays for the small ones */
        int own = need >= ARENA_CHUNK / 2;
        size_t size = own ? (need + ARENA_HUGE - 1) & ~(ARENA_HUGE - 1) : ARENA_CHUNK;
        char *base = map_aligned(size);
        if (!base || !push_chunk(a, base, size)) {
            if (base) munmap(base, size);
            ig_error_set(err, IG_ERR_NOMEM, "out of memory mapping %zu bytes for a %zu-byte buffer",
                         size, bytes);
            return NULL;
        }
        if (own) {
            a->used += need;
            return base;
        }
        a->cur = base;
        a->left = size;
    }
    void *p = a->cur;
    a->cur += need;
    a->left -= need;
    a->used += need;
    return p;
}

size_t ig_arena_used(const ig_arena *a) {
    return a ? a->used : 0;
}

static int overlaps(const ig_arena *a, uintptr_t lo, uintptr_t hi) {
    for (size_t i = 0; i < a->n_chunks; i++) {
        uintptr_t b = (uintptr_t)a->chunks[i].base;
        if (lo < b + a->chunks[i].size && b < hi) return 1;
    }
    return 0;
}

size_t ig_arena_huge_bytes(const ig_arena *a) {
    if (!a || ARENA_HEAP || a->n_chunks == 0) return 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    char line[512];
    int mine = 0;
    size_t total = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi, kb;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
            mine = overlaps(a, (uintptr_t)lo, (uintptr_t)hi);
        } else if (mine && sscanf(line, "AnonHugePages: %lu kB", &kb) == 1) {
            total += (size_t)kb * 1024;
        }
    }
    fclose(f);
    return total;
}
