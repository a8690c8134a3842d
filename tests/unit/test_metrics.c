/* Unit tests for common/hr_metrics.c: registration checks, concurrent
 * updates from four threads, the overflow child, callback values, label
 * escaping, float round-trips, and a strict parser of the text exposition
 * format that every rendering in this file goes through. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hr_metrics.h"

/* ---- a strict parser of text format 0.0.4 ------------------------------- */

typedef struct parse_state {
    char names[64][128]; /* families seen, to refuse a second HELP */
    size_t nnames;
    char fam[128], type[16];
    /* the histogram series being read: labels without le */
    char series[512];
    int hstate; /* 0 between series, 1 in buckets, 2 after +Inf, 3 after _sum */
    double prev_le, inf_count, prev_cum;
    size_t nsamples;
} parse_state;

static bool name_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

/* Copies the metric or label name at *P into OUT and advances. */
static void parse_name(const char **p, char *out, size_t outlen, bool colon)
{
    size_t n = 0;
    assert_true(name_char(**p, true));
    while (name_char((*p)[n], n == 0) && (colon || (*p)[n] != ':'))
        n++;
    assert_true(n < outlen);
    memcpy(out, *p, n);
    out[n] = '\0';
    *p += n;
}

/* A sample value, whole token up to the newline. */
static double parse_value(const char *s, const char *nl)
{
    char tok[64];
    size_t n = (size_t)(nl - s);
    assert_true(n > 0 && n < sizeof tok);
    memcpy(tok, s, n);
    tok[n] = '\0';
    if (strcmp(tok, "+Inf") == 0)
        return INFINITY;
    if (strcmp(tok, "-Inf") == 0)
        return -INFINITY;
    if (strcmp(tok, "NaN") == 0)
        return NAN;
    char *end = NULL;
    double v = strtod(tok, &end);
    assert_true(*end == '\0');
    assert_false(isnan(v) || isinf(v)); /* specials only in their spelling */
    return v;
}

/* Checks the histogram series state when a series or family ends. */
static void parse_series_closed(const parse_state *st)
{
    assert_int_equal(st->hstate, 0);
}

static void parse_sample(parse_state *st, const char *p, const char *nl)
{
    char name[160], label[64], series[512] = "";
    double le = NAN;
    parse_name(&p, name, sizeof name, true);
    assert_true(st->type[0] != '\0'); /* HELP and TYPE came first */

    const char *suffix = "";
    size_t flen = strlen(st->fam);
    if (strcmp(st->type, "histogram") == 0) {
        assert_memory_equal(name, st->fam, flen);
        suffix = name + flen;
        assert_true(strcmp(suffix, "_bucket") == 0 || strcmp(suffix, "_sum") == 0 ||
                    strcmp(suffix, "_count") == 0);
    } else {
        assert_string_equal(name, st->fam);
    }

    if (*p == '{') {
        p++;
        for (;;) {
            char value[256];
            size_t vlen = 0;
            parse_name(&p, label, sizeof label, false);
            assert_true(p[0] == '=' && p[1] == '"');
            p += 2;
            for (; *p != '"'; p++) {
                assert_true(p < nl);
                if (*p == '\\') {
                    p++;
                    assert_true(*p == '\\' || *p == '"' || *p == 'n');
                }
                assert_true(vlen + 1 < sizeof value);
                value[vlen++] = *p;
            }
            value[vlen] = '\0';
            p++;
            if (strcmp(label, "le") == 0) {
                le = parse_value(value, value + vlen);
                if (strcmp(value, "+Inf") != 0)
                    assert_true(isfinite(le));
            } else {
                size_t n = strlen(series);
                snprintf(series + n, sizeof series - n, "%s=%s,", label, value);
            }
            if (*p == '}')
                break;
            assert_int_equal(*p, ',');
            p++;
        }
        p++;
    }
    assert_int_equal(*p, ' ');
    double v = parse_value(p + 1, nl);
    st->nsamples++;

    if (strcmp(suffix, "_bucket") == 0) {
        assert_false(isnan(le));
        if (st->hstate == 0) {
            snprintf(st->series, sizeof st->series, "%s", series);
            st->hstate = 1;
            st->prev_le = -INFINITY;
            st->prev_cum = 0;
        }
        assert_int_equal(st->hstate, 1);
        assert_string_equal(series, st->series);
        assert_true(le > st->prev_le);  /* le sorted */
        assert_true(v >= st->prev_cum); /* cumulative */
        st->prev_le = le;
        st->prev_cum = v;
        if (isinf(le)) {
            st->hstate = 2;
            st->inf_count = v;
        }
    } else if (strcmp(suffix, "_sum") == 0) {
        assert_int_equal(st->hstate, 2);
        assert_string_equal(series, st->series);
        st->hstate = 3;
    } else if (strcmp(suffix, "_count") == 0) {
        assert_int_equal(st->hstate, 3);
        assert_string_equal(series, st->series);
        assert_true(v == st->inf_count); /* +Inf bucket = count */
        st->hstate = 0;
    } else {
        assert_true(isnan(le)); /* no le outside histogram buckets */
    }
}

