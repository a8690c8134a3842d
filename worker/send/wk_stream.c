/* wk_stream: one HTTP/2 request of a push (see wk_stream.h). */
#include "wk_stream.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "hr_clock.h"
#include "wk_fcm.h"

#define WK_STREAM_BODY_MAX (256 * 1024)
#define WK_STREAM_TEXT_MAX (64 * 1024)
#define WK_STREAM_AUTH_MAX 8192
/* A string literal and its length. */
#define WK_STREAM_LIT(s) s, sizeof s - 1

wk_stream *wk_stream_new(void)
{
    wk_stream *sx = calloc(1, sizeof *sx);

    if (sx == NULL)
        return NULL;
    sx->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    sx->sha = EVP_MD_CTX_new();
    if (sx->sha256 == NULL || sx->sha == NULL) {
        wk_stream_free(sx);
        return NULL;
    }
    hr_buf_init(&sx->auth, WK_STREAM_AUTH_MAX);
    hr_buf_init(&sx->body, WK_STREAM_BODY_MAX);
    hr_buf_init(&sx->title, WK_STREAM_TEXT_MAX);
    hr_buf_init(&sx->text, WK_STREAM_TEXT_MAX);
    hr_buf_init(&sx->resp, WK_PROVIDER_BODY_MAX);
    return sx;
}

void wk_stream_free(wk_stream *sx)
{
    if (sx == NULL)
        return;
    EVP_MD_CTX_free(sx->sha);
    EVP_MD_free(sx->sha256);
    hr_buf_free(&sx->auth);
    hr_buf_free(&sx->body);
    hr_buf_free(&sx->title);
    hr_buf_free(&sx->text);
    hr_buf_free(&sx->resp);
    free(sx);
}

/* Appends the header NAME: VALUE to SX's array (both stay where they are
 * until the submission copies them); NO_INDEX for a value that differs on
 * every request. */
static void wk_stream_nv(wk_stream *sx, const char *name, size_t nlen, const char *value,
                         size_t vlen, bool no_index)
{
    sx->nv[sx->nnv++] = (wk_h2_nv){name, value, nlen, vlen, no_index};
}

/* PREFIX then PATH (PLEN bytes) as SX's path.  0, or -1 with ERRSTR. */
static int wk_stream_path(wk_stream *sx, const char *prefix, const char *path, size_t plen,
                          char *errstr, size_t errlen)
{
    size_t n = strlen(prefix);

    if (n + plen >= sizeof sx->path) {
        snprintf(errstr, errlen, "request path over %d bytes", WK_STREAM_PATH_MAX);
        return -1;
    }
    memcpy(sx->path, prefix, n);
    memcpy(sx->path + n, path, plen);
    sx->path[n + plen] = '\0';
    sx->nnv = 0;
    return 0;
}

/* The title and body of TASK rendered for UID into SX; the message's. */
static int wk_stream_texts(wk_stream *sx, const wk_task *task, unsigned variant, const char *uid,
                           const redisReply *user, const char **title, const char **body,
                           char *errstr, size_t errlen)
{
    if (wk_task_render_texts(task, variant, uid, user, &sx->title, &sx->text, errstr, errlen) != 0)
        return -1;
    *title = sx->title.data ? sx->title.data : "";
    *body = sx->text.data ? sx->text.data : "";
    return 0;
}

/* The apns-id of (TASK, UID, DEVICE) into OUT: SHA-256 of
 * "<task>.<uid>.<device>" as a version 8 UUID (RFC 9562: custom), so a
 * re-sent push repeats it.  The digest runs on SX's context with the
 * algorithm fetched once: OpenSSL 3's one-shot SHA256() fetched it and made
 * a context on every call (7,800 instructions a push under callgrind).
 * OpenSSL 3.0 still re-creates the context's state at every init, one
 * small allocation a push (3.2 reuses it).  0, or -1 when OpenSSL
 * failed. */
static int wk_stream_apns_id(wk_stream *sx, int64_t task, const char *uid, const char *device,
                             char out[37])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char d[EVP_MAX_MD_SIZE];
    char id[HR_BUF_I64_MAX];
    size_t idlen = hr_buf_i64(task, id), at = 0;

    if (EVP_DigestInit_ex(sx->sha, sx->sha256, NULL) != 1 ||
        EVP_DigestUpdate(sx->sha, id, idlen) != 1 || EVP_DigestUpdate(sx->sha, ".", 1) != 1 ||
        EVP_DigestUpdate(sx->sha, uid, strlen(uid)) != 1 ||
        EVP_DigestUpdate(sx->sha, ".", 1) != 1 ||
        EVP_DigestUpdate(sx->sha, device, strlen(device)) != 1 ||
        EVP_DigestFinal_ex(sx->sha, d, NULL) != 1)
        return -1;
    d[6] = (unsigned char)((d[6] & 0x0f) | 0x80); /* version 8 */
    d[8] = (unsigned char)((d[8] & 0x3f) | 0x80); /* variant 10 */
    for (size_t i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[at++] = '-';
        out[at++] = hex[d[i] >> 4];
        out[at++] = hex[d[i] & 15];
    }
    out[at] = '\0';
    return 0;
}

/* Readies SX for the submission at NOW_MS (wall clock): what a response
 * fills in is reset. */
static void wk_stream_arm(wk_stream *sx, int64_t now_ms)
{
    sx->status = 0;
    sx->err = WK_H2_OK;
    sx->msg[0] = '\0';
    sx->retry_after_s = -1;
    hr_buf_reset(&sx->resp);
    sx->start_ms = now_ms;
}

