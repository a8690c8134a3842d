/* herald-bench-webpush: what a web push costs herald's worker in CPU
 * before it leaves (bench/run webpush, docs/performance.md "Web push"):
 * the thread CPU per push of building one request, timed in-process with
 * no network, medians of R rounds of N pushes each:
 *
 *   webhook_prepare    a webhook push's request (wk_xfer_prepare): the
 *                      baseline every HTTP push pays
 *   webpush_prepare    a web push's request (wk_xfer_prepare_webpush): the
 *                      subscription parsed, title and body rendered, the
 *                      plaintext encrypted (RFC 8291), the VAPID token of
 *                      the endpoint's origin (kept), the headers
 *   encrypt            wk_ece_encrypt alone
 *   keygen_ecdh        of that, a new P-256 key pair and the ECDH with the
 *                      subscription's key (OpenSSL's EVP calls wk_ece
 *                      makes): the part RFC 8291 has a sender make anew
 *                      for every message
 *   vapid_sign         a VAPID token signed for every push, as it would be
 *                      without the per-origin cache
 *   vapid_kept         the kept token looked up (what a push pays)
 *
 * The N pushes go to S (-s) subscriptions with keys made here, on 4 push
 * service origins; tokens_signed counts the VAPID tokens
 * webpush_prepare's pushes signed (4: one per origin).  Prints one JSON
 * object.  -c CONFIG with a webpush channel (-C, its vapid_key_file read)
 * and a webhook channel (-W). */
#include <curl/curl.h>
#include <getopt.h>
#include <inttypes.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hr_addr.h"
#include "hr_base64.h"
#include "hr_config.h"
#include "hr_config_file.h"
#include "hr_wpsub.h"
#include "wk_ece.h"
#include "wk_task.h"
#include "wk_webpush.h"
#include "wk_xfer.h"

#define BENCH_ORIGINS 4
#define BENCH_KEY_MAX 16384

enum { B_HOOK, B_PUSH, B_ENCRYPT, B_ECDH, B_SIGN, B_KEPT, B__N };
static const char *const bench_names[B__N] = {"webhook_prepare", "webpush_prepare", "encrypt",
                                              "keygen_ecdh",     "vapid_sign",      "vapid_kept"};

typedef struct bench {
    size_t n, s;
    char (*uids)[24];
    char (*addrs)[HR_ADDR_ADDRESS_MAX + 1];
    hr_wpsub *subs;
    EVP_PKEY **ua; /* the subscriptions' public keys, for keygen_ecdh */
    wk_task *hook, *push;
    wk_xfer *xh, *xp;
    wk_webpush *wp;
    wk_ece *ece;
    hr_buf out;
} bench;

static double bench_cpu_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* S subscriptions: a P-256 key pair and an auth secret each, endpoints on
 * BENCH_ORIGINS origins. */
static int bench_subscriptions(bench *b, char *errstr, size_t errlen)
{
    for (size_t i = 0; i < b->s; i++) {
        unsigned char point[HR_JWT_P256_POINT], auth[HR_WPSUB_AUTH];
        EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
        size_t n = 0;
        hr_buf a;
        int rc;

        if (k == NULL ||
            EVP_PKEY_get_octet_string_param(k, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point,
                                            sizeof point, &n) != 1 ||
            RAND_bytes(auth, sizeof auth) != 1) {
            EVP_PKEY_free(k);
            snprintf(errstr, errlen, "key generation failed");
            return -1;
        }
        b->ua[i] = k;
        hr_buf_init(&a, HR_ADDR_ADDRESS_MAX);
        rc = hr_buf_append(&a, "https://push", 12) != 0 ||
             hr_buf_append_u64(&a, (uint64_t)(i % BENCH_ORIGINS)) != 0 ||
             hr_buf_append(&a, ".example.net/wpush/v2/gAAAAABk", 30) != 0 ||
             hr_buf_append_u64(&a, (uint64_t)i) != 0 || hr_buf_append(&a, "#", 1) != 0 ||
             hr_base64_append(&a, point, sizeof point, HR_BASE64_URL) != 0 ||
             hr_buf_append(&a, ".", 1) != 0 ||
             hr_base64_append(&a, auth, sizeof auth, HR_BASE64_URL) != 0;
        if (rc == 0)
            memcpy(b->addrs[i], a.data, a.len + 1);
        hr_buf_free(&a);
        if (rc != 0 || hr_wpsub_parse(b->addrs[i], &b->subs[i], errstr, errlen) != 0)
            return -1;
    }
    return 0;
}

