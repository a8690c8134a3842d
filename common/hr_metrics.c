/* hr_metrics: families, children and the text exposition renderer.
 *
 * The registry owns an array of families in registration order, guarded by
 * the registry mutex (taken by registration and rendering only).  A family
 * owns an array of children in creation order and an open-addressing hash
 * (`slots`, indexes into `children`, twice max_children rounded up to a
 * power of two, so it never fills) keyed by the label values; both are
 * guarded by the family mutex, which lookups, callback changes and rendering
 * take.  A child's key is its label values, each NUL-terminated, one after
 * the other, which is unambiguous because values are C strings.
 *
 * Values are C11 atomics updated with relaxed ordering: a scrape needs no
 * ordering against other memory, only untorn values.  Counters and
 * histogram buckets are uint64 fetch-adds; gauges and histogram sums are
 * doubles updated by compare-and-swap loops.  A histogram keeps
 * non-cumulative bucket counts and derives _count from their sum while
 * rendering, so the +Inf bucket always equals _count in one scrape.
 *
 * Lock order: registry mutex, then one family mutex.  The overflow counter
 * is a child of the registry's first family, created at registration; an
 * overflowing lookup increments it after dropping its own family's mutex. */
#include "hr_metrics.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_vec.h"

const double hr_metrics_buckets_latency[11] = {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10};
const double hr_metrics_buckets_delivery[12] = {.1, .25, .5, 1, 2, 5, 10, 30, 60, 120, 300, 600};

#define HR_METRICS_OVERFLOW_VALUE "_overflow"
#define HR_METRICS_OVERFLOW_FAMILY "herald_metrics_label_overflow_total"

struct hr_metrics_child {
    hr_metrics_type type;
    hr_metrics_family *fam;
    char *key; /* label values, each NUL-terminated */
    size_t keylen;
    _Atomic uint64_t count;    /* counter */
    _Atomic double value;      /* gauge */
    _Atomic double sum;        /* histogram */
    _Atomic uint64_t *buckets; /* histogram: the family's nbounds + 1, the last is +Inf */
    hr_metrics_value_fn fn;    /* under the family mutex */
    void *fn_ctx;
};

struct hr_metrics_family {
    char *name, *help;
    hr_metrics_type type;
    char *labels[HR_METRICS_MAX_LABELS];
    size_t nlabels;
    double bounds[HR_METRICS_MAX_BUCKETS];
    size_t nbounds;
    size_t max_children;
    pthread_mutex_t mu;
    HR_VEC(hr_metrics_child *) children;
    int32_t *slots; /* -1 = empty */
    size_t nslots;
    hr_metrics_child *overflow;       /* created on the first overflow */
    hr_metrics_child *overflow_count; /* in the overflow family; NULL for that family */
};

struct hr_metrics {
    pthread_mutex_t mu;
    HR_VEC(hr_metrics_family *) fams;
    size_t max_children;
};

/* ---- children ---------------------------------------------------------- */

static void hr_metrics_child_free(hr_metrics_child *child)
{
    if (child == NULL)
        return;
    free(child->buckets);
    free(child->key);
    free(child);
}

static hr_metrics_child *hr_metrics_child_new(hr_metrics_family *fam, const char *const *values)
{
    hr_metrics_child *child = calloc(1, sizeof *child);
    if (child == NULL)
        return NULL;
    child->type = fam->type;
    child->fam = fam;
    atomic_init(&child->count, 0);
    atomic_init(&child->value, 0.0);
    atomic_init(&child->sum, 0.0);
    for (size_t i = 0; i < fam->nlabels; i++)
        child->keylen += strlen(values[i]) + 1;
    child->key = malloc(child->keylen + 1);
    if (child->key == NULL)
        goto fail;
    char *p = child->key;
    for (size_t i = 0; i < fam->nlabels; i++) {
        size_t n = strlen(values[i]) + 1;
        memcpy(p, values[i], n);
        p += n;
    }
    if (fam->type == HR_METRICS_HISTOGRAM) {
        child->buckets = malloc((fam->nbounds + 1) * sizeof *child->buckets);
        if (child->buckets == NULL)
            goto fail;
        for (size_t i = 0; i <= fam->nbounds; i++)
            atomic_init(&child->buckets[i], 0);
    }
    return child;
fail:
    hr_metrics_child_free(child);
    return NULL;
}

