/* metrics.c — see metrics.h. */
#include "metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double gq_metrics_default_bounds[] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};
const size_t gq_metrics_default_nbounds = GQ_ARRAY_LEN(gq_metrics_default_bounds);

/* Rendered label text: up to MAX_LABELS pairs of name="escaped value", each
 * value escaping to at most 2x its length, plus separators. */
#define LABELS_TEXT_MAX (GQ_METRICS_MAX_LABELS * (GQ_METRICS_NAME_MAX + 2 * GQ_METRICS_LABEL_MAX + 4) + 1)

struct family {
    char name[GQ_METRICS_NAME_MAX + 1];
    char help[GQ_METRICS_HELP_MAX + 1];
    enum gq_metric_type type;
    size_t nbounds;
    double bounds[GQ_METRICS_MAX_BUCKETS];
};

struct gq_metric {
    struct family *fam;
    char labels[LABELS_TEXT_MAX]; /* `a="x",b="y"` without braces; "" if none */
    double value;                 /* counter/gauge value, histogram sum */
    uint64_t count;               /* histogram sample count */
    uint64_t buckets[GQ_METRICS_MAX_BUCKETS]; /* non-cumulative per bound */
};

struct gq_metrics {
    struct family *fams[GQ_METRICS_MAX_FAMILIES];
    size_t nfams;
    struct gq_metric *series[GQ_METRICS_MAX_SERIES];
    size_t nseries;
};

struct gq_metrics *gq_metrics_new(void)
{
    return calloc(1, sizeof(struct gq_metrics));
}

void gq_metrics_free(struct gq_metrics *m)
{
    size_t i;
    if (!m)
        return;
    for (i = 0; i < m->nseries; i++)
        free(m->series[i]);
    for (i = 0; i < m->nfams; i++)
        free(m->fams[i]);
    free(m);
}

