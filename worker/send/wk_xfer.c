/* wk_xfer: one HTTP request of a push (see wk_xfer.h). */
#include "wk_xfer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "hr_addr.h"
#include "hr_clock.h"
#include "hr_wpsub.h"
#include "wk_push.h"
#include "wk_smtp.h"

#define WK_XFER_BODY_MAX (256 * 1024)
/* A string literal and its length, for wk_xfer_header_add. */
#define WK_XFER_LIT(s) s, sizeof s - 1
/* Header lines a request adds to its channel's: a webhook's
 * Idempotency-Key and three signature headers, and "Expect:". */
#define WK_XFER_OWN_HEADERS 5
/* A web push's: Authorization, TTL, Urgency, Topic, Content-Encoding,
 * Content-Type and "Expect:". */
#define WK_XFER_WEBPUSH_HEADERS 7
#define WK_XFER_ID_MAX 96 /* "herald-<task>-<uid or batch key>" */
/* A batched request's body cap, and its answer's: room for every
 * recipient's item and result. */
#define WK_XFER_BATCH_BODY_MAX (8 * 1024 * 1024)
#define WK_XFER_BATCH_RESULT 256

/* A webhook's response body is not read, but a batched one's (its
 * per-recipient results), up to the buffer's cap; the rest is dropped (and
 * the answer then garbled). */
static size_t wk_xfer_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    wk_xfer *x = userdata;
    size_t n = size * nmemb, room = x->resp.max - x->resp.len;

    if (x->keep_resp && room > 0)
        hr_buf_append(&x->resp, ptr, n < room ? n : room);
    return n;
}

/* smtp: the message to upload, from BODY. */
static size_t wk_xfer_read(char *buf, size_t size, size_t nitems, void *userdata)
{
    wk_xfer *x = userdata;
    size_t left = x->req.body.len - x->upload_off, n = size * nitems;

    if (n > left)
        n = left;
    memcpy(buf, x->req.body.data + x->upload_off, n);
    x->upload_off += n;
    return n;
}

/* smtp: keeps the server's last refusal ("550 5.1.1 <a@b>: ...", a 4xx
 * or 5xx reply line) in RESP for wk_smtp_classify: libcurl reports the
 * code alone, and a QUIT's "221" may follow the refusal. */
static int wk_xfer_debug(CURL *e, curl_infotype type, char *data, size_t size, void *userdata)
{
    wk_xfer *x = userdata;

    (void)e;
    if (type != CURLINFO_HEADER_IN || size == 0 || (data[0] != '4' && data[0] != '5'))
        return 0;
    while (size > 0 && (data[size - 1] == '\n' || data[size - 1] == '\r'))
        size--;
    hr_buf_reset(&x->resp);
    hr_buf_append(&x->resp, data, size < x->resp.max ? size : x->resp.max);
    return 0;
}

/* The easy options of an smtp channel's handle. */
static void wk_xfer_smtp_setup(wk_xfer *x, const hr_channel *ch)
{
    CURL *e = x->easy;

    curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, wk_xfer_read);
    curl_easy_setopt(e, CURLOPT_READDATA, x);
    curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
    curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, wk_xfer_debug);
    curl_easy_setopt(e, CURLOPT_DEBUGDATA, x);
    /* smtps:// is TLS from the start; on smtp:// STARTTLS is required
     * unless the channel allows a relay without it. */
    curl_easy_setopt(e, CURLOPT_USE_SSL,
                     ch->smtp.require_starttls ? (long)CURLUSESSL_ALL : (long)CURLUSESSL_TRY);
    curl_easy_setopt(e, CURLOPT_URL, ch->url);
    if (ch->smtp.username != NULL) {
        curl_easy_setopt(e, CURLOPT_USERNAME, ch->smtp.username);
        curl_easy_setopt(e, CURLOPT_PASSWORD, ch->smtp.password ? ch->smtp.password : "");
    }
}

/* A webhook channel's URL that names no variable renders to itself
 * (hr_template: literals are never changed): parsed once into X->uh, with
 * the flags libcurl 7.88 parses a CURLOPT_URL with. */
