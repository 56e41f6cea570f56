/* Logging and timing. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_level = -1;

static int level_from_env(void) {
    const char *s = getenv("IG_LOG");
    if (!s) return IG_LOG_WARN;
    if (!strcmp(s, "error")) return IG_LOG_ERROR;
    if (!strcmp(s, "info")) return IG_LOG_INFO;
    if (!strcmp(s, "debug")) return IG_LOG_DEBUG;
    return IG_LOG_WARN;
}

void ig_log_set_level(ig_log_level level) {
    g_level = (int)level;
}

ig_log_level ig_log_get_level(void) {
    if (g_level < 0) g_level = level_from_env();
    return (ig_log_level)g_level;
}

void ig_log(ig_log_level level, const char *fmt, ...) {
    if ((int)level > (int)ig_log_get_level()) return;
    static const char *names[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "igen: %s: ", names[level]);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

double ig_time_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
