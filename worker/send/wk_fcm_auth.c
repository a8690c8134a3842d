/* wk_fcm_auth: an fcm channel's service account and shared access token
 * (see wk_fcm_auth.h). */
#include "wk_fcm_auth.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_log.h"
#include "wk_fcm.h"

#define WK_FCM_AUTH_FILE_MAX (64 * 1024) /* a service-account key is ~2.3 KiB */
#define WK_FCM_AUTH_FORM_MAX 8192
#define WK_FCM_AUTH_BACKOFF_MAX_MS 60000

struct wk_fcm_auth {
    const char *channel;
    wk_fcm_account *account;
    char *send_url;
    wk_fcm_token token;
    uint64_t gen;        /* bumped with every token taken */
    bool running;        /* a token request is out */
    int failures;        /* token requests failed in a row */
    int64_t retry_at_ms; /* after a failure: no request before this */
    hr_buf form;
};

int wk_fcm_auth_new(const hr_channel *ch, wk_fcm_auth **out, char *errstr, size_t errlen)
{
    wk_fcm_auth *a = calloc(1, sizeof *a);
    char detail[256];
    char *text = NULL;
    size_t len = 0;
    hr_buf url;
    int rc = -1;

    *out = NULL;
    hr_buf_init(&url, 4096);
    if (a == NULL) {
        snprintf(errstr, errlen, "channel %s: out of memory", ch->name);
        goto cleanup;
    }
    a->channel = ch->name;
    hr_buf_init(&a->form, WK_FCM_AUTH_FORM_MAX);
    if (hr_config_read_file(ch->fcm.service_account_file, WK_FCM_AUTH_FILE_MAX, &text, &len, detail,
                            sizeof detail) != 0 ||
        wk_fcm_account_parse(text, len, &a->account, detail, sizeof detail) != 0) {
        snprintf(errstr, errlen, "channel %s: service_account_file %s", ch->name, detail);
        goto cleanup;
    }
    /* The override is where the token is asked for and the JWT's audience
     * alike: a stand-in checks both. */
    if (ch->fcm.token_uri != NULL) {
        char *uri = strdup(ch->fcm.token_uri);
        if (uri == NULL) {
            snprintf(errstr, errlen, "channel %s: out of memory", ch->name);
            goto cleanup;
        }
        free(a->account->token_uri);
        a->account->token_uri = uri;
    }
    if (wk_fcm_send_url(a->account, ch->url != NULL ? ch->url : WK_FCM_BASE_URL, &url) != 0 ||
        (a->send_url = strdup(url.data)) == NULL) {
        snprintf(errstr, errlen, "channel %s: the send URL is too long", ch->name);
        goto cleanup;
    }
    *out = a;
    a = NULL;
    rc = 0;
cleanup:
    free(text);
    hr_buf_free(&url);
    wk_fcm_auth_free(a);
    return rc;
}

void wk_fcm_auth_free(wk_fcm_auth *a)
{
    if (a == NULL)
        return;
    wk_fcm_account_free(a->account);
    free(a->send_url);
    wk_fcm_token_clear(&a->token);
    hr_buf_free(&a->form);
    free(a);
}

const char *wk_fcm_auth_send_url(const wk_fcm_auth *a)
{
    return a->send_url;
}

const char *wk_fcm_auth_project(const wk_fcm_auth *a)
{
    return a->account->project_id;
}

const char *wk_fcm_auth_token(wk_fcm_auth *a, int64_t now_ms, uint64_t *gen, bool *request,
                              int64_t *wake_ms)
{
    int64_t now_s = now_ms / 1000;

    *gen = a->gen;
    *wake_ms = 0;
    *request = false;
    if (!a->running && wk_fcm_token_due(&a->token, now_s)) {
        if (now_ms >= a->retry_at_ms)
            *request = true;
        else
            *wake_ms = a->retry_at_ms;
    }
    if (a->token.access_token == NULL || now_s >= a->token.expires_at_s)
        return NULL;
    return a->token.access_token;
}

const char *wk_fcm_auth_token_uri(const wk_fcm_auth *a)
{
    return a->account->token_uri;
}

int wk_fcm_auth_request(wk_fcm_auth *a, int64_t now_ms, const hr_buf **form, char *errstr,
                        size_t errlen)
{
    hr_buf_reset(&a->form);
    a->running = true;
    *form = &a->form;
    if (wk_fcm_token_request(a->account, now_ms / 1000, &a->form, errstr, errlen) != 0) {
        char why[256];

        snprintf(why, sizeof why, "%s", errstr);
        return wk_fcm_auth_done(a, now_ms, 0, NULL, 0, why, errstr, errlen);
    }
    return 0;
}

int wk_fcm_auth_done(wk_fcm_auth *a, int64_t now_ms, long status, const char *body, size_t len,
                     const char *errstr_in, char *errstr, size_t errlen)
{
    int64_t backoff = 1000;

    a->running = false;
    if (status != 0 &&
        wk_fcm_token_parse(status, body, len, now_ms / 1000, &a->token, errstr, errlen) == 0) {
        a->gen++;
        a->failures = 0;
        a->retry_at_ms = 0;
        hr_log_info("fcm_token", "channel=%s expires_in_s=%" PRId64 " refresh_in_s=%" PRId64,
                    a->channel, (int64_t)(a->token.expires_at_s - now_ms / 1000),
                    (int64_t)(a->token.refresh_at_s - now_ms / 1000));
        return 0;
    }
    if (status == 0)
        snprintf(errstr, errlen, "%s", errstr_in != NULL ? errstr_in : "no answer");
    for (int i = 0; i < a->failures && backoff < WK_FCM_AUTH_BACKOFF_MAX_MS; i++)
        backoff *= 2;
    if (backoff > WK_FCM_AUTH_BACKOFF_MAX_MS)
        backoff = WK_FCM_AUTH_BACKOFF_MAX_MS;
    a->failures++;
    a->retry_at_ms = now_ms + backoff;
    hr_log_error("fcm_token_failed",
                 "channel=%s token_uri=%s failures=%d retry_in_ms=%" PRId64 " error=\"%s\"",
                 a->channel, a->account->token_uri, a->failures, (int64_t)backoff, errstr);
    return -1;
}

void wk_fcm_auth_rejected(wk_fcm_auth *a, uint64_t gen)
{
    if (gen == a->gen)
        wk_fcm_token_clear(&a->token);
}