static void wk_xfer_url_once(wk_xfer *x, const hr_channel *ch)
{
    if (ch->type != HR_CHANNEL_WEBHOOK || ch->url == NULL || strstr(ch->url, "{{") != NULL ||
        (x->uh = curl_url()) == NULL)
        return;
    if (curl_url_set(x->uh, CURLUPART_URL, ch->url,
                     CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK) {
        curl_url_cleanup(x->uh);
        x->uh = NULL;
        return;
    }
    curl_easy_setopt(x->easy, CURLOPT_CURLU, x->uh);
}

static size_t wk_xfer_header(char *buf, size_t size, size_t nitems, void *userdata)
{
    wk_xfer *x = userdata;
    size_t n = size * nitems;
    static const char name[] = "retry-after:";

    if (n > sizeof name - 1 && strncasecmp(buf, name, sizeof name - 1) == 0)
        x->retry_after_s = wk_provider_retry_after(buf + sizeof name - 1, n - (sizeof name - 1),
                                                   hr_clock_now_ms() / 1000);
    return n;
}

wk_xfer *wk_xfer_new(const hr_channel *ch)
{
    wk_xfer *x = calloc(1, sizeof *x);
    CURL *e;

    if (x == NULL)
        return NULL;
    e = x->easy = curl_easy_init();
    if (e == NULL) {
        free(x);
        return NULL;
    }
    wk_task_out_init(&x->req);
    hr_buf_init(&x->resp, WK_PROVIDER_BODY_MAX);
    if (ch->batch > 1) {
        /* A batch's answer is read (one result per recipient), its body
         * holds every recipient's item. */
        x->keep_resp = true;
        hr_buf_init(&x->resp, WK_PROVIDER_BODY_MAX + (size_t)ch->batch * WK_XFER_BATCH_RESULT);
        hr_buf_init(&x->req.body, WK_XFER_BATCH_BODY_MAX);
        x->pushes = calloc((size_t)ch->batch, sizeof *x->pushes);
        if (x->pushes == NULL) {
            wk_xfer_free(x);
            return NULL;
        }
    }
    x->hcap = ch->nheaders +
              (ch->type == HR_CHANNEL_WEBPUSH ? WK_XFER_WEBPUSH_HEADERS : WK_XFER_OWN_HEADERS);
    hr_buf_init(&x->plain, WK_ECE_PLAIN_MAX);
    x->hnodes = calloc(x->hcap, sizeof *x->hnodes);
    if (x->hnodes == NULL) {
        wk_xfer_free(x);
        return NULL;
    }
    for (size_t i = 0; i < WK_TASK__MAIL; i++)
        hr_buf_init(&x->mail[i], WK_XFER_BODY_MAX);
    /* hr_config checked every secret: a failure here is not expected, and
     * a handle that cannot sign is not made. */
    for (size_t i = 0; i < ch->nsigning_secrets; i++) {
        char errstr[128];
        if (hr_sign_secret_parse(ch->signing_secrets[i], &x->secrets[i], errstr, sizeof errstr) <
            0) {
            wk_xfer_free(x);
            return NULL;
        }
        x->nsecrets++;
    }
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)ch->timeout_ms);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, wk_xfer_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, wk_xfer_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    if (ch->type == HR_CHANNEL_SMTP)
        wk_xfer_smtp_setup(x, ch);
    wk_xfer_url_once(x, ch);
    /* A webhook over HTTP/2, and every web push (to https:// endpoints:
     * HTTP/2 when the push service's ALPN offers it, else HTTP/1.1):
     * requests multiplexed as streams (PIPEWAIT: on a connection already
     * open rather than a new one, within the server's
     * SETTINGS_MAX_CONCURRENT_STREAMS, which curl honours). */
    if (ch->http2 || ch->type == HR_CHANNEL_WEBPUSH) {
        bool tls = ch->url == NULL || strncasecmp(ch->url, "https:", 6) == 0;

        curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                         tls ? (long)CURL_HTTP_VERSION_2TLS
                             : (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
        curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    }
    if (ch->type == HR_CHANNEL_SMTP) {
        /* no HTTP method */
    } else if (strcasecmp(ch->method, "GET") == 0) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        if (strcasecmp(ch->method, "POST") != 0)
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, ch->method);
    }
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, ch->tls_verify ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, ch->tls_verify ? 2L : 0L);
    if (ch->ca_file != NULL)
        curl_easy_setopt(e, CURLOPT_CAINFO, ch->ca_file);
    return x;
}

