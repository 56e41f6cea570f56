/* Leveled logging to stderr. Level from IG_LOG (error|warn|info|debug) or ig_log_set_level(). */
#ifndef IG_LOG_H
#define IG_LOG_H

typedef enum ig_log_level {
    IG_LOG_ERROR = 0,
    IG_LOG_WARN = 1,
    IG_LOG_INFO = 2,
    IG_LOG_DEBUG = 3,
} ig_log_level;

void ig_log_set_level(ig_log_level level);
ig_log_level ig_log_get_level(void);
void ig_log(ig_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define IG_WARN(...)  ig_log(IG_LOG_WARN, __VA_ARGS__)
#define IG_INFO(...)  ig_log(IG_LOG_INFO, __VA_ARGS__)
#define IG_DEBUG(...) ig_log(IG_LOG_DEBUG, __VA_ARGS__)

/* Monotonic clock in seconds. */
double ig_time_s(void);

#endif
