/*
 * log.h — one line per event, logfmt: `ts=... level=info mod=kube msg="..." k=v`.
 * Readable by people, parseable by machines. Writes to stderr. The level
 * threshold lives in the caller's context and is passed in (no hidden globals):
 * callers keep a `int log_level` and test it with gq_log_on().
 */
#ifndef GQ_LOG_H
#define GQ_LOG_H

enum gq_log_level { GQ_LOG_DEBUG = 0, GQ_LOG_INFO = 1, GQ_LOG_WARN = 2, GQ_LOG_ERROR = 3 };

#define gq_log_on(threshold, lvl) ((lvl) >= (threshold))

/* msg is free text (quoted and escaped); fmt/... append extra ` k=v` pairs
 * verbatim (may be NULL). */
void gq_log(int threshold, int level, const char *mod, const char *msg,
            const char *kvfmt, ...) __attribute__((format(printf, 5, 6)));

/* Parse "debug|info|warn|error"; returns -1 when unknown. */
int gq_log_level_parse(const char *s);

#endif
