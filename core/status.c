/* Status codes and error messages. */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ig_status ig_error_set(ig_error *err, ig_status code, const char *fmt, ...) {
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void ig_error_prefix(ig_error *err, const char *fmt, ...) {
    if (!err) return;
    char head[IG_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    size_t hl = strlen(head), ol = strnlen(err->msg, sizeof err->msg - 1);
    if (hl > sizeof err->msg - 1) hl = sizeof err->msg - 1;
    if (hl + ol > sizeof err->msg - 1) ol = sizeof err->msg - 1 - hl;
    memmove(err->msg + hl, err->msg, ol);
    memcpy(err->msg, head, hl);
    err->msg[hl + ol] = '\0';
}

void ig_error_clear(ig_error *err) {
    if (!err) return;
    err->code = IG_OK;
    err->msg[0] = '\0';
}

const char *ig_status_to_string(ig_status code) {
    switch (code) {
    case IG_OK:
        return "ok";
    case IG_ERR_INVALID_ARG:
        return "invalid argument";
    case IG_ERR_IO:
        return "I/O error";
    case IG_ERR_FORMAT:
        return "malformed input";
    case IG_ERR_NOMEM:
        return "out of memory";
    case IG_ERR_UNSUPPORTED:
        return "unsupported";
    case IG_ERR_SHAPE:
        return "wrong shape or type";
    case IG_ERR_CAPACITY:
        return "does not fit";
    case IG_ERR_DEVICE:
        return "device error";
    case IG_ERR_NOT_FOUND:
        return "not found";
    case IG_ERR_INTERNAL:
        return "internal error";
    }
    return "unknown status";
}

void ig_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "igen: internal invariant broken: %s at %s:%d\n", expr, file, line);
    abort();
}

void *ig_malloc(size_t n, ig_error *err) {
    void *p = malloc(n ? n : 1);
    if (!p) ig_error_set(err, IG_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return p;
}

void *ig_calloc(size_t count, size_t size, ig_error *err) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        ig_error_set(err, IG_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

void *ig_aligned_alloc(size_t n, ig_error *err) {
    size_t rounded = (n + 63) & ~(size_t)63;
    void *p = NULL;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) p = NULL;
    if (!p) ig_error_set(err, IG_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return p;
}