void wk_xfer_free(wk_xfer *x)
{
    if (x == NULL)
        return;
    curl_easy_cleanup(x->easy);
    curl_url_cleanup(x->uh);
    free(x->hnodes);
    free(x->pushes);
    wk_task_out_free(&x->req);
    hr_buf_free(&x->resp);
    for (size_t i = 0; i < WK_TASK__MAIL; i++)
        hr_buf_free(&x->mail[i]);
    curl_slist_free_all(x->rcpt);
    hr_buf_free(&x->plain);
    OPENSSL_cleanse(x->secrets, sizeof x->secrets);
    free(x);
}

/* Appends the header line A B (B may be NULL when BLEN is 0) to X's request.  0, or -1
 * with ERRSTR past the buffer's cap or the list's size. */
static int wk_xfer_header_add(wk_xfer *x, const char *a, size_t alen, const char *b, size_t blen,
                              char *errstr, size_t errlen)
{
    hr_buf *h = &x->req.headers;
    size_t before = h->len;

    if (x->req.nheaders == x->hcap || hr_buf_append(h, a, alen) != 0 ||
        (blen > 0 && hr_buf_append(h, b, blen) != 0) || hr_buf_append(h, "", 1) != 0) {
        h->len = before;
        snprintf(errstr, errlen, "request headers exceed their size cap");
        return -1;
    }
    x->req.nheaders++;
    return 0;
}

/* The Idempotency-Key of TASK and WHAT (a uid, or a batch's "b<hash>") into
 * ID: "herald-<task>-<what>", the id at most 20 digits, WHAT cut at 64
 * bytes; its length. */
static size_t wk_xfer_id(const wk_task *task, const char *what, char id[WK_XFER_ID_MAX])
{
    static const char prefix[] = "herald-";
    size_t n = sizeof prefix - 1, wlen = strnlen(what, 64);

    memcpy(id, prefix, n);
    memcpy(id + n, task->id_text, task->id_len);
    n += task->id_len;
    id[n++] = '-';
    memcpy(id + n, what, wlen);
    n += wlen;
    id[n] = '\0';
    return n;
}

/* The Idempotency-Key ID (N bytes) and, with secrets, the Standard
 * Webhooks headers over the rendered body (see wk_xfer.h). */
static int wk_xfer_sign(wk_xfer *x, const char *id, size_t n, char *errstr, size_t errlen)
{
    hr_buf *h = &x->req.headers;
    size_t before;
    int64_t now_s = hr_clock_now_ms() / 1000;

    if (wk_xfer_header_add(x, WK_XFER_LIT("Idempotency-Key: "), id, n, errstr, errlen) < 0)
        return -1;
    if (x->nsecrets == 0)
        return 0;
    if (wk_xfer_header_add(x, WK_XFER_LIT("webhook-id: "), id, n, errstr, errlen) < 0)
        return -1;
    before = h->len;
    if (x->req.nheaders + 2 > x->hcap ||
        hr_buf_append(h, WK_XFER_LIT("webhook-timestamp: ")) != 0 ||
        hr_buf_append_i64(h, now_s) != 0 || hr_buf_append(h, "", 1) != 0 ||
        hr_buf_append(h, WK_XFER_LIT("webhook-signature: ")) != 0 ||
        hr_sign_append(x->secrets, x->nsecrets, id, now_s, x->req.body.data ? x->req.body.data : "",
                       x->req.body.len, h, errstr, errlen) < 0 ||
        hr_buf_append(h, "", 1) != 0) {
        h->len = before;
        if (errstr[0] == '\0')
            snprintf(errstr, errlen, "webhook signature: over the buffer's cap");
        return -1;
    }
    x->req.nheaders += 2;
    return 0;
}

/* Hands X's URL (unless parsed once), body (unless GET) and header lines (plus an empty
 * "Expect:") to curl and resets what a response fills in.  0, or -1 with
 * ERRSTR. */
