/* wk_sender: the send wing's front — pushes in, requests out, every push
 * handed back once, settled.  The worker's lifecycle (and the benchmarks
 * and tests) use this header and wk_push.h; the rest of worker/send/ is
 * the wing's own.
 *
 * Per configured channel the sender holds the channel's decisions
 * (wk_chan: queues, retry heap, in-flight cap, slow-down, rate-limit
 * tokens, credentials), the transport its requests run on, and two timers
 * (the end of a wait, the earliest retry).  There are two transports, and
 * a channel runs on one: libcurl (wk_curl: curl multi handles and a pool
 * of easy handles, wk_xfer, hooked into the libuv loop by the adapter
 * wk_curl_uv) for webhooks (HTTP/1.1, or HTTP/2 with `http2`) and smtp;
 * HTTP/2 on libnghttp2 (wk_h2send: the engine wk_h2 on the loop, a pool
 * of streams, wk_stream) for apns and fcm, the fcm token requests
 * included.  Running a channel is a loop of questions to wk_chan — what
 * may happen now: start the next push of a task (a handle taken, the
 * request built from the push with the channel's credentials and added),
 * settle a push, start the fcm token request, or wait — and every
 * finished request goes the other way: the transport hands it over, its
 * provider module classifies the answer (wk_xfer_verdict,
 * wk_stream_verdict: a wk_provider verdict), and wk_chan_answer says what
 * it means for the push (settled, queued again, delayed; an address to
 * prune), which the sender carries out.  wk_chan does not know which
 * transport a channel runs on.

 * When a push is settled — delivered, failed for good, unregistered, or
 * held (not tried again because its hold flag is set, or its task is past
 * expire_at) — the done callback is called once with the result and the
 * push is no longer linked anywhere.  The callback runs after
 * curl_multi_socket_action returned (never inside a curl callback), from
 * the HTTP/2 transport's check handle (never inside nghttp2), or from a
 * run of the channels; it may cancel other pushes and submit new ones:
 * the channels are asked again after every callback, and a run requested
 * while one runs is folded into it.  Nothing but a finished request, a
 * timer, a job's answer or wk_sender_kick() runs the channels: whoever
 * cancels an in-flight push (freeing its slot) must kick the sender
 * afterwards.
 *
 * Layers (checked by scripts/check-graph):
 *   wk_provider wk_retry wk_h2_mem wk_h2_types
 *   wk_h2_data: the HTTP/2 engine's structs
 *   wk_h2_req: its requests
 *   wk_h2_stream: its streams (nghttp2's callbacks)
 *   wk_h2_conn: its connections (they reach wk_h2 through h2->up)
 *   wk_h2
 *   wk_push wk_fcm wk_apns wk_smtp wk_batch wk_ece wk_webpush
 *   wk_xfer wk_stream
 *   wk_fcm_auth wk_curl wk_h2send
 *   wk_chan wk_curl_uv
 *   wk_sender
 *
 * (wk_task, wk_redis and wk_metrics, below the wing, are worker/'s: the
 * "send/" line of wk_worker.h's list.) */
#ifndef WK_SENDER_H
#define WK_SENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "hr_addr.h"
#include "hr_config.h"
#include "wk_metrics.h"
#include "wk_redis.h"
#include "wk_push.h"
#include "wk_task.h"

typedef void (*wk_sender_done_fn)(void *ctx, wk_push *push, const wk_push_result *res);
/* Address A of PUSH is dead (the provider said so): remove it. */
typedef void (*wk_sender_prune_fn)(void *ctx, wk_push *push, const hr_addr *a);

typedef struct wk_sender wk_sender;

/* RD (the worker's Redis thread) gets the rate-limit grants and the
 * slow-down key's reads and writes as jobs: the loop never waits for them.
 * M (which must outlive the sender) gets the request latency, in-flight,
 * rate-limit wait and HTTP / limiter error metrics. */
int wk_sender_new(uv_loop_t *loop, const hr_config *cfg, wk_redis *rd, wk_metrics *m,
                  wk_sender_done_fn done, void *ctx, wk_sender **out, char *errstr, size_t errlen);

/* Whether channel CH_INDEX pushes to addresses from the address book, and
 * which: *PLATFORM and *APP (the fcm project, the apns topic).  False for
 * a webhook. */
bool wk_sender_addressed(const wk_sender *s, size_t ch_index, hr_addr_platform *platform,
                         const char **app);
/* PRUNE(CTX) is called for every address a provider called dead, before
 * its push is settled. */
void wk_sender_set_prune(wk_sender *s, wk_sender_prune_fn prune, void *ctx);

/* Queues PUSH (state IDLE) for its first attempt; nothing starts (and no
 * callback runs) until wk_sender_kick(). */
void wk_sender_submit(wk_sender *s, wk_push *push);
/* Starts what the queues, caps, pauses and rate limits allow. */
void wk_sender_kick(wk_sender *s);
/* Channel CH_INDEX's pushes will come soon (a chunk of it is opening): an
 * HTTP/2 channel opens its connections now (wk_h2send_warm), so that the
 * first requests do not wait for the handshakes; the others do nothing. */
void wk_sender_warm(wk_sender *s, size_t ch_index);
/* Unlinks PUSH wherever it is (an in-flight request is aborted); no callback.
 * PUSH is IDLE afterwards. */
void wk_sender_cancel(wk_sender *s, wk_push *push);

/* True when channel CH_INDEX has pushes waiting (ready or backing off) but
 * nothing will run the pump for them: no request in flight, no wake-up or
 * retry timer armed, not draining.  Never true unless a caller forgot a
 * wk_sender_kick() after freeing slots; the worker's watchdog checks it. */
bool wk_sender_stuck(const wk_sender *s, size_t ch_index);

/* Stops starting requests (shutdown); running ones finish. */
void wk_sender_drain(wk_sender *s);
size_t wk_sender_in_flight(const wk_sender *s);

/* Closes every handle; the caller then runs the loop until it has no
 * active handles and calls wk_sender_free.  No push may be linked. */
void wk_sender_close(wk_sender *s);
void wk_sender_free(wk_sender *s);

#endif