int wk_stream_prepare_apns(wk_stream *sx, const hr_channel *ch, const char *prefix,
                           const char *provider_token, const wk_task *task, unsigned variant,
                           const char *uid, const redisReply *user, const char *device_token,
                           int64_t now_ms, char *errstr, size_t errlen)
{
    wk_apns_request *req = &sx->apns;
    wk_apns_message m = {.device_token = device_token,
                         .topic = ch->apns.topic,
                         .push_type = ch->apns.push_type == HR_APNS_BACKGROUND || task->rich.silent
                                          ? WK_APNS_BACKGROUND
                                          : WK_APNS_ALERT,
                         .payload = wk_task_content(task, variant)->payload,
                         .ttl_s = (int)task->row->ttl_s,
                         .collapse_id = task->row->collapse_key,
                         .apns_id = sx->apns_id,
                         .high_priority =
                             ch->apns.high_priority && task->row->priority == HR_PRIORITY_HIGH,
                         .now_s = now_ms / 1000,
                         .rich = task->has_rich ? &task->rich : NULL};

    if (wk_stream_apns_id(sx, task->row->id, uid, device_token, sx->apns_id) != 0) {
        snprintf(errstr, errlen, "apns-id: SHA-256 failed");
        return -1;
    }
    hr_buf_reset(&sx->body);
    if (wk_stream_texts(sx, task, variant, uid, user, &m.title, &m.body, errstr, errlen) != 0 ||
        wk_apns_request_build(&m, provider_token, req, &sx->body, errstr, errlen) != 0 ||
        wk_stream_path(sx, prefix, req->path, strlen(req->path), errstr, errlen) != 0)
        return -1;
    for (size_t i = 0; i < req->nheaders; i++) {
        const char *line = req->header[i];
        size_t nlen = req->name_len[i];

        /* apns-id differs on every push: not worth a place in HPACK's table. */
        wk_stream_nv(sx, line, nlen, line + nlen + 2, req->line_len[i] - nlen - 2,
                     nlen == 7 && memcmp(line, "apns-id", 7) == 0);
    }
    wk_stream_nv(sx, WK_STREAM_LIT("content-type"), WK_STREAM_LIT("application/json"), false);
    wk_stream_arm(sx, now_ms);
    return 0;
}

int wk_stream_prepare_fcm(wk_stream *sx, const char *path, const char *bearer, const wk_task *task,
                          unsigned variant, const char *uid, const redisReply *user,
                          const char *device_token, int64_t now_ms, char *errstr, size_t errlen)
{
    wk_fcm_message m = {.token = device_token,
                        .payload = wk_task_content(task, variant)->payload,
                        .ttl_s = (int)task->row->ttl_s,
                        .collapse_key = task->row->collapse_key,
                        .high_priority = task->row->priority == HR_PRIORITY_HIGH,
                        .now_s = now_ms / 1000,
                        .rich = task->has_rich ? &task->rich : NULL};

    hr_buf_reset(&sx->body);
    hr_buf_reset(&sx->auth);
    if (wk_stream_path(sx, "", path, strlen(path), errstr, errlen) != 0 ||
        wk_stream_texts(sx, task, variant, uid, user, &m.title, &m.body, errstr, errlen) != 0 ||
        wk_fcm_message_build(&m, &sx->body, errstr, errlen) != 0)
        return -1;
    if (hr_buf_append(&sx->auth, WK_STREAM_LIT("Bearer ")) != 0 ||
        hr_buf_append(&sx->auth, bearer, strlen(bearer)) != 0) {
        snprintf(errstr, errlen, "access token over %d bytes", WK_STREAM_AUTH_MAX);
        return -1;
    }
    wk_stream_nv(sx, WK_STREAM_LIT("authorization"), sx->auth.data, sx->auth.len, false);
    wk_stream_nv(sx, WK_STREAM_LIT("content-type"), WK_STREAM_LIT("application/json"), false);
    wk_stream_arm(sx, now_ms);
    return 0;
}

int wk_stream_prepare_form(wk_stream *sx, const char *path, const hr_buf *form, char *errstr,
                           size_t errlen)
{
    hr_buf_reset(&sx->body);
    if (wk_stream_path(sx, "", path, strlen(path), errstr, errlen) != 0)
        return -1;
    if (hr_buf_append(&sx->body, form->data ? form->data : "", form->len) != 0) {
        snprintf(errstr, errlen, "token request exceeds its size cap");
        return -1;
    }
    wk_stream_nv(sx, WK_STREAM_LIT("content-type"),
                 WK_STREAM_LIT("application/x-www-form-urlencoded"), false);
    wk_stream_arm(sx, hr_clock_now_ms());
    return 0;
}

void wk_stream_verdict(const hr_channel *ch, const wk_stream *sx, wk_provider_result *out)
{
    const char *body = sx->resp.data ? sx->resp.data : "";

    if (sx->err != WK_H2_OK) {
        wk_provider_set(out, WK_VERDICT_RETRY, 0, NULL);
        snprintf(out->reason, sizeof out->reason, "h2 %s: %.100s", wk_h2_err_names[sx->err],
                 sx->msg);
        return;
    }
    if (ch->type == HR_CHANNEL_FCM)
        wk_fcm_classify(sx->status, body, sx->resp.len, sx->retry_after_s, out);
    else
        wk_apns_classify(sx->status, body, sx->resp.len, sx->retry_after_s, out);
}