/* Fails the test unless TEXT is valid exposition; returns the sample count. */
static size_t parse_exposition(const char *text, size_t len)
{
    parse_state st;
    memset(&st, 0, sizeof st);
    assert_true(len > 0 && text[len - 1] == '\n');
    assert_int_equal(strlen(text), len);
    for (const char *p = text; p < text + len;) {
        const char *nl = strchr(p, '\n');
        if (strncmp(p, "# HELP ", 7) == 0) {
            parse_series_closed(&st);
            p += 7;
            parse_name(&p, st.fam, sizeof st.fam, true);
            for (size_t i = 0; i < st.nnames; i++)
                assert_string_not_equal(st.names[i], st.fam);
            assert_true(st.nnames < 64);
            snprintf(st.names[st.nnames++], sizeof st.names[0], "%s", st.fam);
            assert_int_equal(*p, ' ');
            for (p++; p < nl; p++) {
                if (*p == '\\') {
                    p++;
                    assert_true(*p == '\\' || *p == 'n');
                }
            }
            st.type[0] = '\0';
        } else if (strncmp(p, "# TYPE ", 7) == 0) {
            char name[128];
            p += 7;
            parse_name(&p, name, sizeof name, true);
            assert_string_equal(name, st.fam);
            assert_int_equal(st.type[0], '\0');
            assert_int_equal(*p, ' ');
            size_t n = (size_t)(nl - p - 1);
            assert_true(n < sizeof st.type);
            memcpy(st.type, p + 1, n);
            st.type[n] = '\0';
            assert_true(strcmp(st.type, "counter") == 0 || strcmp(st.type, "gauge") == 0 ||
                        strcmp(st.type, "histogram") == 0);
        } else {
            assert_int_not_equal(*p, '#');
            parse_sample(&st, p, nl);
        }
        p = nl + 1;
    }
    parse_series_closed(&st);
    return st.nsamples;
}

/* Renders REG, parses it strictly and returns the text (caller frees). */
static char *render_checked(hr_metrics *reg)
{
    hr_buf out;
    hr_buf_init(&out, 1 << 22);
    assert_int_equal(hr_metrics_render(reg, &out), 0);
    parse_exposition(out.data, out.len);
    return out.data;
}

static void assert_has_line(const char *text, const char *line)
{
    char want[512];
    snprintf(want, sizeof want, "\n%s\n", line);
    if (strstr(text, want) == NULL)
        fail_msg("line '%s' not in:\n%s", line, text);
}

/* ---- registration ------------------------------------------------------ */

