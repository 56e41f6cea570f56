/* Logging and timing. */
#include "core/base/log.h"
#include "core/base/status.h"

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
    char msg[2048], safe[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ig_text_term_safe(msg, safe, sizeof safe); /* warnings quote input too */
    fprintf(stderr, "igen: %s: %s\n", names[level], safe);
}

double ig_time_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
