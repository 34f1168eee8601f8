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
 * value escaping to at most 3x its length (an invalid UTF-8 byte becomes the
 * 3-byte U+FFFD), plus separators. */
#define LABELS_TEXT_MAX (GQ_METRICS_MAX_LABELS * (GQ_METRICS_NAME_MAX + 3 * GQ_METRICS_LABEL_MAX + 4) + 1)

/* Hash buckets of the series index (name + label text): a power of two. */
#define HBUCKETS 8192

struct family {
    char name[GQ_METRICS_NAME_MAX + 1];
    char help[GQ_METRICS_HELP_MAX + 1];
    enum gq_metric_type type;
    size_t nbounds;
    double bounds[GQ_METRICS_MAX_BUCKETS];
    size_t max_series;            /* 0 = only the registry's total bound */
    size_t nseries;
    uint64_t dropped;             /* registrations refused by a series bound */
    struct gq_metric *first, *last; /* series in registration order */
};

struct gq_metric {
    struct family *fam;
    struct gq_metric *next, *prev; /* the family's series */
    struct gq_metric *hnext;       /* hash chain */
    uint32_t hash;
    char *labels;                  /* `a="x",b="y"` without braces; "" if none (owned) */
    double value;                  /* counter/gauge value, histogram sum */
    uint64_t count;                /* histogram sample count */
    uint64_t buckets[GQ_METRICS_MAX_BUCKETS]; /* non-cumulative per bound */
};

struct gq_metrics {
    struct family *fams[GQ_METRICS_MAX_FAMILIES];
    size_t nfams;
    size_t nseries;
    struct gq_metric *htab[HBUCKETS];
};

struct gq_metrics *gq_metrics_new(void)
{
    return calloc(1, sizeof(struct gq_metrics));
}

static void series_free(struct gq_metric *s)
{
    if (s) {
        free(s->labels);
        free(s);
    }
}

