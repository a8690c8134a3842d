/* hr_pace: pacing and admission arithmetic (see hr_pace.h). */
#include "hr_pace.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int hr_pace_weight(hr_priority p)
{
    return p == HR_PRIORITY_NORMAL ? 1 : 2;
}

int64_t hr_pace_rate(int64_t remaining, int64_t now_ms, int64_t finish_ms, int64_t cap)
{
    int64_t left_ms = finish_ms - now_ms, rate;

    if (left_ms <= 0)
        return cap > 0 ? cap : 0;
    if (remaining <= 0)
        return 1;
    /* The limiter grants whole seconds and a second's pushes start when it
     * begins: spread over the seconds from now to finish_by, both counted,
     * the last ones start at finish_by, not a second before it. */
    rate = (int64_t)ceil((double)remaining * 1000.0 / (double)(left_ms + 1000));
    if (rate < 1)
        rate = 1;
    return cap > 0 && rate > cap ? cap : rate;
}

int64_t hr_pace_planned_done(int64_t total, int64_t due_ms, int64_t finish_ms, int64_t now_ms)
{
    if (now_ms <= due_ms || total <= 0)
        return 0;
    if (now_ms >= finish_ms)
        return total;
    return (int64_t)((double)total * (double)(now_ms - due_ms) / (double)(finish_ms - due_ms));
}

size_t hr_pace_neighbours(const hr_pace_row *rows, size_t n, int64_t id, int64_t due_ms,
                          size_t *pick, size_t max)
{
    size_t lo = 0, hi = n, k = 0;

    /* The first row due no later than a window after DUE_MS (the rows are
     * latest first): with thousands of tasks of a channel read once, an
     * estimate starts where its window does. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (rows[mid].load.due_ms > due_ms + HR_PACE_WINDOW_MS)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < n && k < max; i++) {
        /* A scheduled task due over the lookback before it will not run
         * with it; a running one earlier still may. */
        if (rows[i].id == id ||
            (rows[i].scheduled && rows[i].load.due_ms < due_ms - HR_PACE_LOOKBACK_MS))
            continue;
        pick[k++] = i;
    }
    return k;
}

/* The water-filling of CAPACITY (> 0) over the ACTIVE tasks into RATE:
 * shares by weight, a task capped below its share keeps its cap and the
 * rest is shared again (what share.lua converges to). */
static void pace_fill(const hr_pace_load *loads, const bool *active, size_t n, double capacity,
                      double *rate)
{
    bool settled[HR_PACE_MAX_LOADS] = {false};
    bool changed = true;

    while (changed) {
        double weights = 0;

        changed = false;
        for (size_t i = 0; i < n; i++)
            if (active[i] && !settled[i])
                weights += (double)loads[i].weight;
        if (weights <= 0)
            return;
        for (size_t i = 0; i < n; i++) {
            double share = capacity * (double)loads[i].weight / weights;

            if (active[i] && !settled[i] && loads[i].cap > 0 && (double)loads[i].cap < share) {
                rate[i] = (double)loads[i].cap;
                capacity -= rate[i];
                settled[i] = true;
                changed = true;
            }
        }
        if (!changed)
            for (size_t i = 0; i < n; i++)
                if (active[i] && !settled[i])
                    rate[i] = capacity * (double)loads[i].weight / weights;
    }
}

