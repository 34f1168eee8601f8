/*
 * audit_cmd.c — `gangq audit --db PATH [--team T] [--job NS/NAME] [--since TIME]
 * [--limit N] [--json]`: print the store's audit log, oldest first.
 *
 * TIME is RFC3339 (2026-01-02T15:04:05Z, with optional fraction and offset),
 * a date (2026-01-02, midnight UTC), or a duration back from now (90s, 30m,
 * 1h, 2d, 1h30m). --limit keeps the most recent N matches. The database is
 * opened read-only and never modified. The table is printed in two passes over
 * the query (widths, then rows) so nothing is held in memory; --json prints
 * one JSON array.
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "cmd.h"
#include "gq.h"
#include "store.h"

#define AUDIT_COLS 7
#define AUDIT_MAX_WIDTH 48

static const char *const col_names[AUDIT_COLS] = {
    "TIME", "ACTOR", "ACTION", "TEAM", "JOB", "OLD \xe2\x86\x92 NEW", "REASON",
};

/* Display columns of a UTF-8 string (continuation bytes do not count). */
static size_t utf8_cols(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            n++;
    return n;
}

static void fmt_time(int64_t ms, char *out, size_t outlen, int with_ms)
{
    time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    struct tm tm;
    char base[32];
    if (!gmtime_r(&t, &tm) || !strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm)) {
        snprintf(out, outlen, "%lld", (long long)ms);
        return;
    }
    if (with_ms)
        snprintf(out, outlen, "%s.%03lldZ", base, (long long)(ms - (int64_t)t * 1000));
    else
        snprintf(out, outlen, "%sZ", base);
}

struct audit_out {
    size_t width[AUDIT_COLS];
    int64_t rows;
    int pass; /* 0 widths, 1 print */
    int json;
    struct gq_buf line;
};

static void cells(const struct store_audit *a, char tbuf[40], struct gq_buf *chg,
                  const char *cell[AUDIT_COLS])
{
    fmt_time(a->time_ms, tbuf, 40, 0);
    gq_buf_reset(chg);
    if (*a->old_value || *a->new_value) {
        gq_buf_puts(chg, *a->old_value ? a->old_value : "-");
        gq_buf_puts(chg, " \xe2\x86\x92 ");
        gq_buf_puts(chg, *a->new_value ? a->new_value : "-");
    }
    cell[0] = tbuf;
    cell[1] = a->actor;
    cell[2] = a->action;
    cell[3] = *a->team ? a->team : "-";
    cell[4] = *a->job_key ? a->job_key : "-";
    cell[5] = chg->p && chg->len ? chg->p : "-";
    cell[6] = *a->reason ? a->reason : "-";
}

static int table_cb(void *ctx, const struct store_audit *a)
{
    struct audit_out *o = ctx;
    char tbuf[40];
    const char *cell[AUDIT_COLS];
    struct gq_buf chg;
    int i;
    gq_buf_init(&chg, 64 * 1024);
    cells(a, tbuf, &chg, cell);
    if (o->pass == 0) {
        for (i = 0; i < AUDIT_COLS; i++) {
            size_t w = utf8_cols(cell[i]);
            if (w > AUDIT_MAX_WIDTH)
                w = AUDIT_MAX_WIDTH;
            if (w > o->width[i])
                o->width[i] = w;
        }
    } else {
        for (i = 0; i < AUDIT_COLS; i++) {
            size_t w = utf8_cols(cell[i]);
            fputs(cell[i], stdout);
            if (i + 1 < AUDIT_COLS)
                printf("%*s", (int)(o->width[i] > w ? o->width[i] - w : 0) + 2, "");
        }
        putchar('\n');
    }
    o->rows++;
    gq_buf_release(&chg);
    return 0;
}

static int json_cb(void *ctx, const struct store_audit *a)
{
    struct audit_out *o = ctx;
    struct gq_buf *b = &o->line;
    char tbuf[40];
    int rc;
    fmt_time(a->time_ms, tbuf, sizeof tbuf, 1);
    gq_buf_reset(b);
    rc = gq_buf_puts(b, o->rows ? ",\n  {" : "\n  {");
    rc = rc ? rc : gq_buf_printf(b, "\"id\":%lld,\"time\":\"%s\",\"time_ms\":%lld,\"actor\":",
                                 (long long)a->id, tbuf, (long long)a->time_ms);
    rc = rc ? rc : gq_buf_json_str(b, a->actor);
    rc = rc ? rc : gq_buf_puts(b, ",\"action\":");
    rc = rc ? rc : gq_buf_json_str(b, a->action);
    rc = rc ? rc : gq_buf_puts(b, ",\"team\":");
    rc = rc ? rc : gq_buf_json_str(b, a->team);
    rc = rc ? rc : gq_buf_puts(b, ",\"job\":");
    rc = rc ? rc : gq_buf_json_str(b, a->job_key);
    rc = rc ? rc : gq_buf_puts(b, ",\"old\":");
    rc = rc ? rc : gq_buf_json_str(b, a->old_value);
    rc = rc ? rc : gq_buf_puts(b, ",\"new\":");
    rc = rc ? rc : gq_buf_json_str(b, a->new_value);
    rc = rc ? rc : gq_buf_puts(b, ",\"reason\":");
    rc = rc ? rc : gq_buf_json_str(b, a->reason);
    rc = rc ? rc : gq_buf_puts(b, "}");
    if (rc) {
        fprintf(stderr, "gangq audit: entry %lld is too large to print\n", (long long)a->id);
        return rc;
    }
    fwrite(b->p, 1, b->len, stdout);
    o->rows++;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: gangq audit --db PATH [--team T] [--job NS/NAME] [--since TIME]"
               " [--limit N] [--json]\n"
               "  TIME: RFC3339 (2026-01-02T15:04:05Z), a date (2026-01-02) or a duration"
               " back from now (30m, 1h, 2d, 1h30m)\n");
}

