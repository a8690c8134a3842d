/* wk_batch: the answer of a batched webhook request (a channel's `batch`),
 * read into one verdict per recipient, as pure functions over the body.
 *
 * A batched request carries up to `batch` recipients, their bodies in the
 * order the request lists them; a receiver that took the request (a
 * status in the channel's `success`) answers each of them, in that order:
 *
 *   {"results": [{"status": "ok"},
 *                {"status": "error", "error": "no such user", "retry": false},
 *                {"status": "error", "error": "busy", "retry": true}, ...]}
 *
 * "ok" is delivered; "error" with "retry": true is retried with back-off
 * (the channel's retry rule), else it fails for good with its error as the
 * reason.  An answer that cannot be read — not JSON, no "results" array,
 * more entries than recipients, an entry that is not an object with
 * "status" "ok" or "error" — says nothing about any recipient: each of
 * them is retried (and, past retry.max_attempts, dead-lettered with the
 * reason "batch answer: ..."), never counted as sent.  A short array
 * answers the recipients it covers; the rest are retried ("batch answer:
 * no result").  Any other status applies to every recipient of the
 * request as it does to a single one (429 slows the channel down, 5xx is
 * retried, ...).  docs/providers.md, "Batched webhooks". */
#ifndef WK_BATCH_H
#define WK_BATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "wk_provider.h"

struct cJSON;

/* A batch answer being read: the parsed body and its results. */
typedef struct wk_batch_answer {
    struct cJSON *root;
    const struct cJSON *results; /* NULL when garbled */
    const struct cJSON *next;    /* the next recipient's entry, NULL past the last */
    size_t n;                    /* recipients in the request */
    char error[96];              /* why it is garbled */
} wk_batch_answer;

/* Reads the LEN bytes of BODY, the answer to a request of N recipients.
 * 0, or -1 when it is garbled (A->error says why; every recipient is then
 * retried).  wk_batch_answer_free in either case. */
int wk_batch_answer_read(wk_batch_answer *a, const char *body, size_t len, size_t n);
/* The verdict of the next recipient of A, in the request's order (N
 * calls), into *OUT: the reason "batch: <error>" for an error, "batch
 * answer: ..." when A says nothing of it. */
void wk_batch_answer_next(wk_batch_answer *a, wk_provider_result *out);
void wk_batch_answer_free(wk_batch_answer *a);

#endif