static void test_register_errors(void **state)
{
    (void)state;
    hr_metrics *reg = hr_metrics_new(0);
    assert_non_null(reg);
    hr_metrics_family *fam = NULL;
    char err[256];
    static const double down[] = {1, 0.5};
    const hr_metrics_spec bad[] = {
        {&fam, "9starts_with_digit", "h", HR_METRICS_COUNTER, "", NULL, 0},
        {&fam, "has-dash", "h", HR_METRICS_COUNTER, "", NULL, 0},
        {&fam, "ok_name", "h", HR_METRICS_COUNTER, "a,a", NULL, 0},
        {&fam, "ok_name", "h", HR_METRICS_COUNTER, "a,", NULL, 0},
        {&fam, "ok_name", "h", HR_METRICS_COUNTER, "__reserved", NULL, 0},
        {&fam, "ok_name", "h", HR_METRICS_COUNTER, "a:b", NULL, 0},
        {&fam, "ok_name", "h", HR_METRICS_HISTOGRAM, "le", HR_METRICS_BUCKETS(down)},
        {&fam, "ok_name", "h", HR_METRICS_HISTOGRAM, "", HR_METRICS_BUCKETS(down)},
        {&fam, "ok_name", "h", HR_METRICS_HISTOGRAM, "", NULL, 0},
        {&fam, "ok_name", "h", HR_METRICS_COUNTER, "a,b,c,d,e,f,g,h,i", NULL, 0},
        {&fam, "herald_metrics_label_overflow_total", "h", HR_METRICS_COUNTER, "", NULL, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(hr_metrics_register(reg, &bad[i], 1, err, sizeof err), -1);
        assert_true(err[0] != '\0');
        assert_null(fam);
    }
    const hr_metrics_spec good = {&fam, "ok_name", "h", HR_METRICS_COUNTER, "a,b", NULL, 0};
    assert_int_equal(hr_metrics_register(reg, &good, 1, err, sizeof err), 0);
    assert_non_null(fam);
    assert_int_equal(hr_metrics_register(reg, &good, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "twice"));
    hr_metrics_free(reg);
    hr_metrics_free(NULL);
}

/* ---- concurrent updates ------------------------------------------------ */

#define NTHREADS 4
#define NITER 20000

typedef struct shared {
    hr_metrics_family *pushes, *inflight, *latency, *plain;
    pthread_barrier_t start;
} shared;

static void *updater(void *arg)
{
    shared *sh = arg;
    /* Every thread looks the same children up, racing to create them. */
    pthread_barrier_wait(&sh->start);
    hr_metrics_child *sent = hr_metrics_labels(sh->pushes, "webhook", "sent");
    hr_metrics_child *failed = hr_metrics_labels(sh->pushes, "webhook", "failed");
    hr_metrics_child *inflight = hr_metrics_labels(sh->inflight, "webhook");
    hr_metrics_child *lat = hr_metrics_labels(sh->latency, "webhook");
    hr_metrics_child *plain = hr_metrics_labels(sh->plain, NULL);
    for (int i = 0; i < NITER; i++) {
        hr_metrics_inc(sent);
        hr_metrics_add(failed, 2);
        hr_metrics_inc(inflight);
        hr_metrics_observe(lat, (i % 4) == 0 ? 0.003 : (i % 4) == 1 ? 0.2 : (i % 4) == 2 ? 1 : 99);
        hr_metrics_dec(inflight);
        hr_metrics_inc(plain);
    }
    return NULL;
}

static void test_concurrent_updates(void **state)
{
    (void)state;
    hr_metrics *reg = hr_metrics_new(0);
    assert_non_null(reg);
    shared sh;
    memset(&sh, 0, sizeof sh);
    const hr_metrics_spec specs[] = {
        {&sh.pushes, "herald_pushes_total", "Pushes by channel and outcome.", HR_METRICS_COUNTER,
         "channel,outcome", NULL, 0},
        {&sh.inflight, "herald_inflight_requests", "Requests in flight.", HR_METRICS_GAUGE,
         "channel", NULL, 0},
        {&sh.latency, "herald_push_latency_seconds", "Push request latency.", HR_METRICS_HISTOGRAM,
         "channel", HR_METRICS_BUCKETS(hr_metrics_buckets_latency)},
        {&sh.plain, "herald_loops_total", "Loop turns.", HR_METRICS_COUNTER, NULL, NULL, 0},
    };
    char err[256];
    assert_int_equal(hr_metrics_register(reg, specs, 4, err, sizeof err), 0);
    pthread_barrier_init(&sh.start, NULL, NTHREADS);
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, updater, &sh), 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&sh.start);

    assert_true(hr_metrics_value(hr_metrics_labels(sh.pushes, "webhook", "sent")) ==
                NTHREADS * NITER);
    char *text = render_checked(reg);
    assert_has_line(text, "herald_pushes_total{channel=\"webhook\",outcome=\"sent\"} 80000");
    assert_has_line(text, "herald_pushes_total{channel=\"webhook\",outcome=\"failed\"} 160000");
    assert_has_line(text, "herald_inflight_requests{channel=\"webhook\"} 0");
    assert_has_line(text, "herald_loops_total 80000");
    assert_has_line(text, "# TYPE herald_push_latency_seconds histogram");
    assert_has_line(text,
                    "herald_push_latency_seconds_bucket{channel=\"webhook\",le=\"0.005\"} 20000");
    assert_has_line(text,
                    "herald_push_latency_seconds_bucket{channel=\"webhook\",le=\"0.1\"} 20000");
    assert_has_line(text,
                    "herald_push_latency_seconds_bucket{channel=\"webhook\",le=\"0.25\"} 40000");
    assert_has_line(text, "herald_push_latency_seconds_bucket{channel=\"webhook\",le=\"1\"} 60000");
    assert_has_line(text,
                    "herald_push_latency_seconds_bucket{channel=\"webhook\",le=\"10\"} 60000");
    assert_has_line(text,
                    "herald_push_latency_seconds_bucket{channel=\"webhook\",le=\"+Inf\"} 80000");
    assert_has_line(text, "herald_push_latency_seconds_count{channel=\"webhook\"} 80000");
    /* 20000 * (0.003 + 0.2 + 1 + 99), summed in some order: close, not exact. */
    const char *sum = strstr(text, "herald_push_latency_seconds_sum{channel=\"webhook\"} ");
    assert_non_null(sum);
    assert_true(fabs(strtod(strchr(sum, ' ') + 1, NULL) - 20000 * 100.203) < 1e-3);
    /* Only the children that were asked for exist: no overflow anywhere. */
    assert_null(strstr(text, "\"_overflow\""));
    assert_has_line(text, "herald_metrics_label_overflow_total{family=\"herald_pushes_total\"} 0");
    free(text);
    hr_metrics_free(reg);
}

