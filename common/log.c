#include "log.h"
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *names[] = {"debug", "info", "warn", "error"};

int gq_log_level_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

void gq_log(int threshold, int level, const char *mod, const char *msg, const char *kvfmt, ...)
{
    char ts[40], line[2048];
    struct timespec now;
    struct tm tm;
    size_t n = 0;
    if (level < threshold || level < 0 || level > 3)
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    n = (size_t)snprintf(line, sizeof line, "ts=%s.%03ldZ level=%s mod=%s msg=\"", ts,
                         now.tv_nsec / 1000000, names[level], mod ? mod : "-");
    for (const char *p = msg ? msg : ""; *p && n + 4 < sizeof line; p++) {
        if (*p == '"' || *p == '\\')
            line[n++] = '\\';
        line[n++] = (*p == '\n') ? ' ' : *p;
    }
    if (n + 1 < sizeof line)
        line[n++] = '"';
    line[n] = '\0';
    if (kvfmt && n + 2 < sizeof line) {
        va_list ap;
        line[n++] = ' ';
        va_start(ap, kvfmt);
        vsnprintf(line + n, sizeof line - n, kvfmt, ap);
        va_end(ap);
    }
    fprintf(stderr, "%s\n", line);
}