void hr_pace_estimate_run(const hr_pace_load *loads, size_t n, int64_t capacity,
                          hr_pace_estimate *out)
{
    double left[HR_PACE_MAX_LOADS], t;

    memset(out, 0, sizeof *out);
    out->finish_ms = -1;
    out->at_ms = -1;
    out->sharers = 1;
    if (n == 0)
        return;
    if (n > HR_PACE_MAX_LOADS)
        n = HR_PACE_MAX_LOADS;
    t = (double)loads[0].due_ms;
    for (size_t i = 0; i < n; i++) {
        left[i] = loads[i].size > 0 ? (double)loads[i].size : 0;
        if ((double)loads[i].due_ms < t)
            t = (double)loads[i].due_ms;
    }
    /* Each round starts or ends at least one task: 2n rounds suffice. */
    for (size_t round = 0; round < 2 * n + 2; round++) {
        bool active[HR_PACE_MAX_LOADS] = {false};
        double rate[HR_PACE_MAX_LOADS] = {0}, demand = 0, dt = INFINITY;
        int running = 0;
        bool unbounded = false;

        for (size_t i = 0; i < n; i++) {
            active[i] = (double)loads[i].due_ms <= t && left[i] > 0;
            if (!active[i])
                continue;
            running++;
            if (loads[i].cap > 0)
                demand += (double)loads[i].cap;
            else
                unbounded = true;
        }
        if ((double)loads[0].due_ms <= t && left[0] <= 0) {
            out->finish_ms = (int64_t)ceil(t);
            return;
        }
        if (active[0] && running > out->sharers)
            out->sharers = running;
        if (active[0] && running > 1 && capacity > 0 && (unbounded || demand > (double)capacity) &&
            !out->overbooked) {
            out->overbooked = true;
            out->at_ms = (int64_t)t;
        }
        if (capacity > 0) {
            pace_fill(loads, active, n, (double)capacity, rate);
        } else {
            /* No channel budget: each task at its own cap, an uncapped one
             * ends at once. */
            for (size_t i = 0; i < n; i++) {
                if (active[i] && loads[i].cap > 0)
                    rate[i] = (double)loads[i].cap;
                else if (active[i])
                    left[i] = 0;
            }
            if (active[0] && left[0] <= 0) {
                out->finish_ms = (int64_t)ceil(t);
                return;
            }
        }
        for (size_t i = 0; i < n; i++) {
            if ((double)loads[i].due_ms > t && (double)loads[i].due_ms - t < dt)
                dt = (double)loads[i].due_ms - t;
            if (active[i] && rate[i] > 0 && left[i] * 1000.0 / rate[i] < dt)
                dt = left[i] * 1000.0 / rate[i];
        }
        if (isinf(dt))
            return;
        for (size_t i = 0; i < n; i++) {
            if (!active[i])
                continue;
            left[i] -= rate[i] * dt / 1000.0;
            if (left[i] < 1e-6)
                left[i] = 0;
        }
        t += dt;
    }
}

const char *hr_pace_warn_name(hr_pace_warn_kind k)
{
    static const char *const names[] = {"overbooked", "finish_by", "expire_at"};

    return k < HR_PACE__WARN_KINDS ? names[k] : "?";
}

static void pace_time(int64_t ms, char *buf, size_t len)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;

    gmtime_r(&s, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Appends "; " (unless OUT is empty) and the formatted text. */
static void pace_append(char *out, size_t len, const char *text)
{
    size_t used = strlen(out);

    if (used + 1 >= len)
        return;
    snprintf(out + used, len - used, "%s%s", used > 0 ? "; " : "", text);
}

unsigned hr_pace_warning(const hr_pace_estimate *e, const char *channel, int64_t capacity,
                         int64_t finish_ms, int64_t expire_ms, char *out, size_t len)
{
    char est[32], when[32], text[320];
    unsigned kinds = 0;

    if (len == 0)
        return 0;
    out[0] = '\0';
    if (e->finish_ms < 0)
        return 0;
    pace_time(e->finish_ms, est, sizeof est);
    if (e->overbooked) {
        pace_time(e->at_ms, when, sizeof when);
        snprintf(text, sizeof text,
                 "channel %.64s is overbooked: %d tasks share its %" PRId64
                 " pushes/s from %s; estimated finish %s",
                 channel, e->sharers, capacity, when, est);
        pace_append(out, len, text);
        kinds |= 1u << HR_PACE_WARN_OVERBOOKED;
    }
    if (finish_ms > 0 && e->finish_ms > finish_ms) {
        pace_time(finish_ms, when, sizeof when);
        snprintf(text, sizeof text, "finish_by %s cannot be met: estimated finish %s", when, est);
        pace_append(out, len, text);
        kinds |= 1u << HR_PACE_WARN_FINISH_BY;
    }
    if (expire_ms > 0 && e->finish_ms > expire_ms) {
        pace_time(expire_ms, when, sizeof when);
        snprintf(text, sizeof text, "expire_at %s comes before the estimated finish %s", when, est);
        pace_append(out, len, text);
        kinds |= 1u << HR_PACE_WARN_EXPIRE_AT;
    }
    return kinds;
}