/* ---- overflow, escaping, callbacks, floats ------------------------------ */

static void test_overflow(void **state)
{
    (void)state;
    hr_metrics *reg = hr_metrics_new(4);
    assert_non_null(reg);
    hr_metrics_family *fam = NULL, *single = NULL;
    const hr_metrics_spec specs[] = {
        {&fam, "by_user_total", "Bad idea: a user label.", HR_METRICS_COUNTER, "user,kind", NULL,
         0},
        {&single, "single_total", "No labels.", HR_METRICS_COUNTER, "", NULL, 0},
    };
    char err[256];
    assert_int_equal(hr_metrics_register(reg, specs, 2, err, sizeof err), 0);
    hr_metrics_child *kept[4];
    for (int i = 0; i < 4; i++) {
        char uid[16];
        snprintf(uid, sizeof uid, "u%d", i);
        kept[i] = hr_metrics_labels(fam, uid, "x");
        hr_metrics_inc(kept[i]);
    }
    /* Existing children are still found once the family is full. */
    assert_ptr_equal(hr_metrics_labels(fam, "u2", "x"), kept[2]);
    hr_metrics_child *o1 = hr_metrics_labels(fam, "u4", "x");
    hr_metrics_child *o2 = hr_metrics_labels(fam, "u5", "x");
    hr_metrics_child *o3 = hr_metrics_labels(fam, "only-one-value");
    hr_metrics_child *o4 = hr_metrics_labels(fam, "u0", "x", "surplus");
    const char *values[2] = {"u0", NULL};
    hr_metrics_child *o5 = hr_metrics_labelv(fam, values, 2);
    assert_non_null(o1);
    assert_ptr_equal(o1, o2);
    assert_ptr_equal(o1, o3);
    assert_ptr_equal(o1, o4);
    assert_ptr_equal(o1, o5);
    for (int i = 0; i < 4; i++)
        assert_ptr_not_equal(o1, kept[i]);
    hr_metrics_add(o1, 7);
    /* A value for an unlabelled family is counted, and lands on its child. */
    assert_ptr_equal(hr_metrics_labels(single, "x"), hr_metrics_labels(single, NULL));
    assert_null(hr_metrics_labels(NULL, "x"));

    char *text = render_checked(reg);
    assert_has_line(text, "by_user_total{user=\"u3\",kind=\"x\"} 1");
    assert_has_line(text, "by_user_total{user=\"_overflow\",kind=\"_overflow\"} 7");
    assert_has_line(text, "herald_metrics_label_overflow_total{family=\"by_user_total\"} 5");
    assert_has_line(text, "herald_metrics_label_overflow_total{family=\"single_total\"} 1");
    assert_has_line(text, "single_total 0");
    free(text);
    hr_metrics_free(reg);
}