void gq_metrics_free(struct gq_metrics *m)
{
    size_t i;
    if (!m)
        return;
    for (i = 0; i < m->nfams; i++) {
        struct gq_metric *s = m->fams[i]->first, *n;
        for (; s; s = n) {
            n = s->next;
            series_free(s);
        }
        free(m->fams[i]);
    }
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

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when s starts an
 * invalid one (stray continuation, overlong form, surrogate, past U+10FFFF,
 * truncated). */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n, i;
    unsigned cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0; /* also stops at the NUL */
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

/* Append s to dst (bounded, dst has room dstmax incl. NUL) escaping \ " \n as
 * the text format wants; a byte that does not start valid UTF-8 becomes
 * U+FFFD (label values must be UTF-8). */
static int esc_label(char *dst, size_t *len, size_t dstmax, const char *s)
{
    while (*s) {
        const char *rep;
        size_t n, adv = 1;
        if (*s == '\\') {
            rep = "\\\\";
        } else if (*s == '"') {
            rep = "\\\"";
        } else if (*s == '\n') {
            rep = "\\n";
        } else if ((adv = utf8_len((const unsigned char *)s)) == 0) {
            rep = "\xef\xbf\xbd";
            adv = 1;
        } else {
            rep = s;
        }
        n = rep == s ? adv : strlen(rep);
        if (*len + n + 1 > dstmax)
            return GQ_ELIMIT;
        memcpy(dst + *len, rep, n);
        *len += n;
        dst[*len] = '\0';
        s += adv;
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

static struct family *family_find(const struct gq_metrics *m, const char *name)
{
    size_t i;
    for (i = 0; i < m->nfams; i++)
        if (strcmp(m->fams[i]->name, name) == 0)
            return m->fams[i];
    return NULL;
}

/* FNV-1a of the family name, a NUL and the label text. */
static uint32_t series_hash(const char *name, const char *labels)
{
    uint32_t h = 2166136261u;
    const unsigned char *p;
    for (p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    h = (h ^ 0xffu) * 16777619u;
    for (p = (const unsigned char *)labels; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

/* Normalise type/bounds, check them, then find the family of name or create
 * it (type, help and bounds must match an existing one). */
static int family_get(struct gq_metrics *m, enum gq_metric_type type, const char *name,
                      const char *help, const double *bounds, size_t nbounds,
                      struct family **out, char *err, size_t errlen)
{
    struct family *fam;
    int rc;
    *out = NULL;
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
        return rc;
    fam = family_find(m, name);
    if (fam && (fam->type != type || fam->nbounds != nbounds ||
                (nbounds && memcmp(fam->bounds, bounds, nbounds * sizeof(double)) != 0))) {
        gq_errf(err, errlen, "%s: registered before with another type or buckets", name);
        return GQ_EINVAL;
    }
    if (!fam) {
        if (m->nfams >= GQ_METRICS_MAX_FAMILIES) {
            gq_errf(err, errlen, "%s: more than %d metric names", name,
                    GQ_METRICS_MAX_FAMILIES);
            return GQ_ELIMIT;
        }
        fam = calloc(1, sizeof *fam);
        if (!fam) {
            gq_errf(err, errlen, "%s: out of memory", name);
            return GQ_ENOMEM;
        }
        gq_strlcpy(fam->name, name, sizeof fam->name);
        gq_strlcpy(fam->help, help, sizeof fam->help);
        fam->type = type;
        fam->nbounds = nbounds;
        if (nbounds)
            memcpy(fam->bounds, bounds, nbounds * sizeof(double));
        m->fams[m->nfams++] = fam;
    }
    *out = fam;
    return GQ_OK;
}

static int reg(struct gq_metrics *m, enum gq_metric_type type, const char *name,
               const char *help, const char *const *labels, const double *bounds,
               size_t nbounds, struct gq_metric **out, char *err, size_t errlen)
{
    char lbl[LABELS_TEXT_MAX];
    struct family *fam = NULL;
    struct gq_metric *s;
    uint32_t h;
    int rc;

    if (out)
        *out = NULL;
    if (!m || !out) {
        gq_errf(err, errlen, "metrics: NULL registry or out");
        return GQ_EINVAL;
    }
    rc = build_labels(labels, lbl, sizeof lbl, err, errlen);
    if (!rc)
        rc = family_get(m, type, name, help, bounds, nbounds, &fam, err, errlen);
    if (rc)
        return rc;
    h = series_hash(name, lbl);
    for (s = m->htab[h & (HBUCKETS - 1)]; s; s = s->hnext) {
        if (s->hash == h && s->fam == fam && strcmp(s->labels, lbl) == 0) {
            *out = s; /* same name + labels: same handle */
            return GQ_OK;
        }
    }
    if (m->nseries >= GQ_METRICS_MAX_SERIES ||
        (fam->max_series && fam->nseries >= fam->max_series)) {
        fam->dropped++;
        gq_errf(err, errlen, "%s: more than %zu series", name,
                fam->max_series && fam->nseries >= fam->max_series ? fam->max_series
                                                                   : (size_t)GQ_METRICS_MAX_SERIES);
        return GQ_ELIMIT;
    }
    s = calloc(1, sizeof *s);
    if (s)
        s->labels = strdup(lbl);
    if (!s || !s->labels) {
        series_free(s);
        gq_errf(err, errlen, "%s: out of memory", name);
        return GQ_ENOMEM;
    }
    s->fam = fam;
    s->hash = h;
    s->hnext = m->htab[h & (HBUCKETS - 1)];
    m->htab[h & (HBUCKETS - 1)] = s;
    s->prev = fam->last;
    if (fam->last)
        fam->last->next = s;
    else
        fam->first = s;
    fam->last = s;
    fam->nseries++;
    m->nseries++;
    *out = s;
    return GQ_OK;
}

int gq_metrics_family(struct gq_metrics *m, enum gq_metric_type type, const char *name,
                      const char *help, const double *bounds, size_t nbounds,
                      size_t max_series, char *err, size_t errlen)
{
    struct family *fam = NULL;
    int rc;
    if (!m) {
        gq_errf(err, errlen, "metrics: NULL registry");
        return GQ_EINVAL;
    }
    if (type != GQ_METRIC_COUNTER && type != GQ_METRIC_GAUGE && type != GQ_METRIC_HISTOGRAM) {
        gq_errf(err, errlen, "%s: unknown metric type", name ? name : "(null)");
        return GQ_EINVAL;
    }
    rc = family_get(m, type, name, help, bounds, nbounds, &fam, err, errlen);
    if (!rc)
        fam->max_series = max_series;
    return rc;
}

void gq_metrics_clear(struct gq_metrics *m, const char *name)
{
    struct family *fam = m && name ? family_find(m, name) : NULL;
    struct gq_metric *s, *n, **pp;
    if (!fam)
        return;
    for (s = fam->first; s; s = n) {
        n = s->next;
        for (pp = &m->htab[s->hash & (HBUCKETS - 1)]; *pp; pp = &(*pp)->hnext) {
            if (*pp == s) {
                *pp = s->hnext;
                break;
            }
        }
        series_free(s);
        m->nseries--;
    }
    fam->first = fam->last = NULL;
    fam->nseries = 0;
}

size_t gq_metrics_series(const struct gq_metrics *m, const char *name)
{
    const struct family *fam = m && name ? family_find(m, name) : NULL;
    return fam ? fam->nseries : 0;
}

uint64_t gq_metrics_dropped(const struct gq_metrics *m, const char *name)
{
    const struct family *fam = m && name ? family_find(m, name) : NULL;
    return fam ? fam->dropped : 0;
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
    size_t fi;
    const struct gq_metric *s;
    char num[64];
    int rc = GQ_OK, any_dropped = 0;

    if (!m || !b)
        return GQ_EINVAL;
    for (fi = 0; fi < m->nfams && !rc; fi++) {
        const struct family *f = m->fams[fi];
        any_dropped |= f->dropped > 0;
        if (f->help[0]) { /* like the Go client: no HELP line without help text */
            rc = gq_buf_printf(b, "# HELP %s ", f->name);
            if (!rc)
                rc = put_help(b, f->help);
            if (!rc)
                rc = gq_buf_puts(b, "\n");
        }
        if (!rc)
            rc = gq_buf_printf(b, "# TYPE %s %s\n", f->name, type_name(f->type));
        for (s = f->first; s && !rc; s = s->next) {
            if (f->type == GQ_METRIC_HISTOGRAM) {
                rc = render_hist(s, b);
            } else {
                fmt_num(num, sizeof num, s->value);
                rc = gq_buf_printf(b, "%s%s%s%s %s\n", f->name, s->labels[0] ? "{" : "",
                                   s->labels, s->labels[0] ? "}" : "", num);
            }
        }
    }
    /* the series bounds at work: registrations refused, per metric name */
    if (!rc && any_dropped)
        rc = gq_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n", GQ_METRICS_DROPPED_NAME,
                           "Series registrations refused by a series bound, by metric name",
                           GQ_METRICS_DROPPED_NAME);
    for (fi = 0; fi < m->nfams && !rc; fi++)
        if (m->fams[fi]->dropped)
            rc = gq_buf_printf(b, "%s{metric=\"%s\"} %llu\n", GQ_METRICS_DROPPED_NAME,
                               m->fams[fi]->name, (unsigned long long)m->fams[fi]->dropped);
    return rc;
}
