/* wk_inbox: the worker's bounded queue of received chunk messages that
 * wait for a free chunk slot (worker.max_chunks_in_flight).
 *
 * Why: the worker used to pause its partitions whenever the slots were
 * full and resume them when one freed.  librdkafka drops what it
 * prefetched for a paused partition and fetches again from the consumed
 * position on resume, so with small chunks (a few ms each) the slots
 * emptied long before the new fetch arrived, and each worker started its
 * max_chunks_in_flight chunks only every few hundred ms
 * (docs/performance.md "Many small tasks").  The worker now keeps polling
 * into this queue and pauses only when the queue itself is full, which a
 * backlog of thousands of chunks reaches, not a burst of small ones.
 *
 * Messages are copied in (partition, offset, payload), so a queued message
 * pins none of librdkafka's fetch buffers.  A message is not begun
 * (wk_offsets) while it waits here, so no offset is ever stored past it:
 * the offset stored for a partition is at most its first queued message's,
 * and a crash or a revoke that drops the queue loses nothing, the next
 * owner consumes those messages again.
 *
 * Bounds: the queue reports itself full at MAX_MSGS messages or MAX_BYTES
 * payload bytes (the worker then pauses the assignment) and low again
 * at half of both or less (the worker resumes).  A message received while full
 * (librdkafka may hand out one it had fetched before the pause) is still
 * queued: the caps are soft by the few messages that were on their way,
 * and by the at most WK_TASK_PREFETCH_MAX (64) the worker polls before it
 * looks at them (wk_worker_fetch). */
#ifndef WK_INBOX_H
#define WK_INBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct wk_inbox wk_inbox;

typedef struct wk_inbox_msg {
    int32_t partition;
    int64_t offset;
    size_t len;
    const char *payload; /* LEN bytes, owned by the inbox */
} wk_inbox_msg;

/* 0, or -1 when out of memory. */
int wk_inbox_new(size_t max_msgs, size_t max_bytes, wk_inbox **out);
void wk_inbox_free(wk_inbox *q);

/* Appends a copy of the message.  0, or -1 when out of memory (nothing
 * queued). */
int wk_inbox_push(wk_inbox *q, int32_t partition, int64_t offset, const void *payload, size_t len);

/* The oldest message into *OUT (valid until the next pop, drop or free):
 * true, or false when the queue is empty. */
bool wk_inbox_peek(const wk_inbox *q, wk_inbox_msg *out);

/* The messages after those handed out by earlier calls, oldest first, into
 * OUT (valid as wk_inbox_peek's), so that at most MAX handed-out messages
 * are queued, and none while more than MAX / 2 are: what the worker looks
 * ahead at, a batch at a time, before it starts them (wk_lifecycle_prefetch;
 * looking further ahead than its task cache holds would evict rows loaded
 * for the messages it starts next).  How many. */
size_t wk_inbox_take_new(wk_inbox *q, wk_inbox_msg *out, size_t max);

/* Removes the oldest message, if any. */
void wk_inbox_pop(wk_inbox *q);

/* Removes every message of PARTITION; how many there were. */
size_t wk_inbox_drop(wk_inbox *q, int32_t partition);

/* At MAX_MSGS messages or MAX_BYTES payload bytes. */
bool wk_inbox_full(const wk_inbox *q);

/* At most half of MAX_MSGS and of MAX_BYTES. */
bool wk_inbox_low(const wk_inbox *q);

size_t wk_inbox_count(const wk_inbox *q);
size_t wk_inbox_bytes(const wk_inbox *q);

#endif