static int valid_name(const char *s, int colon_ok)
{
    size_t i;
    if (!s || !s[0])
        return 0;
    for (i = 0; s[i]; i++) {
        char c = s[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                    (colon_ok && c == ':');
        int digit = c >= '0' && c <= '9';
        if (!alpha && !(digit && i > 0))
            return 0;
    }
    return 1;
}

/* Append s to dst (bounded, dst has room dstmax incl. NUL) escaping \ " \n. */
static int esc_label(char *dst, size_t *len, size_t dstmax, const char *s)
{
    for (; *s; s++) {
        const char *rep = NULL;
        char one[2] = {*s, 0};
        size_t n;
        if (*s == '\\')
            rep = "\\\\";
        else if (*s == '"')
            rep = "\\\"";
        else if (*s == '\n')
            rep = "\\n";
        else
            rep = one;
        n = strlen(rep);
        if (*len + n + 1 > dstmax)
            return GQ_ELIMIT;
        memcpy(dst + *len, rep, n);
        *len += n;
        dst[*len] = '\0';
    }
    return GQ_OK;
}

static int put(char *dst, size_t *len, size_t dstmax, const char *s)
{
    size_t n = strlen(s);
    if (*len + n + 1 > dstmax)
        return GQ_ELIMIT;
    memcpy(dst + *len, s, n + 1);
    *len += n;
    return GQ_OK;
}

static int build_labels(const char *const *labels, char *out, size_t outmax,
                        char *err, size_t errlen)
{
    size_t len = 0, n = 0, i, j;
    int rc = GQ_OK;
    out[0] = '\0';
    for (i = 0; labels && !rc && labels[i]; i += 2) {
        const char *k = labels[i], *v = labels[i + 1];
        if (!v) {
            gq_errf(err, errlen, "label %s has no value (odd label array)", k);
            rc = GQ_EINVAL;
        } else if (++n > GQ_METRICS_MAX_LABELS) {
            gq_errf(err, errlen, "more than %d label pairs", GQ_METRICS_MAX_LABELS);
            rc = GQ_ELIMIT;
        } else if (!valid_name(k, 0) || strlen(k) > GQ_METRICS_NAME_MAX) {
            gq_errf(err, errlen, "bad label name \"%.64s\"", k);
            rc = GQ_EINVAL;
        } else if (strncmp(k, "__", 2) == 0 || strcmp(k, "le") == 0) {
            gq_errf(err, errlen, "label name \"%s\" is reserved", k);
            rc = GQ_EINVAL;
        } else if (strlen(v) > GQ_METRICS_LABEL_MAX) {
            gq_errf(err, errlen, "label %s value longer than %d bytes", k,
                    GQ_METRICS_LABEL_MAX);
            rc = GQ_ELIMIT;
        }
        for (j = 0; j < i && !rc; j += 2) {
            if (strcmp(labels[j], k) == 0) {
                gq_errf(err, errlen, "label \"%s\" given twice", k);
                rc = GQ_EINVAL;
            }
        }
        if (!rc && ((i && put(out, &len, outmax, ",")) || put(out, &len, outmax, k) ||
                    put(out, &len, outmax, "=\"") || esc_label(out, &len, outmax, v) ||
                    put(out, &len, outmax, "\""))) {
            gq_errf(err, errlen, "labels too long");
            rc = GQ_ELIMIT;
        }
    }
    return rc;
}

/* Check the name, help and bounds of a registration. */
static int check_reg(enum gq_metric_type type, const char *name, const char *help,
                     const double *bounds, size_t nbounds, char *err, size_t errlen)
{
    size_t i;
    int rc = GQ_OK;
    if (!valid_name(name, 1) || strlen(name) > GQ_METRICS_NAME_MAX) {
        gq_errf(err, errlen, "bad metric name \"%.64s\"", name ? name : "(null)");
        rc = GQ_EINVAL;
    } else if (strlen(help) > GQ_METRICS_HELP_MAX) {
        gq_errf(err, errlen, "%s: help longer than %d bytes", name, GQ_METRICS_HELP_MAX);
        rc = GQ_ELIMIT;
    } else if (type == GQ_METRIC_HISTOGRAM && nbounds > GQ_METRICS_MAX_BUCKETS) {
        gq_errf(err, errlen, "%s: more than %d buckets", name, GQ_METRICS_MAX_BUCKETS);
        rc = GQ_ELIMIT;
    }
    for (i = 0; type == GQ_METRIC_HISTOGRAM && i < nbounds && !rc; i++) {
        if (!isfinite(bounds[i]) || (i && !(bounds[i] > bounds[i - 1]))) {
            gq_errf(err, errlen, "%s: bucket bounds must be finite and increasing", name);
            rc = GQ_EINVAL;
        }
    }
    return rc;
}

static int reg(struct gq_metrics *m, enum gq_metric_type type, const char *name,
               const char *help, const char *const *labels, const double *bounds,
               size_t nbounds, struct gq_metric **out, char *err, size_t errlen)
{
    char lbl[LABELS_TEXT_MAX];
    struct family *fam = NULL, *newfam = NULL;
    struct gq_metric *s = NULL;
    size_t i;
    int rc;

    if (out)
        *out = NULL;
    if (!m || !out) {
        gq_errf(err, errlen, "metrics: NULL registry or out");
        rc = GQ_EINVAL;
        goto out;
    }
    if (!help)
        help = "";
    if (type != GQ_METRIC_HISTOGRAM) {
        bounds = NULL;
        nbounds = 0;
    } else if (!bounds || nbounds == 0) {
        bounds = gq_metrics_default_bounds;
        nbounds = gq_metrics_default_nbounds;
    }
    rc = check_reg(type, name, help, bounds, nbounds, err, errlen);
    if (rc)
        goto out;
    rc = build_labels(labels, lbl, sizeof lbl, err, errlen);
    if (rc)
        goto out;

    for (i = 0; i < m->nfams && !fam; i++)
        if (strcmp(m->fams[i]->name, name) == 0)
            fam = m->fams[i];
    if (fam && (fam->type != type || fam->nbounds != nbounds ||
                (nbounds && memcmp(fam->bounds, bounds, nbounds * sizeof(double)) != 0))) {
        gq_errf(err, errlen, "%s: registered before with another type or buckets", name);
        rc = GQ_EINVAL;
        goto out;
    }
    for (i = 0; fam && i < m->nseries; i++) {
        if (m->series[i]->fam == fam && strcmp(m->series[i]->labels, lbl) == 0) {
            *out = m->series[i]; /* same name + labels: same handle */
            goto out;
        }
    }
    if (m->nseries >= GQ_METRICS_MAX_SERIES) {
        gq_errf(err, errlen, "%s: more than %d series", name, GQ_METRICS_MAX_SERIES);
        rc = GQ_ELIMIT;
        goto out;
    }
    if (!fam && m->nfams >= GQ_METRICS_MAX_FAMILIES) {
        gq_errf(err, errlen, "%s: more than %d metric names", name, GQ_METRICS_MAX_FAMILIES);
        rc = GQ_ELIMIT;
        goto out;
    }
    s = calloc(1, sizeof *s);
    if (!fam)
        fam = newfam = calloc(1, sizeof *fam);
    if (!s || !fam) {
        gq_errf(err, errlen, "%s: out of memory", name);
        rc = GQ_ENOMEM;
        goto out;
    }
    if (newfam) {
        gq_strlcpy(newfam->name, name, sizeof newfam->name);
        gq_strlcpy(newfam->help, help, sizeof newfam->help);
        newfam->type = type;
        newfam->nbounds = nbounds;
        if (nbounds)
            memcpy(newfam->bounds, bounds, nbounds * sizeof(double));
        m->fams[m->nfams++] = newfam;
        newfam = NULL;
    }
    s->fam = fam;
    gq_strlcpy(s->labels, lbl, sizeof s->labels);
    m->series[m->nseries++] = s;
    *out = s;
    s = NULL;
out:
    free(s);
    free(newfam);
    return rc;
}

int gq_metrics_counter(struct gq_metrics *m, const char *name, const char *help,
                       const char *const *labels, struct gq_metric **out,
                       char *err, size_t errlen)
{
    return reg(m, GQ_METRIC_COUNTER, name, help, labels, NULL, 0, out, err, errlen);
}

int gq_metrics_gauge(struct gq_metrics *m, const char *name, const char *help,
                     const char *const *labels, struct gq_metric **out,
                     char *err, size_t errlen)
{
    return reg(m, GQ_METRIC_GAUGE, name, help, labels, NULL, 0, out, err, errlen);
}

int gq_metrics_histogram(struct gq_metrics *m, const char *name, const char *help,
                         const char *const *labels, const double *bounds,
                         size_t nbounds, struct gq_metric **out,
                         char *err, size_t errlen)
{
    return reg(m, GQ_METRIC_HISTOGRAM, name, help, labels, bounds, nbounds, out, err,
               errlen);
}

void gq_metrics_add(struct gq_metric *h, double delta)
{
    if (!h || isnan(delta))
        return;
    if (h->fam->type == GQ_METRIC_GAUGE)
        h->value += delta;
    else if (h->fam->type == GQ_METRIC_COUNTER && delta >= 0)
        h->value += delta;
}

void gq_metrics_inc(struct gq_metric *h)
{
    gq_metrics_add(h, 1);
}

void gq_metrics_dec(struct gq_metric *h)
{
    if (h && h->fam->type == GQ_METRIC_GAUGE)
        h->value -= 1;
}

void gq_metrics_set(struct gq_metric *h, double v)
{
    if (h && h->fam->type == GQ_METRIC_GAUGE)
        h->value = v;
}

void gq_metrics_observe(struct gq_metric *h, double v)
{
    size_t i;
    if (!h || h->fam->type != GQ_METRIC_HISTOGRAM || isnan(v))
        return;
    for (i = 0; i < h->fam->nbounds; i++) {
        if (v <= h->fam->bounds[i]) {
            h->buckets[i]++;
            break;
        }
    }
    h->count++;
    h->value += v;
}

double gq_metrics_value(const struct gq_metric *h)
{
    if (!h)
        return 0;
    if (h->fam->type == GQ_METRIC_HISTOGRAM)
        return (double)h->count;
    return h->value;
}

/* Shortest of %.15g/%.17g that round-trips; Prometheus spellings for
 * infinities and NaN. */
static void fmt_num(char *dst, size_t n, double v)
{
    if (isnan(v)) {
        gq_strlcpy(dst, "NaN", n);
    } else if (isinf(v)) {
        gq_strlcpy(dst, v > 0 ? "+Inf" : "-Inf", n);
    } else {
        snprintf(dst, n, "%.15g", v);
        if (strtod(dst, NULL) != v)
            snprintf(dst, n, "%.17g", v);
    }
}

static int put_help(struct gq_buf *b, const char *s)
{
    int rc = GQ_OK;
    for (; *s && !rc; s++) {
        if (*s == '\\')
            rc = gq_buf_puts(b, "\\\\");
        else if (*s == '\n')
            rc = gq_buf_puts(b, "\\n");
        else
            rc = gq_buf_append(b, s, 1);
    }
    return rc;
}

static const char *type_name(enum gq_metric_type t)
{
    switch (t) {
    case GQ_METRIC_COUNTER: return "counter";
    case GQ_METRIC_GAUGE: return "gauge";
    case GQ_METRIC_HISTOGRAM: return "histogram";
    }
    return "untyped";
}

static int render_hist(const struct gq_metric *s, struct gq_buf *b)
{
    const struct family *f = s->fam;
    const char *sep = s->labels[0] ? "," : "";
    char num[64];
    uint64_t cum = 0;
    size_t i;
    int rc = GQ_OK;

    for (i = 0; i < f->nbounds && !rc; i++) {
        cum += s->buckets[i];
        fmt_num(num, sizeof num, f->bounds[i]);
        rc = gq_buf_printf(b, "%s_bucket{%s%sle=\"%s\"} %llu\n", f->name, s->labels, sep,
                           num, (unsigned long long)cum);
    }
    if (!rc)
        rc = gq_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", f->name, s->labels, sep,
                           (unsigned long long)s->count);
    fmt_num(num, sizeof num, s->value);
    if (!rc)
        rc = gq_buf_printf(b, "%s_sum%s%s%s %s\n", f->name, s->labels[0] ? "{" : "",
                           s->labels, s->labels[0] ? "}" : "", num);
    if (!rc)
        rc = gq_buf_printf(b, "%s_count%s%s%s %llu\n", f->name, s->labels[0] ? "{" : "",
                           s->labels, s->labels[0] ? "}" : "",
                           (unsigned long long)s->count);
    return rc;
}