/* A new key pair and the ECDH with UA, as wk_ece does them. */
static int bench_keygen_ecdh(EVP_PKEY_CTX *keygen, EVP_PKEY *ua)
{
    unsigned char secret[32];
    size_t slen = sizeof secret;
    EVP_PKEY *as = NULL;
    EVP_PKEY_CTX *d = NULL;
    int ok = EVP_PKEY_generate(keygen, &as) == 1 &&
             (d = EVP_PKEY_CTX_new_from_pkey(NULL, as, NULL)) != NULL &&
             EVP_PKEY_derive_init(d) == 1 && EVP_PKEY_derive_set_peer_ex(d, ua, 0) == 1 &&
             EVP_PKEY_derive(d, secret, &slen) == 1;

    EVP_PKEY_CTX_free(d);
    EVP_PKEY_free(as);
    return ok ? 0 : -1;
}

/* One round of N operations of kind K: the thread CPU per operation in
 * microseconds, or -1 when one failed. */
static double bench_round(bench *b, int k, EVP_PKEY_CTX *keygen, int64_t *now_s)
{
    static const char plain[] = "{\"title\":\"Your reminder\",\"body\":\"Hello 1000000001, the "
                                "live show starts now\"}";
    char errstr[256];
    size_t stripped, len;
    double t0 = bench_cpu_us();
    int rc = 0;

    for (size_t i = 0; i < b->n && rc == 0; i++) {
        size_t j = i % b->s;

        switch (k) {
        case B_HOOK:
            rc = wk_xfer_prepare(b->xh, b->hook->ch, b->hook, 0, b->uids[i], NULL, &stripped,
                                 errstr, sizeof errstr);
            break;
        case B_PUSH:
            rc = wk_xfer_prepare_webpush(b->xp, b->wp, b->ece, b->push, 0, b->uids[i], NULL,
                                         b->addrs[j], errstr, sizeof errstr);
            break;
        case B_ENCRYPT:
            hr_buf_reset(&b->out);
            rc = wk_ece_encrypt(b->ece, &b->subs[j], plain, sizeof plain - 1, &b->out, errstr,
                                sizeof errstr);
            break;
        case B_ECDH:
            rc = bench_keygen_ecdh(keygen, b->ua[j]);
            break;
        default:
            /* vapid_sign: a day later every time, so the token is signed
             * again; vapid_kept: the same second. */
            *now_s += k == B_SIGN ? 86400 : 0;
            rc = wk_webpush_auth(b->wp, b->subs[j].endpoint, b->subs[j].endpoint_len, *now_s, &len,
                                 errstr, sizeof errstr) != NULL
                     ? 0
                     : -1;
            break;
        }
    }
    if (rc != 0) {
        fprintf(stderr, "herald-bench-webpush: %s: %s\n", bench_names[k], errstr);
        return -1;
    }
    return (bench_cpu_us() - t0) / (double)b->n;
}

