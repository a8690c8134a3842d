/* wk_h2_req: the HTTP/2 engine's requests (wk_h2.h): the pool of slots,
 * a request's head checked and copied into its slot, and its outcomes:
 * done (the caller's callback), a failure kept for its stream's close,
 * requeued after a refusal, the whole queue failed when no connection
 * can be had.  It reaches the engine's pump only through h2->up. */
#ifndef WK_H2_REQ_H
#define WK_H2_REQ_H

#include <stdbool.h>
#include <stddef.h>

#include "wk_h2_data.h"

/* A free slot from the pool (grown by a slab when empty), or NULL. */
wk_h2_req *wk_h2_req_get(wk_h2 *h2);
void wk_h2_req_put(wk_h2 *h2, wk_h2_req *req);
void wk_h2_req_reset(wk_h2_req *req);
void wk_h2_req_fail(wk_h2_req *req, wk_h2_err err, const char *msg);
void wk_h2_req_done(wk_h2 *h2, wk_h2_req *req, wk_h2_err err, const char *msg, bool unprocessed);
void wk_h2_req_requeue(wk_h2 *h2, wk_h2_req *req, const char *why);
void wk_h2_pump_later(wk_h2 *h2);
void wk_h2_fail_queue(wk_h2 *h2, wk_h2_err err, const char *msg);
int wk_h2_req_nv(wk_h2_req *req, char **p, const wk_h2_nv *h, bool copy_name, bool check_value,
                 char *errstr, size_t errlen);

#endif
