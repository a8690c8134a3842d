/* herald-bench-consent: what the per-push consent check costs herald
 * (docs/recipients.md, issue 28): a chunk's open as the worker's Redis
 * thread runs it (wk_consent_read + wk_consent_decide), against the
 * configured Redis, on a chunk of N recipients whose profile hashes are
 * there, for a task of a category that is not mandatory (the check) and
 * the same task of a mandatory one (no check), each on a webhook channel
 * (no addresses) and on an smtp one (the addresses read anyway).
 *
 *   herald-bench-consent -c CONFIG [-n RECIPIENTS] [-r ROUNDS] [-m MIX]
 *
 * MIX "plain": no recipient has preferences (the common case); "mixed":
 * 10 % opted out of the category, 10 % of the channel type, 10 % with
 * quiet hours now, 2 % of the addresses suppressed — their
 * acknowledgements and deferrals are written, and the chunk set refilled
 * before each round.  Each round is timed in the thread's CPU
 * (CLOCK_THREAD_CPUTIME_ID: herald's, not Redis's) and in wall time, and
 * the pipelines it executes are counted, a round trip each (the binary is
 * linked with --wrap=hr_pipe_exec: every call the worker's code makes goes
 * through bench_pipe_exec below first).  Prints one
 * JSON object: the median round of each case, per recipient, and the
 * check's own cost (non-mandatory minus mandatory).  Its keys live under
 * the configured prefix + "bench-consent:" and are deleted at the end. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hr_keys.h"
#include "hr_pipe.h"
#include "hr_user.h"
#include "wk_chunk.h"
#include "wk_consent.h"
#include "wk_task.h"

#define BENCH_ROUNDS_MAX 51
#define BENCH_BASE_UID 910000000000LL

/* hr_pipe_exec, counted (-Wl,--wrap=hr_pipe_exec). */
int __real_hr_pipe_exec(hr_pipe *pipe, char *errstr, size_t errlen);
int __wrap_hr_pipe_exec(hr_pipe *pipe, char *errstr, size_t errlen);
static long bench_round_trips;

int __wrap_hr_pipe_exec(hr_pipe *pipe, char *errstr, size_t errlen)
{
    bench_round_trips++;
    return __real_hr_pipe_exec(pipe, errstr, errlen);
}