static void test_escaping(void **state)
{
    (void)state;
    hr_metrics *reg = hr_metrics_new(0);
    assert_non_null(reg);
    hr_metrics_family *fam = NULL;
    const hr_metrics_spec spec = {
        &fam, "esc", "Help with \\ backslash,\nnewline and \"quotes\".", HR_METRICS_GAUGE, "v",
        NULL, 0};
    char err[256];
    assert_int_equal(hr_metrics_register(reg, &spec, 1, err, sizeof err), 0);
    hr_metrics_set(hr_metrics_labels(fam, "a\\b\"c\nd"), 1);
    hr_metrics_set(hr_metrics_labels(fam, ""), 2);
    hr_metrics_set(hr_metrics_labels(fam, "caf\xC3\xA9"), 3);
    char *text = render_checked(reg);
    assert_has_line(text, "# HELP esc Help with \\\\ backslash,\\nnewline and \"quotes\".");
    assert_has_line(text, "esc{v=\"a\\\\b\\\"c\\nd\"} 1");
    assert_has_line(text, "esc{v=\"\"} 2");
    assert_has_line(text, "esc{v=\"caf\xC3\xA9\"} 3");
    free(text);
    hr_metrics_free(reg);
}

typedef struct depth {
    double value;
    int calls;
} depth;

static double depth_value(void *ctx)
{
    depth *d = ctx;
    d->calls++;
    return d->value;
}

