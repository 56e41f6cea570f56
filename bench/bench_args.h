/* Strict numeric options for the bench programs: a value that is not a number in range ends the
 * program with a message naming the program and the option, and exit status 2 (atoi would have
 * read "abc" as 0 and "8x" as 8). */
#ifndef IG_BENCH_ARGS_H
#define IG_BENCH_ARGS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static inline long ig_bench_long(const char *prog, const char *opt, const char *s, long lo,
                                 long hi) {
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: %s: '%s' is not an integer in %ld..%ld\n", prog, opt, s ? s : "", lo,
                hi);
        exit(2);
    }
    return v;
}

static inline double ig_bench_double(const char *prog, const char *opt, const char *s, double lo,
                                     double hi) {
    char *end = NULL;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "%s: %s: '%s' is not a number in [%g, %g]\n", prog, opt, s ? s : "", lo,
                hi);
        exit(2);
    }
    return v;
}

#endif
