/* wk_fcm_auth: the credentials of one fcm channel in a worker — the
 * service account read from the channel's service_account_file, the
 * messages:send URL, and the one OAuth2 access token every request of the
 * channel shares, with the state of its refresh.
 *
 * The token request itself is a request the sender runs on the channel's
 * HTTP/2 transport like any push (never blocking the loop): wk_fcm_auth
 * says when one is due and builds its form body, the sender starts it
 * (a POST to the token URI), and hands the answer back.  A token is used
 * until it expires and refreshed from its
 * refresh time on (wk_fcm: 5 minutes before expiry), so sends go on while
 * the refresh runs.  A failed request (bad credentials, the endpoint down)
 * is logged once per failure with the endpoint's error and tried again
 * after 1, 2, 4 ... 60 s; meanwhile the channel's pushes wait in their
 * queues (nothing is lost: their chunks stay leased).  One thread (the
 * worker's loop). */
#ifndef WK_FCM_AUTH_H
#define WK_FCM_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_buf.h"
#include "hr_config.h"

typedef struct wk_fcm_auth wk_fcm_auth;

/* Reads CH's service account (and token_uri override) into a new *OUT.
 * 0, or -1 with ERRSTR ("channel NAME: ...": the file, the JSON, the key). */
int wk_fcm_auth_new(const hr_channel *ch, wk_fcm_auth **out, char *errstr, size_t errlen);
void wk_fcm_auth_free(wk_fcm_auth *a);

/* The messages:send URL of the account's project. */
const char *wk_fcm_auth_send_url(const wk_fcm_auth *a);
/* The account's project id: the app of its tokens in the address book. */
const char *wk_fcm_auth_project(const wk_fcm_auth *a);

/* The access token to send with at NOW_MS and its generation *GEN (for
 * wk_fcm_auth_rejected), or NULL when none is held that has not expired.
 * *REQUEST is set when a token request should start now (one is due, none
 * runs, no back-off is pending); *WAKE_MS gets the end of a back-off (0
 * when there is none). */
const char *wk_fcm_auth_token(wk_fcm_auth *a, int64_t now_ms, uint64_t *gen, bool *request,
                              int64_t *wake_ms);

/* The URL the token request is POSTed to: the account's token_uri, or
 * the channel's override. */
const char *wk_fcm_auth_token_uri(const wk_fcm_auth *a);

/* Builds the token request's form body (application/x-www-form-urlencoded)
 * into *FORM, valid until the next call; the request counts as running
 * until wk_fcm_auth_done.  0, or -1 with ERRSTR (then treated as a failed
 * request). */
int wk_fcm_auth_request(wk_fcm_auth *a, int64_t now_ms, const hr_buf **form, char *errstr,
                        size_t errlen);

/* The token request ended: STATUS (0 = no answer, ERRSTR_IN the transport
 * error) and the LEN bytes of BODY.  0 when a token was taken, -1 with
 * ERRSTR (the endpoint's error) when not. */
int wk_fcm_auth_done(wk_fcm_auth *a, int64_t now_ms, long status, const char *body, size_t len,
                     const char *errstr_in, char *errstr, size_t errlen);

/* A send made with the token of generation GEN was answered 401: unless a
 * newer token is held already, the token is dropped and the next
 * wk_fcm_auth_token asks for a new one. */
void wk_fcm_auth_rejected(wk_fcm_auth *a, uint64_t gen);

#endif