static void test_callbacks(void **state)
{
    (void)state;
    hr_metrics *reg = hr_metrics_new(0);
    assert_non_null(reg);
    hr_metrics_family *queue = NULL, *lag = NULL, *hist = NULL;
    const hr_metrics_spec specs[] = {
        {&queue, "herald_reporter_queue_depth", "Events queued.", HR_METRICS_GAUGE, "", NULL, 0},
        {&lag, "herald_kafka_lag", "Consumer lag.", HR_METRICS_GAUGE, "partition", NULL, 0},
        {&hist, "herald_due_to_delivery_seconds", "Due to delivery.", HR_METRICS_HISTOGRAM, "",
         HR_METRICS_BUCKETS(hr_metrics_buckets_delivery)},
    };
    char err[256];
    assert_int_equal(hr_metrics_register(reg, specs, 3, err, sizeof err), 0);
    depth d = {12, 0}, p0 = {3, 0};
    hr_metrics_child *q = hr_metrics_labels(queue, NULL);
    hr_metrics_gauge_fn(q, depth_value, &d);
    hr_metrics_gauge_fn(hr_metrics_labels(lag, "0"), depth_value, &p0);
    hr_metrics_set(hr_metrics_labels(lag, "1"), 5);
    hr_metrics_set(q, 99); /* the callback wins */
    assert_true(isnan(hr_metrics_value(q)));
    /* Histograms take no callback and no counter updates. */
    hr_metrics_child *h = hr_metrics_labels(hist, NULL);
    hr_metrics_gauge_fn(h, depth_value, &d);
    hr_metrics_inc(h);
    hr_metrics_observe(h, 700);
    hr_metrics_observe(h, NAN);
    hr_metrics_observe(hr_metrics_labels(lag, "1"), 1); /* not a histogram: ignored */

    char *text = render_checked(reg);
    assert_has_line(text, "herald_reporter_queue_depth 12");
    assert_has_line(text, "herald_kafka_lag{partition=\"0\"} 3");
    assert_has_line(text, "herald_kafka_lag{partition=\"1\"} 5");
    assert_has_line(text, "herald_due_to_delivery_seconds_bucket{le=\"600\"} 0");
    assert_has_line(text, "herald_due_to_delivery_seconds_bucket{le=\"+Inf\"} 1");
    assert_has_line(text, "herald_due_to_delivery_seconds_sum 700");
    assert_has_line(text, "herald_due_to_delivery_seconds_count 1");
    free(text);
    assert_int_equal(d.calls, 1);
    assert_int_equal(p0.calls, 1);

    d.value = NAN;
    p0.value = INFINITY;
    text = render_checked(reg);
    assert_has_line(text, "herald_reporter_queue_depth NaN");
    assert_has_line(text, "herald_kafka_lag{partition=\"0\"} +Inf");
    free(text);

    hr_metrics_gauge_fn(q, NULL, NULL); /* back to the stored value */
    assert_true(hr_metrics_value(q) == 99);
    text = render_checked(reg);
    assert_has_line(text, "herald_reporter_queue_depth 99");
    free(text);
    hr_metrics_free(reg);
}

static void test_float_round_trip(void **state)
{
    (void)state;
    static const double values[] = {0.1,  1.0 / 3, 1e-300,    123456789.123, -2.5,
                                    1e21, 0,       -INFINITY, 5e-324,        9007199254740993.0};
    hr_metrics *reg = hr_metrics_new(0);
    assert_non_null(reg);
    hr_metrics_family *fam = NULL;
    const hr_metrics_spec spec = {&fam, "g", "Floats.", HR_METRICS_GAUGE, "i", NULL, 0};
    char err[256];
    assert_int_equal(hr_metrics_register(reg, &spec, 1, err, sizeof err), 0);
    size_t n = sizeof values / sizeof values[0];
    for (size_t i = 0; i < n; i++) {
        char idx[8];
        snprintf(idx, sizeof idx, "%zu", i);
        hr_metrics_set(hr_metrics_labels(fam, idx), values[i]);
    }
    char *text = render_checked(reg);
    for (size_t i = 0; i < n; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "\ng{i=\"%zu\"} ", i);
        const char *line = strstr(text, prefix);
        assert_non_null(line);
        const char *num = line + strlen(prefix);
        double back = strncmp(num, "-Inf", 4) == 0 ? -INFINITY : strtod(num, NULL);
        assert_true(back == values[i]);
    }
    assert_has_line(text, "g{i=\"0\"} 0.1");
    free(text);
    hr_metrics_free(reg);
}

static void test_render_cap(void **state)
{
    (void)state;
    hr_metrics *reg = hr_metrics_new(0);
    assert_non_null(reg);
    hr_buf out;
    hr_buf_init(&out, 16);
    assert_int_equal(hr_metrics_render(reg, &out), -1);
    assert_true(out.len <= 16);
    hr_buf_free(&out);
    hr_metrics_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_errors), cmocka_unit_test(test_concurrent_updates),
        cmocka_unit_test(test_overflow),        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_callbacks),       cmocka_unit_test(test_float_round_trip),
        cmocka_unit_test(test_render_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