/* The task of CHANNEL, as bench/sendpath.c's. */
static int bench_task(const hr_config *cfg, const char *channel, wk_task **out, char *errstr,
                      size_t errlen)
{
    hr_task *row = calloc(1, sizeof *row);

    if (row == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    row->id = 1;
    row->name = strdup("webpush");
    row->topic = strdup("bench");
    row->channel = strdup(channel);
    row->title = strdup("Your reminder");
    row->body = strdup("Hello {{uid}}, the live show starts now");
    row->lease_until_ms = row->ttl_s = row->finish_ms = row->expire_ms = -1;
    row->chunk_size = 5000;
    /* wk_task_build takes ROW over, built or not. */
    return wk_task_build(cfg, row, NULL, out, errstr, errlen) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *path = NULL, *push_name = NULL, *hook_name = NULL;
    hr_config *cfg = NULL;
    bench b = {.n = 2000, .s = 64};
    EVP_PKEY_CTX *keygen = NULL;
    double *per = NULL, med[B__N];
    size_t rounds = 11, len = 0;
    char errstr[1024], *pem = NULL;
    int64_t now_s = 1700000000;
    uint64_t signed_prepare = 0;
    int opt, rc = 2;

    while ((opt = getopt(argc, argv, "c:C:W:n:r:s:")) != -1) {
        if (opt == 'c')
            path = optarg;
        else if (opt == 'C')
            push_name = optarg;
        else if (opt == 'W')
            hook_name = optarg;
        else if (opt == 'n')
            b.n = strtoul(optarg, NULL, 10);
        else if (opt == 'r')
            rounds = strtoul(optarg, NULL, 10);
        else if (opt == 's')
            b.s = strtoul(optarg, NULL, 10);
        else
            goto usage;
    }
    if (path == NULL || push_name == NULL || hook_name == NULL || optind != argc || b.n == 0 ||
        b.s == 0 || rounds == 0)
        goto usage;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    hr_buf_init(&b.out, WK_ECE_RS);
    b.uids = calloc(b.n, sizeof *b.uids);
    b.addrs = calloc(b.s, sizeof *b.addrs);
    b.subs = calloc(b.s, sizeof *b.subs);
    b.ua = calloc(b.s, sizeof *b.ua);
    per = calloc(rounds, sizeof *per);
    keygen = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (b.uids == NULL || b.addrs == NULL || b.subs == NULL || b.ua == NULL || per == NULL ||
        keygen == NULL || EVP_PKEY_keygen_init(keygen) != 1 ||
        EVP_PKEY_CTX_set_group_name(keygen, "P-256") != 1) {
        snprintf(errstr, sizeof errstr, "out of memory");
        goto fail;
    }
    if (hr_config_load(path, &cfg, errstr, sizeof errstr) != 0 ||
        bench_task(cfg, push_name, &b.push, errstr, sizeof errstr) != 0 ||
        bench_task(cfg, hook_name, &b.hook, errstr, sizeof errstr) != 0)
        goto fail;
    if (b.push->ch->type != HR_CHANNEL_WEBPUSH) {
        snprintf(errstr, sizeof errstr, "channel %s is not a webpush channel", push_name);
        goto fail;
    }
    if (hr_config_read_file(b.push->ch->webpush.vapid_key_file, BENCH_KEY_MAX, &pem, &len, errstr,
                            sizeof errstr) != 0 ||
        wk_webpush_new(pem, len, b.push->ch->webpush.vapid_subject, &b.wp, errstr, sizeof errstr) !=
            0 ||
        wk_ece_new(&b.ece, errstr, sizeof errstr) != 0 ||
        bench_subscriptions(&b, errstr, sizeof errstr) != 0)
        goto fail;
    b.xh = wk_xfer_new(b.hook->ch);
    b.xp = wk_xfer_new(b.push->ch);
    if (b.xh == NULL || b.xp == NULL) {
        snprintf(errstr, sizeof errstr, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < b.n; i++)
        snprintf(b.uids[i], sizeof b.uids[i], "%" PRIu64, (uint64_t)1000000001 + i);
    for (int k = 0; k < B__N; k++) {
        /* A round first to warm the buffers and OpenSSL's tables up. */
        if (bench_round(&b, k, keygen, &now_s) < 0)
            goto fail_quiet;
        for (size_t r = 0; r < rounds; r++)
            if ((per[r] = bench_round(&b, k, keygen, &now_s)) < 0)
                goto fail_quiet;
        qsort(per, rounds, sizeof *per, bench_cmp);
        med[k] = per[rounds / 2];
        if (k == B_PUSH)
            signed_prepare = wk_webpush_signed(b.wp);
    }
    printf("{\"n\": %zu, \"rounds\": %zu, \"subscriptions\": %zu, \"origins\": %d, "
           "\"openssl\": \"%s\", \"us_per_push\": {",
           b.n, rounds, b.s, BENCH_ORIGINS, OpenSSL_version(OPENSSL_VERSION));
    for (int k = 0; k < B__N; k++)
        printf("%s\"%s\": %.2f", k ? ", " : "", bench_names[k], med[k]);
    printf("}, \"webpush_prepare_pushes\": %zu, \"tokens_signed\": %" PRIu64 "}\n",
           b.n * (rounds + 1), signed_prepare);
    rc = 0;
    goto done;
usage:
    fprintf(stderr, "usage: herald-bench-webpush -c CONFIG -C WEBPUSH_CHANNEL -W WEBHOOK_CHANNEL "
                    "[-n N] [-r ROUNDS] [-s SUBSCRIPTIONS]\n");
    return 2;
fail:
    fprintf(stderr, "herald-bench-webpush: %s\n", errstr);
fail_quiet:
    rc = 1;
done:
    free(pem);
    wk_xfer_free(b.xh);
    wk_xfer_free(b.xp);
    wk_webpush_free(b.wp);
    wk_ece_free(b.ece);
    wk_task_free(b.push);
    wk_task_free(b.hook);
    for (size_t i = 0; b.ua != NULL && i < b.s; i++)
        EVP_PKEY_free(b.ua[i]);
    free(b.ua);
    free(b.subs);
    free(b.addrs);
    free(b.uids);
    free(per);
    hr_buf_free(&b.out);
    EVP_PKEY_CTX_free(keygen);
    hr_config_free(cfg);
    curl_global_cleanup();
    return rc;
}