static double bench_ms(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Writes the profiles and addresses of N recipients under R's prefix; MIXED
 * gives some of them preferences and suppressed addresses.  0 or -1. */
static int bench_fill(hr_redis *r, long n, bool mixed, char *errstr, size_t errlen)
{
    hr_pipe *pipe = hr_pipe_new(r);
    int rc = -1;

    for (long i = 0; pipe != NULL && i < n; i++) {
        char uid[24], ukey[HR_KEY_MAX], akey[HR_KEY_MAX], member[128];
        const char *del[] = {"DEL", ukey, akey};
        const char *hset[] = {"HSET", ukey, "tz", "Europe/Berlin", "name", "Ana", "", ""};
        const char *sadd[] = {"SADD", akey, member};
        int hargc = 6;

        snprintf(uid, sizeof uid, "%lld", BENCH_BASE_UID + i);
        hr_key_user(hr_redis_prefix(r), ukey, sizeof ukey, uid);
        hr_key_addr(hr_redis_prefix(r), akey, sizeof akey, uid);
        snprintf(member, sizeof member, "email  u%s@example.org%s", uid,
                 mixed && i % 50 == 7 ? " bounced" : "");
        if (mixed && i % 10 == 1) {
            hset[6] = HR_USER_F_OPTOUT;
            hset[7] = "marketing/*";
            hargc = 8;
        } else if (mixed && i % 10 == 2) {
            hset[6] = HR_USER_F_OPTOUT;
            hset[7] = "*/webhook,*/smtp";
            hargc = 8;
        } else if (mixed && i % 10 == 3) {
            hset[6] = HR_USER_F_QUIET;
            hset[7] = "0-86399"; /* the whole day but its last second: quiet now */
            hargc = 8;
        }
        if (hr_pipe_cmd(pipe, 3, del, NULL) != 0 || hr_pipe_cmd(pipe, hargc, hset, NULL) != 0 ||
            hr_pipe_cmd(pipe, 3, sadd, NULL) != 0)
            goto done;
    }
    rc = pipe != NULL ? hr_pipe_exec_all(pipe, errstr, errlen) : -1;
done:
    if (rc != 0 && errstr[0] == '\0')
        snprintf(errstr, errlen, "out of memory");
    hr_pipe_free(pipe);
    return rc;
}

/* The chunk set of C refilled with the N members (what a round's acks and
 * deferrals take out), its wait set emptied.  0 or -1. */
static int bench_refill(hr_redis *r, const wk_chunk *c, const redisReply *members, char *errstr,
                        size_t errlen)
{
    hr_pipe *pipe = hr_pipe_new(r);
    const char *del[] = {"DEL", c->k_set, c->k_wait, c->k_waves, c->k_stats};
    int rc = -1;

    if (pipe == NULL || hr_pipe_cmd(pipe, 5, del, NULL) != 0)
        goto done;
    for (size_t i = 0; i < members->elements; i++) {
        const char *sadd[] = {"SADD", c->k_set, members->element[i]->str};

        if (hr_pipe_cmd(pipe, 3, sadd, NULL) != 0)
            goto done;
    }
    rc = hr_pipe_exec_all(pipe, errstr, errlen);
done:
    hr_pipe_free(pipe);
    return rc;
}

typedef struct bench_case {
    const char *name;
    const char *channel; /* the config's channel of that name */
    const char *category;
} bench_case;

typedef struct bench_result {
    double cpu_us_per_push, wall_us_per_push;
    double round_trips; /* pipelines executed per round */
    double pushed, opted_out, suppressed, deferred;
} bench_result;

/* ROUNDS rounds of one case; the median into *OUT.  0 or -1. */
static int bench_case_run(const hr_config *cfg, hr_redis *r, const bench_case *bc,
                          const redisReply *members, int rounds, bool mixed, bench_result *out,
                          char *errstr, size_t errlen)
{
    double cpu[BENCH_ROUNDS_MAX], wall[BENCH_ROUNDS_MAX];
    hr_task *row = calloc(1, sizeof *row);
    hr_chunkmsg msg = {.task = 7700000001, .seq = 1, .count = (int64_t)members->elements};
    wk_task *wt = NULL;
    wk_chunk *c = NULL;
    hr_addr_platform platform = HR_ADDR_EMAIL;
    bool addressed;
    int rc = -1;

    if (row == NULL || (row->channel = strdup(bc->channel)) == NULL ||
        (row->category = strdup(bc->category)) == NULL) {
        hr_task_free(row);
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    row->id = msg.task;
    row->chunk_size = 5000;
    row->due_ms = 1;
    row->priority = HR_PRIORITY_HIGH;
    if (wk_task_build(cfg, row, NULL, &wt, errstr, errlen) != 0)
        return -1;
    addressed = wt->ch->type == HR_CHANNEL_SMTP;
    c = wk_chunk_new(hr_redis_prefix(r), &msg, 0, 0, wt, 100, NULL, NULL);
    if (c == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    memset(out, 0, sizeof *out);
    for (int k = 0; k < rounds; k++) {
        wk_consent cs = {0};
        double c0, w0;

        if (mixed && bench_refill(r, c, members, errstr, errlen) != 0)
            goto done;
        bench_round_trips = 0;
        c0 = bench_ms(CLOCK_THREAD_CPUTIME_ID);
        w0 = bench_ms(CLOCK_MONOTONIC);
        if (wk_consent_read(&cs, r, c, members, 0, members->elements, addressed ? &platform : NULL,
                            "", errstr, errlen) != 0 ||
            wk_consent_decide(&cs, r, c, members, 1800000000000LL, errstr, errlen) != 0) {
            wk_consent_free(&cs);
            goto done;
        }
        cpu[k] = bench_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
        wall[k] = bench_ms(CLOCK_MONOTONIC) - w0;
        out->round_trips = (double)bench_round_trips;
        out->pushed = out->opted_out = out->suppressed = 0;
        for (size_t i = 0; i < members->elements; i++)
            out->pushed += cs.verdicts[i] == WK_CONSENT_PUSH;
        out->opted_out = (double)cs.opted_out;
        out->suppressed = (double)cs.suppressed;
        out->deferred = (double)cs.deferred;
        wk_consent_free(&cs);
    }
    qsort(cpu, (size_t)rounds, sizeof *cpu, bench_cmp);
    qsort(wall, (size_t)rounds, sizeof *wall, bench_cmp);
    out->cpu_us_per_push = cpu[rounds / 2] * 1000.0 / (double)members->elements;
    out->wall_us_per_push = wall[rounds / 2] * 1000.0 / (double)members->elements;
    rc = 0;
done:
    if (c != NULL) {
        const char *del[] = {"DEL", c->k_set, c->k_wait, c->k_waves, c->k_stats};
        char e2[128];

        freeReplyObject(hr_redis_cmd(r, e2, sizeof e2, 5, del, NULL));
        c->task = NULL;
        wk_chunk_free(c);
    }
    wk_task_free(wt);
    return rc;
}

int main(int argc, char **argv)
{
    const char *path = NULL, *mix = "plain";
    long n = 5000;
    int rounds = 21, opt;
    hr_config *cfg = NULL;
    hr_redis *r = NULL;
    redisReply *members = NULL;
    char errstr[512] = "", prefix[HR_KEYS_PREFIX_MAX + 32];
    static const bench_case cases[] = {
        {"webhook_checked", "bench-hook", "marketing"},
        {"webhook_mandatory", "bench-hook", "security"},
        {"smtp_checked", "bench-mail", "marketing"},
        {"smtp_mandatory", "bench-mail", "security"},
    };
    bench_result res[4];
    int rc = 1;

    while ((opt = getopt(argc, argv, "c:n:r:m:")) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 'n':
            n = strtol(optarg, NULL, 10);
            break;
        case 'r':
            rounds = atoi(optarg);
            break;
        case 'm':
            mix = optarg;
            break;
        default:
            goto usage;
        }
    }
    if (path == NULL || n < 1 || n > 100000 || rounds < 1 || rounds > BENCH_ROUNDS_MAX ||
        (strcmp(mix, "plain") != 0 && strcmp(mix, "mixed") != 0))
        goto usage;
    if (hr_config_load(path, &cfg, errstr, sizeof errstr) != 0)
        goto fail;
    /* Keys of our own, beside whatever else the prefix holds. */
    snprintf(prefix, sizeof prefix, "%sbench-consent:", cfg->redis.prefix);
    free(cfg->redis.prefix);
    cfg->redis.prefix = strdup(prefix);
    if (cfg->redis.prefix == NULL || hr_config_channel(cfg, "bench-hook") == NULL ||
        hr_config_channel(cfg, "bench-mail") == NULL ||
        hr_config_category(cfg, "marketing") == NULL ||
        hr_config_category(cfg, "security") == NULL) {
        snprintf(errstr, sizeof errstr,
                 "the config needs channels bench-hook (webhook) and bench-mail (smtp) and "
                 "categories marketing and security (mandatory)");
        goto fail;
    }
    if (hr_redis_connect(cfg, &r, errstr, sizeof errstr) != 0 ||
        bench_fill(r, n, strcmp(mix, "mixed") == 0, errstr, sizeof errstr) != 0)
        goto fail;
    {
        char key[HR_KEY_MAX];
        redisReply *mark = hr_redis_cmdf(r, errstr, sizeof errstr, "SET %s 1 EX 3600",
                                         hr_key_user_synced(prefix, key, sizeof key));

        freeReplyObject(mark);
        mark = hr_redis_cmdf(r, errstr, sizeof errstr, "SET %s 1 EX 3600",
                             hr_key_addr_synced(prefix, key, sizeof key));
        freeReplyObject(mark);
    }
    /* The chunk's members as the open's SMEMBERS gives them. */
    members = calloc(1, sizeof *members);
    if (members == NULL || (members->element = calloc((size_t)n, sizeof *members->element)) == NULL)
        goto fail;
    members->type = REDIS_REPLY_ARRAY;
    members->elements = (size_t)n;
    for (long i = 0; i < n; i++) {
        redisReply *m = calloc(1, sizeof *m);

        if (m == NULL || (m->str = malloc(24)) == NULL)
            goto fail;
        m->type = REDIS_REPLY_STRING;
        m->len = (size_t)snprintf(m->str, 24, "%lld", BENCH_BASE_UID + i);
        members->element[i] = m;
    }
    for (size_t k = 0; k < 4; k++)
        if (bench_case_run(cfg, r, &cases[k], members, rounds, strcmp(mix, "mixed") == 0, &res[k],
                           errstr, sizeof errstr) != 0)
            goto fail;
    printf("{\"n\": %ld, \"rounds\": %d, \"mix\": \"%s\"", n, rounds, mix);
    for (size_t k = 0; k < 4; k++)
        printf(", \"%s\": {\"cpu_us_per_push\": %.4f, \"wall_us_per_push\": %.4f, "
               "\"round_trips\": %.0f, \"pushed\": %.0f, \"opted_out\": %.0f, "
               "\"suppressed\": %.0f, \"deferred\": %.0f}",
               cases[k].name, res[k].cpu_us_per_push, res[k].wall_us_per_push, res[k].round_trips,
               res[k].pushed, res[k].opted_out, res[k].suppressed, res[k].deferred);
    printf(", \"check_cpu_us_per_push_webhook\": %.4f, \"check_cpu_us_per_push_smtp\": %.4f, "
           "\"extra_round_trips_per_push_smtp\": %.4f}\n",
           res[0].cpu_us_per_push - res[1].cpu_us_per_push,
           res[2].cpu_us_per_push - res[3].cpu_us_per_push,
           (res[2].round_trips - res[3].round_trips) / (double)n);
    rc = 0;
    goto done;
usage:
    fprintf(stderr,
            "usage: herald-bench-consent -c CONFIG [-n RECIPIENTS] [-r ROUNDS] [-m plain|mixed]\n");
    rc = 2;
    goto done;
fail:
    fprintf(stderr, "herald-bench-consent: %s\n", errstr[0] ? errstr : "out of memory");
done:
    if (r != NULL) {
        char match[HR_KEY_MAX + 2], e2[128], cursor[32] = "0";

        /* Our keys go: the prefix is ours alone. */
        snprintf(match, sizeof match, "%s*", prefix);
        do {
            redisReply *reply =
                hr_redis_cmdf(r, e2, sizeof e2, "SCAN %s MATCH %s COUNT 1000", cursor, match);

            if (reply == NULL)
                break;
            snprintf(cursor, sizeof cursor, "%s", reply->element[0]->str);
            for (size_t i = 0; i < reply->element[1]->elements; i++)
                freeReplyObject(hr_redis_cmdf(r, e2, sizeof e2, "UNLINK %s",
                                              reply->element[1]->element[i]->str));
            freeReplyObject(reply);
        } while (strcmp(cursor, "0") != 0);
    }
    freeReplyObject(members);
    hr_redis_free(r);
    hr_config_free(cfg);
    return rc;
}