static int wk_xfer_arm(wk_xfer *x, bool get, char *errstr, size_t errlen)
{
    char *line;

    /* curl would add "Expect: 100-continue" to larger POSTs: a wasted
     * round trip per push. */
    if (wk_xfer_header_add(x, WK_XFER_LIT("Expect:"), NULL, 0, errstr, errlen) < 0)
        return -1;
    /* The lines are final: the nodes may point into the buffer now. */
    line = x->req.headers.data;
    for (size_t i = 0; i < x->req.nheaders; i++) {
        x->hnodes[i].data = line;
        x->hnodes[i].next = i + 1 < x->req.nheaders ? &x->hnodes[i + 1] : NULL;
        line += strlen(line) + 1;
    }
    if (x->uh == NULL)
        curl_easy_setopt(x->easy, CURLOPT_URL, x->req.url.data);
    curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->hnodes);
    if (!get) {
        curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE, (long)x->req.body.len);
        curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->req.body.data ? x->req.body.data : "");
    }
    hr_buf_reset(&x->resp);
    x->errbuf[0] = '\0';
    x->retry_after_s = -1;
    x->start_ms = hr_clock_now_ms();
    return 0;
}

int wk_xfer_prepare(wk_xfer *x, const hr_channel *ch, const wk_task *task, unsigned variant,
                    const char *uid, const redisReply *user, size_t *stripped, char *errstr,
                    size_t errlen)
{
    char id[WK_XFER_ID_MAX];

    errstr[0] = '\0';
    if (wk_task_render(task, variant, uid, user, &x->req, errstr, errlen) != 0)
        return -1;
    *stripped = x->req.stripped;
    if (wk_xfer_sign(x, id, wk_xfer_id(task, uid, id), errstr, errlen) < 0)
        return -1;
    return wk_xfer_arm(x, strcasecmp(ch->method, "GET") == 0, errstr, errlen);
}

/* A batch's part of its Idempotency-Key into OUT: "b" and 16 hex digits of
 * the SHA-256 of its N recipients' uids in order, so the same recipients
 * sent again (a retry of the whole request, a redelivered chunk cut the
 * same way) repeat it.  0, or -1 when the digest failed (out of memory):
 * a key shared by two batches would let a receiver drop one of them. */
static int wk_xfer_batch_key(struct wk_push *const *pushes, size_t n, char out[18])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char d[EVP_MAX_MD_SIZE];
    EVP_MD_CTX *sha = EVP_MD_CTX_new();
    bool ok = sha != NULL && EVP_DigestInit_ex(sha, EVP_sha256(), NULL) == 1;

    for (size_t i = 0; ok && i < n; i++)
        ok = EVP_DigestUpdate(sha, pushes[i]->uid, strlen(pushes[i]->uid) + 1) == 1;
    ok = ok && EVP_DigestFinal_ex(sha, d, NULL) == 1;
    EVP_MD_CTX_free(sha);
    if (!ok)
        return -1;
    out[0] = 'b';
    for (size_t i = 0; i < 8; i++) {
        out[1 + 2 * i] = hex[d[i] >> 4];
        out[2 + 2 * i] = hex[d[i] & 15];
    }
    out[17] = '\0';
    return 0;
}

int wk_xfer_prepare_batch(wk_xfer *x, const hr_channel *ch, const wk_task *task,
                          struct wk_push *const *pushes, size_t n, size_t *stripped, char *errstr,
                          size_t errlen)
{
    const char *items = strstr(ch->batch_body, HR_CHANNEL_BATCH_ITEMS);
    const char *after = items + sizeof HR_CHANNEL_BATCH_ITEMS - 1;
    hr_buf *body = &x->req.body;
    char id[WK_XFER_ID_MAX], key[18];

    errstr[0] = '\0';
    /* URL and headers name no recipient (hr_config): rendered once. */
    if (wk_task_render(task, pushes[0]->variant, pushes[0]->uid, pushes[0]->user, &x->req, errstr,
                       errlen) != 0)
        return -1;
    *stripped = x->req.stripped;
    hr_buf_reset(body);
    if (hr_buf_append(body, ch->batch_body, (size_t)(items - ch->batch_body)) != 0)
        goto cap;
    for (size_t i = 0; i < n; i++) {
        if ((i > 0 && hr_buf_append(body, ",", 1) != 0) ||
            wk_task_render_item(task, pushes[i]->variant, pushes[i]->uid, pushes[i]->user, &x->req,
                                body, errstr, errlen) != 0)
            goto cap;
    }
    if (hr_buf_append(body, after, strlen(after)) != 0)
        goto cap;
    if (wk_xfer_batch_key(pushes, n, key) != 0) {
        snprintf(errstr, errlen, "batch key: SHA-256 failed");
        return -1;
    }
    if (wk_xfer_sign(x, id, wk_xfer_id(task, key, id), errstr, errlen) < 0)
        return -1;
    return wk_xfer_arm(x, false, errstr, errlen);
cap:
    snprintf(errstr, errlen, "batch of %zu over the request body's cap", n);
    return -1;
}