int cmd_audit(int argc, char **argv)
{
    const char *db = NULL;
    struct store_audit_filter f = {0};
    struct store *st = NULL;
    struct audit_out o;
    char err[512] = "";
    int i, rc = 1, ret;

    memset(&o, 0, sizeof o);
    gq_buf_init(&o.line, 1024 * 1024);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) {
            o.json = 1;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            rc = 0;
            goto out;
        }
        if (strcmp(a, "--db") && strcmp(a, "--team") && strcmp(a, "--job") &&
            strcmp(a, "--since") && strcmp(a, "--limit")) {
            fprintf(stderr, "gangq audit: unknown option \"%s\"\n", a);
            usage(stderr);
            rc = 2;
            goto out;
        }
        if (!v || !*v) {
            fprintf(stderr, "gangq audit: %s needs a value\n", a);
            rc = 2;
            goto out;
        }
        i++;
        if (!strcmp(a, "--db")) {
            db = v;
        } else if (!strcmp(a, "--team")) {
            f.team = v;
        } else if (!strcmp(a, "--job")) {
            const char *slash = strchr(v, '/');
            if (!slash || slash == v || !slash[1] || strchr(slash + 1, '/')) {
                fprintf(stderr, "gangq audit: --job \"%s\": want NAMESPACE/NAME\n", v);
                rc = 2;
                goto out;
            }
            f.job_key = v;
        } else if (!strcmp(a, "--limit")) {
            if (gq_parse_i64(v, (size_t)-1, &f.limit) != 0 || f.limit <= 0) {
                fprintf(stderr, "gangq audit: --limit \"%s\": want a positive integer\n", v);
                rc = 2;
                goto out;
            }
        } else { /* --since */
            double d = 0;
            double wall = 0;
            if (gq_parse_rfc3339(v, 1, &wall) == 0) {
                f.since_ms = (int64_t)floor(wall * 1000.0 + 1e-6);
                if (f.since_ms <= 0)
                    f.since_ms = 1;
            } else if (gq_parse_duration(v, &d) == 0) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                f.since_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - (int64_t)(d * 1000);
                if (f.since_ms <= 0)
                    f.since_ms = 1;
            } else {
                fprintf(stderr, "gangq audit: --since \"%s\": want RFC3339 like"
                        " 2026-01-02T15:04:05Z, a date like 2026-01-02, or a duration like"
                        " 30m, 1h, 2d\n", v);
                rc = 2;
                goto out;
            }
        }
    }
    if (!db) {
        fprintf(stderr, "gangq audit: --db PATH is required\n");
        usage(stderr);
        rc = 2;
        goto out;
    }
    {
        struct store_opts so = {.readonly = 1};
        ret = store_open(db, &so, &st, err, sizeof err);
        if (ret) {
            fprintf(stderr, "gangq audit: --db: %s\n", err);
            goto out;
        }
    }
    if (o.json) {
        fputs("[", stdout);
        ret = store_audit_query(st, &f, json_cb, &o, err, sizeof err);
        fputs(o.rows ? "\n]\n" : "]\n", stdout);
    } else {
        for (i = 0; i < AUDIT_COLS; i++)
            o.width[i] = utf8_cols(col_names[i]);
        ret = store_audit_query(st, &f, table_cb, &o, err, sizeof err);
        if (ret == 0) {
            o.pass = 1;
            o.rows = 0;
            for (i = 0; i < AUDIT_COLS; i++) {
                fputs(col_names[i], stdout);
                if (i + 1 < AUDIT_COLS)
                    printf("%*s", (int)(o.width[i] - utf8_cols(col_names[i])) + 2, "");
            }
            putchar('\n');
            ret = store_audit_query(st, &f, table_cb, &o, err, sizeof err);
            if (ret == 0 && o.rows == 0)
                printf("(no audit entries match)\n");
        }
    }
    if (ret) {
        if (*err && ret != GQ_ELIMIT)
            fprintf(stderr, "gangq audit: %s\n", err);
        goto out;
    }
    rc = 0;
out:
    store_close(st);
    gq_buf_release(&o.line);
    return rc;
}
