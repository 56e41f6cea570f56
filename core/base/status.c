/* Status codes and error messages. */
#include "core/base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t ig_utf8_seq(const unsigned char *s, unsigned *cp) {
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, *cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, *cp = c & 0x0F, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, *cp = c & 0x07, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    for (size_t i = 1; i < len; i++) {
        unsigned b = s[i];
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) return 0;
        *cp = (*cp << 6) | (b & 0x3F);
    }
    return len;
}

void ig_text_term_safe(const char *in, char *out, size_t n) {
    if (!n) return;
    size_t o = 0;
    const unsigned char *s = (const unsigned char *)in;
    while (*s && o + 5 < n) {
        unsigned cp = *s;
        size_t len = ig_utf8_seq(s, &cp);
        if (len == 0 || cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F)) {
            /* a control character (a newline too: messages are one line) or a byte that is not
             * UTF-8: shown as an escape, never sent to the terminal */
            if (len == 1 && (cp == '\n' || cp == '\t' || cp == '\r'))
                o += (size_t)snprintf(out + o, n - o, "\\%c",
                                      cp == '\n'   ? 'n'
                                      : cp == '\t' ? 't'
                                                   : 'r');
            else
                for (size_t k = 0; k < (len ? len : 1) && o + 5 < n; k++)
                    o += (size_t)snprintf(out + o, n - o, "\\x%02X", s[k]);
            s += len ? len : 1;
            continue;
        }
        memcpy(out + o, s, len);
        o += len;
        s += len;
    }
    out[o] = '\0';
}

/* Messages come from input (names, keys, file contents): keep them one terminal-safe line. */
static void msg_safe(ig_error *err) {
    const unsigned char *p = (const unsigned char *)err->msg;
    for (; *p; p++)
        if (*p < 0x20 || *p >= 0x7F) break;
    if (!*p) return;
    char tmp[IG_ERROR_MSG_MAX];
    ig_text_term_safe(err->msg, tmp, sizeof tmp);
    memcpy(err->msg, tmp, strlen(tmp) + 1);
}

ig_status ig_error_set(ig_error *err, ig_status code, const char *fmt, ...) {
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        msg_safe(err);
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
    msg_safe(err);
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