int wk_xfer_prepare_smtp(wk_xfer *x, const hr_channel *ch, const wk_task *task, unsigned variant,
                         const char *uid, const redisReply *user, const char *to, char *errstr,
                         size_t errlen)
{
    unsigned char d[SHA256_DIGEST_LENGTH];
    char id[128], rcpt[HR_ADDR_ADDRESS_MAX + 3];
    const char *unsub;
    struct curl_slist *list;
    wk_smtp_mail m = {.from = ch->smtp.from,
                      .from_name = ch->smtp.from_name,
                      .to = to,
                      .message_id = id,
                      .now_s = hr_clock_now_ms() / 1000};

    if (wk_task_render_mail(task, variant, uid, user, x->mail, errstr, errlen) != 0)
        return -1;
    SHA256((const unsigned char *)to, strlen(to), d);
    snprintf(id, sizeof id, "herald.%" PRId64 ".%.40s.%02x%02x%02x%02x%02x%02x", task->row->id, uid,
             d[0], d[1], d[2], d[3], d[4], d[5]);
    m.subject = x->mail[WK_TASK_SUBJECT].data ? x->mail[WK_TASK_SUBJECT].data : "";
    m.text = x->mail[WK_TASK_TEXT].data;
    m.html = x->mail[WK_TASK_HTML].data;
    unsub = x->mail[WK_TASK_UNSUBSCRIBE].data;
    if (unsub != NULL && strncasecmp(unsub, "mailto:", 7) == 0)
        m.unsubscribe_mailto = unsub + 7;
    else
        m.unsubscribe_url = unsub;
    hr_buf_reset(&x->req.body);
    if (wk_smtp_message_build(&m, &x->req.body, errstr, errlen) != 0)
        return -1;
    snprintf(rcpt, sizeof rcpt, "<%s>", to);
    list = curl_slist_append(NULL, rcpt);
    if (list == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    curl_slist_free_all(x->rcpt);
    x->rcpt = list;
    snprintf(rcpt, sizeof rcpt, "<%s>", ch->smtp.from);
    curl_easy_setopt(x->easy, CURLOPT_MAIL_FROM, rcpt);
    curl_easy_setopt(x->easy, CURLOPT_MAIL_RCPT, x->rcpt);
    curl_easy_setopt(x->easy, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->req.body.len);
    x->upload_off = 0;
    hr_buf_reset(&x->resp);
    x->errbuf[0] = '\0';
    x->retry_after_s = -1;
    x->start_ms = hr_clock_now_ms();
    return 0;
}

int wk_xfer_prepare_webpush(wk_xfer *x, wk_webpush *wp, wk_ece *ece, const wk_task *task,
                            unsigned variant, const char *uid, const redisReply *user,
                            const char *address, char *errstr, size_t errlen)
{
    char num[HR_BUF_I64_MAX], topic[WK_WEBPUSH_TOPIC_MAX + 1];
    const char *urgency = task->row->priority == HR_PRIORITY_HIGH ? "high" : "normal", *auth;
    int64_t ttl = task->row->ttl_s >= 0 ? task->row->ttl_s : WK_WEBPUSH_TTL_DEFAULT;
    size_t alen = 0;
    hr_wpsub sub;

    errstr[0] = '\0';
    if (hr_wpsub_split(address, &sub, errstr, errlen) != 0 ||
        wk_task_render_texts(task, variant, uid, user, &x->req.title, &x->req.text, errstr,
                             errlen) != 0)
        return -1;
    hr_buf_reset(&x->plain);
    if (wk_webpush_plaintext(x->req.title.data ? x->req.title.data : "",
                             x->req.text.data ? x->req.text.data : "",
                             wk_task_content(task, variant)->payload,
                             task->has_rich ? &task->rich : NULL, &x->plain) != 0) {
        snprintf(errstr, errlen, "webpush: message over %d bytes", WK_ECE_PLAIN_MAX);
        return -1;
    }
    hr_buf_reset(&x->req.url);
    hr_buf_reset(&x->req.body);
    hr_buf_reset(&x->req.headers);
    x->req.nheaders = 0;
    if (hr_buf_append(&x->req.url, sub.endpoint, sub.endpoint_len) != 0) {
        snprintf(errstr, errlen, "webpush: endpoint over the URL's cap");
        return -1;
    }
    auth = wk_webpush_auth(wp, sub.endpoint, sub.endpoint_len, hr_clock_now_ms() / 1000, &alen,
                           errstr, errlen);
    if (auth == NULL ||
        wk_ece_encrypt(ece, &sub, x->plain.data, x->plain.len, &x->req.body, errstr, errlen) != 0)
        return -1;
    if (wk_xfer_header_add(x, WK_XFER_LIT("Authorization: "), auth, alen, errstr, errlen) < 0 ||
        wk_xfer_header_add(x, WK_XFER_LIT("TTL: "), num, hr_buf_i64(ttl, num), errstr, errlen) <
            0 ||
        wk_xfer_header_add(x, WK_XFER_LIT("Urgency: "), urgency, strlen(urgency), errstr, errlen) <
            0 ||
        (task->row->collapse_key != NULL &&
         wk_xfer_header_add(x, WK_XFER_LIT("Topic: "), topic,
                            wk_webpush_topic(task->row->collapse_key, topic), errstr,
                            errlen) < 0) ||
        wk_xfer_header_add(x, WK_XFER_LIT("Content-Encoding: aes128gcm"), NULL, 0, errstr, errlen) <
            0 ||
        wk_xfer_header_add(x, WK_XFER_LIT("Content-Type: application/octet-stream"), NULL, 0,
                           errstr, errlen) < 0)
        return -1;
    return wk_xfer_arm(x, false, errstr, errlen);
}

static bool wk_xfer_success(const hr_channel *ch, long code)
{
    for (size_t i = 0; i < ch->nsuccess; i++)
        if (ch->success[i] == code)
            return true;
    return false;
}

void wk_xfer_verdict(const hr_channel *ch, const wk_xfer *x, CURLcode rc, long code,
                     wk_provider_result *out)
{
    const char *body = x->resp.data ? x->resp.data : "";

    /* An SMTP server's refusal fails the transfer with its reply code. */
    if (rc != CURLE_OK && !(ch->type == HR_CHANNEL_SMTP && code != 0)) {
        wk_provider_set(out, WK_VERDICT_RETRY, 0, NULL);
        snprintf(out->reason, sizeof out->reason, "curl: %.120s",
                 x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
        return;
    }
    if (ch->type == HR_CHANNEL_SMTP) {
        wk_smtp_classify(code, body, out);
        return;
    }
    if (ch->type == HR_CHANNEL_WEBPUSH) {
        wk_webpush_classify(code, x->retry_after_s, out);
        return;
    }
    if (wk_xfer_success(ch, code)) {
        out->verdict = WK_VERDICT_DELIVERED;
        out->retry_after_s = -1;
    } else {
        wk_provider_classify_http(code, x->retry_after_s, NULL, out);
    }
    wk_provider_reason(out, "http ", code, NULL);
}

bool wk_xfer_batch_verdict(const hr_channel *ch, const wk_xfer *x, CURLcode rc, long code,
                           wk_provider_result *all, wk_batch_answer *a)
{
    *a = (wk_batch_answer){0};
    if (rc != CURLE_OK || !wk_xfer_success(ch, code)) {
        wk_xfer_verdict(ch, x, rc, code, all);
        return false;
    }
    /* The cap cut the body: garbled, as a truncated JSON text is. */
    wk_batch_answer_read(a, x->resp.data, x->resp.len, x->npushes);
    return true;
}
