/* hr_metrics: a Prometheus registry for threaded daemons.
 *
 * A registry holds families (counter, gauge or histogram), registered at
 * start-up from a table of hr_metrics_spec, each with a fixed list of label
 * names.  A family has one child per tuple of label values, created on first
 * use by hr_metrics_labels() under the family's mutex; the caller keeps the
 * child handle and updates it lock-free (C11 atomics) on the hot path:
 *
 *     hr_metrics_child *sent = hr_metrics_labels(pushes, "webhook", "sent");
 *     hr_metrics_inc(sent);                       // any thread, no lock
 *
 * A family holds at most the registry's max_children children.  Lookups past
 * that (and lookups with the wrong number of values or a NULL value) return
 * the family's shared child whose every label is "_overflow", and are counted
 * in herald_metrics_label_overflow_total{family="NAME"}, so a bad label value
 * cannot grow memory without bound and never yields NULL.
 *
 * Updates of the wrong kind are ignored: hr_metrics_dec/set on a counter,
 * hr_metrics_observe on anything but a histogram.  A counter or gauge child
 * may instead be computed at scrape time by a callback (hr_metrics_gauge_fn),
 * called from the scraping thread.
 *
 * hr_metrics_render() writes text exposition format 0.0.4.  Children are
 * never freed before the registry, so handles stay valid until
 * hr_metrics_free(). */
#ifndef HR_METRICS_H
#define HR_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "hr_buf.h"

typedef struct hr_metrics hr_metrics;
typedef struct hr_metrics_family hr_metrics_family;
typedef struct hr_metrics_child hr_metrics_child;

typedef enum hr_metrics_type {
    HR_METRICS_COUNTER,
    HR_METRICS_GAUGE,
    HR_METRICS_HISTOGRAM,
} hr_metrics_type;

#define HR_METRICS_MAX_LABELS 8
#define HR_METRICS_MAX_BUCKETS 32
#define HR_METRICS_DEFAULT_MAX_CHILDREN 1024

/* Push request latency, seconds. */
extern const double hr_metrics_buckets_latency[11];
/* Due time to delivery, seconds. */
extern const double hr_metrics_buckets_delivery[12];
#define HR_METRICS_BUCKETS(a) (a), (sizeof(a) / sizeof((a)[0]))

/* One row of a registration table. */
typedef struct hr_metrics_spec {
    hr_metrics_family **fam; /* receives the family handle */
    const char *name;        /* [a-zA-Z_:][a-zA-Z0-9_:]* */
    const char *help;
    hr_metrics_type type;
    const char *labels;    /* comma-separated label names, "" or NULL for none */
    const double *buckets; /* histograms: strictly increasing finite upper bounds */
    size_t nbuckets;       /* 1..HR_METRICS_MAX_BUCKETS; +Inf is implied */
} hr_metrics_spec;

/* MAX_CHILDREN per family (0 = HR_METRICS_DEFAULT_MAX_CHILDREN).  NULL when
 * out of memory. */
hr_metrics *hr_metrics_new(size_t max_children);
void hr_metrics_free(hr_metrics *reg);

/* Registers every row of SPECS (names, label names, buckets validated;
 * duplicate names refused).  On error nothing of the failing row is kept and
 * the rows before it stay registered.  A family without labels gets its one
 * child at once, so it renders as 0 before any update. */
int hr_metrics_register(hr_metrics *reg, const hr_metrics_spec *specs, size_t nspecs, char *errstr,
                        size_t errlen);

/* The child for the label values (as many as the family has label names;
 * none for a family without labels: hr_metrics_labels(fam, NULL)).  Never
 * NULL when FAM is not NULL; see the overflow rule above.  Takes the
 * family's mutex: look up once, keep the handle. */
#define hr_metrics_labels(fam, ...) hr_metrics_labels_((fam), __VA_ARGS__, (const char *)NULL)
hr_metrics_child *hr_metrics_labels_(hr_metrics_family *fam, ...);
/* The same with the values in an array of hr_metrics_family's label count. */
hr_metrics_child *hr_metrics_labelv(hr_metrics_family *fam, const char *const *values,
                                    size_t nvalues);

/* Lock-free updates; every one accepts NULL (no-op). */
void hr_metrics_inc(hr_metrics_child *child);               /* counter, gauge */
void hr_metrics_add(hr_metrics_child *child, uint64_t n);   /* counter, gauge */
void hr_metrics_dec(hr_metrics_child *child);               /* gauge */
void hr_metrics_set(hr_metrics_child *child, double v);     /* gauge */
void hr_metrics_observe(hr_metrics_child *child, double v); /* histogram */

/* The current value of a counter or gauge (for tests and callers that
 * report it elsewhere); NaN for a histogram or a callback child. */
double hr_metrics_value(const hr_metrics_child *child);

/* From now on the child's value is FN(CTX), called at every render from the
 * rendering thread (it must be thread-safe and must not call hr_metrics
 * functions on the same family).  FN NULL reverts to the stored value.
 * Counters and gauges only; ignored otherwise. */
typedef double (*hr_metrics_value_fn)(void *ctx);
void hr_metrics_gauge_fn(hr_metrics_child *child, hr_metrics_value_fn fn, void *ctx);

/* Appends every family in registration order to OUT.  0, or -1 when OUT's
 * cap was reached (OUT then holds a truncated rendering). */
int hr_metrics_render(hr_metrics *reg, hr_buf *out);

#endif