static bool hr_metrics_child_matches(const hr_metrics_child *child, const char *const *values,
                                     size_t n)
{
    const char *p = child->key;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(values[i]) + 1;
        if ((size_t)(child->key + child->keylen - p) < len || memcmp(p, values[i], len) != 0)
            return false;
        p += len;
    }
    return p == child->key + child->keylen;
}

/* FNV-1a over the values and their terminators. */
static uint32_t hr_metrics_hash(const char *const *values, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        for (const unsigned char *s = (const unsigned char *)values[i];; s++) {
            h = (h ^ *s) * 16777619u;
            if (*s == '\0')
                break;
        }
    }
    return h;
}

/* The family's "_overflow" child, created if needed; under fam->mu.  NULL
 * only when it cannot be allocated. */
static hr_metrics_child *hr_metrics_overflow_locked(hr_metrics_family *fam)
{
    if (fam->overflow == NULL) {
        const char *values[HR_METRICS_MAX_LABELS];
        for (size_t i = 0; i < fam->nlabels; i++)
            values[i] = HR_METRICS_OVERFLOW_VALUE;
        fam->overflow = hr_metrics_child_new(fam, values);
    }
    return fam->overflow;
}

hr_metrics_child *hr_metrics_labelv(hr_metrics_family *fam, const char *const *values,
                                    size_t nvalues)
{
    if (fam == NULL)
        return NULL;
    bool valid = nvalues == fam->nlabels;
    for (size_t i = 0; valid && i < nvalues; i++)
        valid = values[i] != NULL;
    if (fam->nlabels == 0) {
        /* Its one child, created at registration, doubles as the overflow
         * child: a second unlabelled series would be a duplicate. */
        if (!valid)
            hr_metrics_inc(fam->overflow_count);
        return fam->children.v[0];
    }

    hr_metrics_child *child = NULL;
    bool overflowed = false;
    pthread_mutex_lock(&fam->mu);
    if (!valid) {
        overflowed = true;
        child = hr_metrics_overflow_locked(fam);
        goto done;
    }
    size_t mask = fam->nslots - 1;
    size_t i = hr_metrics_hash(values, nvalues) & mask;
    for (; fam->slots[i] >= 0; i = (i + 1) & mask) {
        hr_metrics_child *cand = fam->children.v[fam->slots[i]];
        if (hr_metrics_child_matches(cand, values, nvalues)) {
            child = cand;
            goto done;
        }
    }
    overflowed = true;
    if (fam->children.n >= fam->max_children) {
        child = hr_metrics_overflow_locked(fam);
        goto done;
    }
    child = hr_vec_reserve(&fam->children, fam->children.n + 1) == 0
                ? hr_metrics_child_new(fam, values)
                : NULL;
    if (child == NULL) {
        child = hr_metrics_overflow_locked(fam);
        goto done;
    }
    fam->slots[i] = (int32_t)fam->children.n;
    fam->children.v[fam->children.n++] = child;
    overflowed = false;
done:
    pthread_mutex_unlock(&fam->mu);
    if (overflowed)
        hr_metrics_inc(fam->overflow_count);
    return child;
}

hr_metrics_child *hr_metrics_labels_(hr_metrics_family *fam, ...)
{
    const char *values[HR_METRICS_MAX_LABELS + 1];
    size_t n = 0;
    va_list ap;
    va_start(ap, fam);
    /* One more than any family has, so a surplus value is seen as a
     * mismatch rather than silently dropped. */
    for (const char *v; n < HR_METRICS_MAX_LABELS + 1 && (v = va_arg(ap, const char *)) != NULL;)
        values[n++] = v;
    va_end(ap);
    return hr_metrics_labelv(fam, values, n);
}

/* ---- updates ----------------------------------------------------------- */

