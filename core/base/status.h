/* One status type for every recoverable failure in igen, with a message the caller can print.
 * Functions return an ig_status (0 = success, negative = error) and fill an optional ig_error.
 * Programmer errors (broken invariants) use IG_ASSERT and abort; resource and input errors never
 * do. */
#ifndef IG_STATUS_H
#define IG_STATUS_H

#include <stddef.h>

typedef enum ig_status {
    IG_OK = 0,
    IG_ERR_INVALID_ARG = -1, /* bad argument or option from the user */
    IG_ERR_IO = -2,          /* open/read/write/mmap failed */
    IG_ERR_FORMAT = -3,      /* a file does not parse or is truncated */
    IG_ERR_NOMEM = -4,       /* allocation failed */
    IG_ERR_UNSUPPORTED = -5, /* valid input that igen does not handle (architecture, type) */
    IG_ERR_SHAPE = -6,       /* a tensor of the wrong shape or dtype */
    IG_ERR_CAPACITY = -7,    /* does not fit (tier, batch, context) */
    IG_ERR_DEVICE = -8,      /* accelerator failure */
    IG_ERR_NOT_FOUND = -9,   /* missing key, tensor, file */
    IG_ERR_INTERNAL = -10,
} ig_status;

#define IG_ERROR_MSG_MAX 1024

typedef struct ig_error {
    ig_status code;
    char msg[IG_ERROR_MSG_MAX];
} ig_error;

/* Records the error (if err is not NULL) and returns code, so that `return ig_error_set(...)`
 * works. */
ig_status ig_error_set(ig_error *err, ig_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepends context ("while loading X: ") to an error already set. */
void ig_error_prefix(ig_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copies `in` to out (n bytes, NUL-terminated, cut to fit) safe for a terminal and one line: C0
 * and C1 control characters (newline and tab too) and bytes that are not UTF-8 become escapes
 * (\n, \t, \xNN); other UTF-8 text is kept. ig_error_set and ig_error_prefix apply it to every
 * message, since messages quote input. */
void ig_text_term_safe(const char *in, char *out, size_t n);
/* Length (1-4) of the well-formed UTF-8 sequence at s, with its code point in *cp; 0 if the bytes
 * there are not UTF-8 (a NUL ends any sequence, so a NUL-terminated string is never read past). */
size_t ig_utf8_seq(const unsigned char *s, unsigned *cp);
void ig_error_clear(ig_error *err);
const char *ig_status_to_string(ig_status code);

void ig_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define IG_ASSERT(x) ((x) ? (void)0 : ig_assert_fail(#x, __FILE__, __LINE__))

/* Propagate a non-OK status. */
#define IG_TRY(expr)                                                                               \
    do {                                                                                           \
        ig_status ig_try_rc_ = (expr);                                                             \
        if (ig_try_rc_ != IG_OK) return ig_try_rc_;                                                \
    } while (0)

/* Allocation helpers that never return NULL silently: they set err and return NULL. */
void *ig_malloc(size_t n, ig_error *err);
void *ig_calloc(size_t count, size_t size, ig_error *err);
/* 64-byte aligned allocation (for SIMD and DMA); free with free(). */
void *ig_aligned_alloc(size_t n, ig_error *err);

#endif
