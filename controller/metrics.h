/*
 * metrics.h — a small Prometheus metrics registry owned by its caller.
 *
 * Role: the controller registers counters, gauges and histograms once at start
 * (name + help + optional constant label pairs) and keeps the returned handles;
 * updating a handle is a few instructions (no lookup, no allocation).
 * gq_metrics_render writes the text exposition format 0.0.4 for /metrics.
 *
 * Invariants:
 * - No globals: everything lives in the struct gq_metrics the caller owns.
 * - Bounded: at most GQ_METRICS_MAX_SERIES series (one per name + label set) and
 *   GQ_METRICS_MAX_FAMILIES names; a family declared with gq_metrics_family may
 *   have a smaller bound of its own (for label values that come from objects,
 *   e.g. team names). A registration refused by either bound is counted per
 *   family and rendered as GQ_METRICS_DROPPED_NAME{metric="<name>"} (only once
 *   something was refused); names <= GQ_METRICS_NAME_MAX bytes, help
 *   <= GQ_METRICS_HELP_MAX, at most GQ_METRICS_MAX_LABELS pairs per series, each
 *   label value <= GQ_METRICS_LABEL_MAX bytes; histograms have at most
 *   GQ_METRICS_MAX_BUCKETS finite upper bounds (the +Inf bucket is implicit).
 *   Registering past a bound fails with GQ_ELIMIT.
 * - Series that share a name form one family: same type, same help (the first
 *   help wins), and for histograms the same bucket bounds. They are rendered
 *   together, families in registration order, series in registration order.
 *   A family with empty help text gets no "# HELP" line.
 * - Registering the exact same name + label set again returns the same handle
 *   (a hash lookup: label sets may be registered on every update).
 * - Label values are escaped for the text format (\ " and newline) and any
 *   byte that does not start valid UTF-8 is rendered as U+FFFD.
 * - Not thread-safe: update and render from the one loop thread.
 *
 * Ownership: gq_metrics_new returns a registry owned by the caller
 * (gq_metrics_free, accepts NULL). Handles (struct gq_metric *) are owned by the
 * registry and stay valid until gq_metrics_free. Every update function accepts a
 * NULL handle and does nothing, so a failed registration need not be fatal.
 * Labels are given as a NULL-terminated array of alternating name, value
 * strings, e.g. (const char *[]){"state", "Queued", NULL}; they are copied.
 */
#ifndef GQ_METRICS_H
#define GQ_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include "gq.h"
#include "buf.h"

#define GQ_METRICS_MAX_SERIES 16384
#define GQ_METRICS_MAX_FAMILIES 128
#define GQ_METRICS_NAME_MAX 128
#define GQ_METRICS_HELP_MAX 256
#define GQ_METRICS_MAX_LABELS 4
#define GQ_METRICS_LABEL_MAX 128
#define GQ_METRICS_MAX_BUCKETS 24

/* Counter of registrations refused by a series bound, label metric. */
#define GQ_METRICS_DROPPED_NAME "gangq_metrics_series_dropped_total"

enum gq_metric_type { GQ_METRIC_COUNTER = 0, GQ_METRIC_GAUGE = 1, GQ_METRIC_HISTOGRAM = 2 };

struct gq_metrics;
struct gq_metric;

/* Default histogram bounds for durations in seconds:
 * 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10. */
extern const double gq_metrics_default_bounds[];
extern const size_t gq_metrics_default_nbounds;

/* NULL on allocation failure. */
struct gq_metrics *gq_metrics_new(void);
void gq_metrics_free(struct gq_metrics *m);

/* Register (or find) a series. labels may be NULL. On success *out is the
 * handle. Errors: GQ_EINVAL (bad name/label name, reserved label "le" or
 * "__*", odd label array, type/bounds clash with the family), GQ_ELIMIT,
 * GQ_ENOMEM; err says which. */
int gq_metrics_counter(struct gq_metrics *m, const char *name, const char *help,
                       const char *const *labels, struct gq_metric **out,
                       char *err, size_t errlen);
int gq_metrics_gauge(struct gq_metrics *m, const char *name, const char *help,
                     const char *const *labels, struct gq_metric **out,
                     char *err, size_t errlen);
/* bounds: strictly increasing finite upper bounds; NULL/0 = default bounds. */
int gq_metrics_histogram(struct gq_metrics *m, const char *name, const char *help,
                         const char *const *labels, const double *bounds,
                         size_t nbounds, struct gq_metric **out,
                         char *err, size_t errlen);

/* Declare a family without series (rendered with its HELP and TYPE lines and
 * no sample until a series is registered): type, help, bounds as for the
 * register functions; max_series > 0 bounds its series (0 = only the
 * registry's bound). Declaring an existing family with the same type and
 * bounds sets its bound. Errors as for registration. */
int gq_metrics_family(struct gq_metrics *m, enum gq_metric_type type, const char *name,
                      const char *help, const double *bounds, size_t nbounds,
                      size_t max_series, char *err, size_t errlen);
/* Remove every series of family name (it stays declared): for gauges
 * recomputed as a whole (per Team), so a deleted object's series go away.
 * Handles to them become invalid. Unknown name: nothing. */
void gq_metrics_clear(struct gq_metrics *m, const char *name);
/* Series of family name now, and registrations it refused so far. */
size_t gq_metrics_series(const struct gq_metrics *m, const char *name);
uint64_t gq_metrics_dropped(const struct gq_metrics *m, const char *name);

/* Counters: inc/add (negative or NaN deltas are ignored: counters only go up).
 * Gauges: set/add/inc/dec. Histograms: observe. A call that does not fit the
 * handle's type is ignored. */
void gq_metrics_inc(struct gq_metric *h);
void gq_metrics_add(struct gq_metric *h, double delta);
void gq_metrics_dec(struct gq_metric *h);
void gq_metrics_set(struct gq_metric *h, double v);
void gq_metrics_observe(struct gq_metric *h, double v);

/* Current value of a counter/gauge, or the sample count of a histogram. */
double gq_metrics_value(const struct gq_metric *h);

/* Append the exposition text (format 0.0.4) to out. GQ_ELIMIT if out's maximum
 * is reached (out then holds a truncated prefix), GQ_ENOMEM. */
int gq_metrics_render(const struct gq_metrics *m, struct gq_buf *out);

/* Content-Type of the rendered text. */
#define GQ_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