static void hr_metrics_double_add(_Atomic double *a, double d)
{
    double old = atomic_load_explicit(a, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(a, &old, old + d, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

void hr_metrics_add(hr_metrics_child *child, uint64_t n)
{
    if (child == NULL)
        return;
    if (child->type == HR_METRICS_COUNTER)
        atomic_fetch_add_explicit(&child->count, n, memory_order_relaxed);
    else if (child->type == HR_METRICS_GAUGE)
        hr_metrics_double_add(&child->value, (double)n);
}

void hr_metrics_inc(hr_metrics_child *child)
{
    hr_metrics_add(child, 1);
}

void hr_metrics_dec(hr_metrics_child *child)
{
    if (child != NULL && child->type == HR_METRICS_GAUGE)
        hr_metrics_double_add(&child->value, -1.0);
}

void hr_metrics_set(hr_metrics_child *child, double v)
{
    if (child != NULL && child->type == HR_METRICS_GAUGE)
        atomic_store_explicit(&child->value, v, memory_order_relaxed);
}

void hr_metrics_observe(hr_metrics_child *child, double v)
{
    if (child == NULL || child->type != HR_METRICS_HISTOGRAM || isnan(v))
        return;
    const hr_metrics_family *fam = child->fam;
    size_t lo = 0, hi = fam->nbounds; /* first bound >= v, or nbounds for +Inf */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (fam->bounds[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    atomic_fetch_add_explicit(&child->buckets[lo], 1, memory_order_relaxed);
    hr_metrics_double_add(&child->sum, v);
}

double hr_metrics_value(const hr_metrics_child *child)
{
    if (child == NULL || child->type == HR_METRICS_HISTOGRAM)
        return NAN;
    pthread_mutex_lock(&child->fam->mu);
    bool computed = child->fn != NULL;
    pthread_mutex_unlock(&child->fam->mu);
    if (computed)
        return NAN;
    if (child->type == HR_METRICS_COUNTER)
        return (double)atomic_load_explicit(&child->count, memory_order_relaxed);
    return atomic_load_explicit(&child->value, memory_order_relaxed);
}

/* ---- registry ---------------------------------------------------------- */

static void hr_metrics_family_free(hr_metrics_family *fam)
{
    if (fam == NULL)
        return;
    for (size_t i = 0; i < fam->children.n; i++)
        hr_metrics_child_free(fam->children.v[i]);
    hr_metrics_child_free(fam->overflow);
    hr_vec_free(&fam->children);
    free(fam->slots);
    for (size_t i = 0; i < fam->nlabels; i++)
        free(fam->labels[i]);
    free(fam->name);
    free(fam->help);
    pthread_mutex_destroy(&fam->mu);
    free(fam);
}

void hr_metrics_gauge_fn(hr_metrics_child *child, hr_metrics_value_fn fn, void *ctx)
{
    if (child == NULL || child->type == HR_METRICS_HISTOGRAM)
        return;
    pthread_mutex_lock(&child->fam->mu);
    child->fn = fn;
    child->fn_ctx = ctx;
    pthread_mutex_unlock(&child->fam->mu);
}

static bool hr_metrics_name_ok(const char *s, bool colon)
{
    if (s == NULL || *s == '\0' || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s != '\0'; s++) {
        char ch = *s;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || (colon && ch == ':');
        if (!ok)
            return false;
    }
    return true;
}

/* Builds a family from SPEC; NULL with ERRSTR set on a bad spec. */
static hr_metrics_family *hr_metrics_family_new(const hr_metrics_spec *spec, size_t max_children,
                                                char *errstr, size_t errlen)
{
    const char *name = spec->name != NULL ? spec->name : "(null)";
    hr_metrics_family *fam = NULL;
    if (!hr_metrics_name_ok(spec->name, true)) {
        snprintf(errstr, errlen, "metric '%s': invalid name", name);
        return NULL;
    }
    if (spec->type != HR_METRICS_COUNTER && spec->type != HR_METRICS_GAUGE &&
        spec->type != HR_METRICS_HISTOGRAM) {
        snprintf(errstr, errlen, "metric %s: invalid type %d", name, (int)spec->type);
        return NULL;
    }
    fam = calloc(1, sizeof *fam);
    if (fam == NULL)
        goto oom;
    pthread_mutex_init(&fam->mu, NULL);
    fam->type = spec->type;
    fam->max_children = max_children;
    fam->name = strdup(spec->name);
    fam->help = strdup(spec->help != NULL ? spec->help : "");
    if (fam->name == NULL || fam->help == NULL)
        goto oom;

    for (const char *p = spec->labels; p != NULL && *p != '\0';) {
        size_t n = strcspn(p, ",");
        if (fam->nlabels == HR_METRICS_MAX_LABELS) {
            snprintf(errstr, errlen, "metric %s: more than %d labels", name, HR_METRICS_MAX_LABELS);
            goto fail;
        }
        char *label = strndup(p, n);
        if (label == NULL)
            goto oom;
        fam->labels[fam->nlabels++] = label;
        if (!hr_metrics_name_ok(label, false) || strncmp(label, "__", 2) == 0 ||
            (fam->type == HR_METRICS_HISTOGRAM && strcmp(label, "le") == 0)) {
            snprintf(errstr, errlen, "metric %s: invalid label name '%s'", name, label);
            goto fail;
        }
        for (size_t i = 0; i + 1 < fam->nlabels; i++) {
            if (strcmp(fam->labels[i], label) == 0) {
                snprintf(errstr, errlen, "metric %s: duplicate label '%s'", name, label);
                goto fail;
            }
        }
        p += n;
        if (*p == ',' && *++p == '\0') {
            snprintf(errstr, errlen, "metric %s: trailing comma in labels", name);
            goto fail;
        }
    }

    if (fam->type == HR_METRICS_HISTOGRAM) {
        if (spec->buckets == NULL || spec->nbuckets == 0 ||
            spec->nbuckets > HR_METRICS_MAX_BUCKETS) {
            snprintf(errstr, errlen, "metric %s: 1..%d buckets needed", name,
                     HR_METRICS_MAX_BUCKETS);
            goto fail;
        }
        for (size_t i = 0; i < spec->nbuckets; i++) {
            if (!isfinite(spec->buckets[i]) ||
                (i > 0 && spec->buckets[i] <= spec->buckets[i - 1])) {
                snprintf(errstr, errlen, "metric %s: buckets must be finite and increasing", name);
                goto fail;
            }
            fam->bounds[i] = spec->buckets[i];
        }
        fam->nbounds = spec->nbuckets;
    }

    if (fam->nlabels == 0) {
        if (hr_vec_reserve(&fam->children, 1) != 0 ||
            (fam->children.v[0] = hr_metrics_child_new(fam, NULL)) == NULL)
            goto oom;
        fam->children.n = 1;
    } else {
        fam->nslots = 1;
        while (fam->nslots < 2 * max_children)
            fam->nslots *= 2;
        fam->slots = malloc(fam->nslots * sizeof *fam->slots);
        if (fam->slots == NULL)
            goto oom;
        memset(fam->slots, 0xff, fam->nslots * sizeof *fam->slots);
    }
    return fam;
oom:
    snprintf(errstr, errlen, "metric %s: out of memory", name);
fail:
    hr_metrics_family_free(fam);
    return NULL;
}

/* Appends FAM to REG; under reg->mu. */
static int hr_metrics_add_family(hr_metrics *reg, hr_metrics_family *fam, char *errstr,
                                 size_t errlen)
{
    for (size_t i = 0; i < reg->fams.n; i++) {
        if (strcmp(reg->fams.v[i]->name, fam->name) == 0) {
            snprintf(errstr, errlen, "metric %s: registered twice", fam->name);
            return -1;
        }
    }
    if (hr_vec_reserve(&reg->fams, reg->fams.n + 1) != 0) {
        snprintf(errstr, errlen, "metric %s: out of memory", fam->name);
        return -1;
    }
    if (reg->fams.n > 0) {
        const char *values[1] = {fam->name};
        fam->overflow_count = hr_metrics_labelv(reg->fams.v[0], values, 1);
    }
    reg->fams.v[reg->fams.n++] = fam;
    return 0;
}

int hr_metrics_register(hr_metrics *reg, const hr_metrics_spec *specs, size_t nspecs, char *errstr,
                        size_t errlen)
{
    int rc = 0;
    pthread_mutex_lock(&reg->mu);
    for (size_t i = 0; i < nspecs; i++) {
        hr_metrics_family *fam =
            hr_metrics_family_new(&specs[i], reg->max_children, errstr, errlen);
        if (fam == NULL || hr_metrics_add_family(reg, fam, errstr, errlen) != 0) {
            hr_metrics_family_free(fam);
            rc = -1;
            break;
        }
        if (specs[i].fam != NULL)
            *specs[i].fam = fam;
    }
    pthread_mutex_unlock(&reg->mu);
    return rc;
}

hr_metrics *hr_metrics_new(size_t max_children)
{
    hr_metrics *reg = calloc(1, sizeof *reg);
    if (reg == NULL)
        return NULL;
    pthread_mutex_init(&reg->mu, NULL);
    reg->max_children = max_children != 0 ? max_children : HR_METRICS_DEFAULT_MAX_CHILDREN;
    char err[128];
    const hr_metrics_spec overflow = {
        .name = HR_METRICS_OVERFLOW_FAMILY,
        .help = "Label lookups sent to the _overflow child (too many label values, or bad ones).",
        .type = HR_METRICS_COUNTER,
        .labels = "family",
    };
    if (hr_metrics_register(reg, &overflow, 1, err, sizeof err) != 0) {
        hr_metrics_free(reg);
        return NULL;
    }
    return reg;
}

void hr_metrics_free(hr_metrics *reg)
{
    if (reg == NULL)
        return;
    for (size_t i = 0; i < reg->fams.n; i++)
        hr_metrics_family_free(reg->fams.v[i]);
    hr_vec_free(&reg->fams);
    pthread_mutex_destroy(&reg->mu);
    free(reg);
}

/* ---- rendering --------------------------------------------------------- */

/* A writer that remembers the first failed append and skips the rest. */
typedef struct hr_metrics_out {
    hr_buf *buf;
    int rc;
} hr_metrics_out;

static void hr_metrics_put(hr_metrics_out *o, const char *s, size_t n)
{
    if (o->rc == 0 && hr_buf_append(o->buf, s, n) != 0)
        o->rc = -1;
}

static void hr_metrics_puts(hr_metrics_out *o, const char *s)
{
    hr_metrics_put(o, s, strlen(s));
}

/* S with '\\' and newline escaped, and '"' too when QUOTE (label values;
 * HELP text leaves quotes alone). */
static void hr_metrics_put_escaped(hr_metrics_out *o, const char *s, bool quote)
{
    for (;;) {
        size_t n = strcspn(s, quote ? "\\\n\"" : "\\\n");
        hr_metrics_put(o, s, n);
        s += n;
        if (*s == '\0')
            return;
        hr_metrics_puts(o, *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : "\\\"");
        s++;
    }
}

/* The shortest of %.15g..%.17g that reads back as V, so a scrape
 * round-trips; Prometheus spells the specials +Inf, -Inf and NaN. */
static void hr_metrics_put_double(hr_metrics_out *o, double v)
{
    char num[40];
    if (isnan(v)) {
        hr_metrics_puts(o, "NaN");
        return;
    }
    if (isinf(v)) {
        hr_metrics_puts(o, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(num, sizeof num, "%.*g", prec, v);
        if (strtod(num, NULL) == v)
            break;
    }
    hr_metrics_puts(o, num);
}

static void hr_metrics_put_u64(hr_metrics_out *o, uint64_t v)
{
    char num[24];
    hr_metrics_put(o, num, (size_t)snprintf(num, sizeof num, "%" PRIu64, v));
}

/* NAME SUFFIX {labels[,le="LE"]} and the space before the value; LE < 0
 * means no le label, LE == nbounds means +Inf. */
static void hr_metrics_put_series(hr_metrics_out *o, const hr_metrics_family *fam,
                                  const hr_metrics_child *child, const char *suffix, long le)
{
    hr_metrics_puts(o, fam->name);
    hr_metrics_puts(o, suffix);
    if (fam->nlabels > 0 || le >= 0) {
        const char *value = child->key;
        hr_metrics_puts(o, "{");
        for (size_t i = 0; i < fam->nlabels; i++) {
            hr_metrics_puts(o, i > 0 ? "," : "");
            hr_metrics_puts(o, fam->labels[i]);
            hr_metrics_puts(o, "=\"");
            hr_metrics_put_escaped(o, value, true);
            hr_metrics_puts(o, "\"");
            value += strlen(value) + 1;
        }
        if (le >= 0) {
            hr_metrics_puts(o, fam->nlabels > 0 ? ",le=\"" : "le=\"");
            if ((size_t)le == fam->nbounds)
                hr_metrics_puts(o, "+Inf");
            else
                hr_metrics_put_double(o, fam->bounds[le]);
            hr_metrics_puts(o, "\"");
        }
        hr_metrics_puts(o, "}");
    }
    hr_metrics_puts(o, " ");
}

/* Every sample line of C; under fam->mu. */
static void hr_metrics_put_child(hr_metrics_out *o, const hr_metrics_family *fam,
                                 const hr_metrics_child *child)
{
    if (fam->type == HR_METRICS_HISTOGRAM) {
        uint64_t cum = 0;
        for (size_t i = 0; i <= fam->nbounds; i++) {
            cum += atomic_load_explicit(&child->buckets[i], memory_order_relaxed);
            hr_metrics_put_series(o, fam, child, "_bucket", (long)i);
            hr_metrics_put_u64(o, cum);
            hr_metrics_puts(o, "\n");
        }
        hr_metrics_put_series(o, fam, child, "_sum", -1);
        hr_metrics_put_double(o, atomic_load_explicit(&child->sum, memory_order_relaxed));
        hr_metrics_puts(o, "\n");
        hr_metrics_put_series(o, fam, child, "_count", -1);
        hr_metrics_put_u64(o, cum);
        hr_metrics_puts(o, "\n");
        return;
    }
    hr_metrics_put_series(o, fam, child, "", -1);
    if (child->fn != NULL)
        hr_metrics_put_double(o, child->fn(child->fn_ctx));
    else if (fam->type == HR_METRICS_COUNTER)
        hr_metrics_put_u64(o, atomic_load_explicit(&child->count, memory_order_relaxed));
    else
        hr_metrics_put_double(o, atomic_load_explicit(&child->value, memory_order_relaxed));
    hr_metrics_puts(o, "\n");
}

int hr_metrics_render(hr_metrics *reg, hr_buf *out)
{
    static const char *const type_names[] = {"counter", "gauge", "histogram"};
    hr_metrics_out o = {out, 0};
    pthread_mutex_lock(&reg->mu);
    for (size_t f = 0; f < reg->fams.n && o.rc == 0; f++) {
        hr_metrics_family *fam = reg->fams.v[f];
        hr_metrics_puts(&o, "# HELP ");
        hr_metrics_puts(&o, fam->name);
        hr_metrics_puts(&o, " ");
        hr_metrics_put_escaped(&o, fam->help, false);
        hr_metrics_puts(&o, "\n# TYPE ");
        hr_metrics_puts(&o, fam->name);
        hr_metrics_puts(&o, " ");
        hr_metrics_puts(&o, type_names[fam->type]);
        hr_metrics_puts(&o, "\n");
        pthread_mutex_lock(&fam->mu);
        for (size_t i = 0; i < fam->children.n; i++)
            hr_metrics_put_child(&o, fam, fam->children.v[i]);
        if (fam->overflow != NULL)
            hr_metrics_put_child(&o, fam, fam->overflow);
        pthread_mutex_unlock(&fam->mu);
    }
    pthread_mutex_unlock(&reg->mu);
    return o.rc;
}
