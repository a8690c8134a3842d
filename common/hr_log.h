/* hr_log: structured log lines on stderr, one event per line.
 *
 * A call names an event and gives its fields as a printf fragment of
 * key=value pairs:
 *
 *     hr_log_info("task_claimed", "task=%lld lag_ms=%d", id, lag);
 *
 * The level is tested before the arguments are evaluated (hr_log_* are
 * macros), so a disabled debug line costs one comparison.  Every line gets
 * ts=, level=, instance= and event= first.  The fragment is split on " key="
 * boundaries and re-emitted quoted as logfmt or as one JSON object, so a
 * value may carry spaces or quotes (an error string) without breaking either
 * format.  Lines are written with one write(2), so threads do not interleave
 * inside a line.  Secrets must never be passed as values. */
#ifndef HR_LOG_H
#define HR_LOG_H

#include <stddef.h>

typedef enum hr_log_format { HR_LOG_FORMAT_LOGFMT = 0, HR_LOG_FORMAT_JSON = 1 } hr_log_format;

typedef enum hr_log_level {
    HR_LOG_DEBUG = 0,
    HR_LOG_INFO = 1,
    HR_LOG_WARN = 2,
    HR_LOG_ERROR = 3,
} hr_log_level;

extern int hr_log_min_level;

/* Sets level, format and instance (copied; at most 127 bytes kept). */
void hr_log_setup(int level, hr_log_format format, const char *instance);

/* "debug" | "info" | "warn" | "error" -> level, or -1. */
int hr_log_level_parse(const char *name);

void hr_log_emit(int level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define hr_log_at(lvl, event, ...)                    \
    do {                                              \
        if ((lvl) >= hr_log_min_level)                \
            hr_log_emit((lvl), (event), __VA_ARGS__); \
    } while (0)
#define hr_log_debug(event, ...) hr_log_at(HR_LOG_DEBUG, event, __VA_ARGS__)
#define hr_log_info(event, ...) hr_log_at(HR_LOG_INFO, event, __VA_ARGS__)
#define hr_log_warn(event, ...) hr_log_at(HR_LOG_WARN, event, __VA_ARGS__)
#define hr_log_error(event, ...) hr_log_at(HR_LOG_ERROR, event, __VA_ARGS__)

/* Formats the line that hr_log_emit would write into BUF (for tests);
 * returns its length, truncated to LEN-1. */
size_t hr_log_format_line(char *buf, size_t len, int level, const char *event, const char *fields);

#endif