int gq_metrics_render(const struct gq_metrics *m, struct gq_buf *b)
{
    size_t fi, si;
    char num[64];
    int rc = GQ_OK;

    if (!m || !b)
        return GQ_EINVAL;
    for (fi = 0; fi < m->nfams && !rc; fi++) {
        const struct family *f = m->fams[fi];
        if (f->help[0]) { /* like the Go client: no HELP line without help text */
            rc = gq_buf_printf(b, "# HELP %s ", f->name);
            if (!rc)
                rc = put_help(b, f->help);
            if (!rc)
                rc = gq_buf_puts(b, "\n");
        }
        if (!rc)
            rc = gq_buf_printf(b, "# TYPE %s %s\n", f->name, type_name(f->type));
        for (si = 0; si < m->nseries && !rc; si++) {
            const struct gq_metric *s = m->series[si];
            if (s->fam != f)
                continue;
            if (f->type == GQ_METRIC_HISTOGRAM) {
                rc = render_hist(s, b);
            } else {
                fmt_num(num, sizeof num, s->value);
                rc = gq_buf_printf(b, "%s%s%s%s %s\n", f->name, s->labels[0] ? "{" : "",
                                   s->labels, s->labels[0] ? "}" : "", num);
            }
        }
    }
    return rc;
}
