/* wk_inbox: bounded FIFO of received chunk messages (see wk_inbox.h).
 *
 * A tail queue of single allocations (the entry and its payload copy):
 * push and pop are O(1); drop walks the queue, which happens only on a
 * revoke. */
#include "wk_inbox.h"

#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

typedef struct wk_inbox_entry {
    TAILQ_ENTRY(wk_inbox_entry) link;
    int32_t partition;
    int64_t offset;
    size_t len;
    bool seen; /* handed out by wk_inbox_take_new */
    char payload[];
} wk_inbox_entry;

struct wk_inbox {
    TAILQ_HEAD(wk_inbox_head, wk_inbox_entry) q;
    size_t count, bytes;
    size_t seen; /* of them handed out by wk_inbox_take_new (the oldest) */
    size_t max_msgs, max_bytes;
};

int wk_inbox_new(size_t max_msgs, size_t max_bytes, wk_inbox **out)
{
    wk_inbox *q = calloc(1, sizeof *q);

    *out = q;
    if (q == NULL)
        return -1;
    TAILQ_INIT(&q->q);
    q->max_msgs = max_msgs;
    q->max_bytes = max_bytes;
    return 0;
}

static void wk_inbox_remove(wk_inbox *q, wk_inbox_entry *e)
{
    TAILQ_REMOVE(&q->q, e, link);
    q->count--;
    q->seen -= e->seen;
    q->bytes -= e->len;
    free(e);
}

void wk_inbox_free(wk_inbox *q)
{
    if (q == NULL)
        return;
    while (!TAILQ_EMPTY(&q->q))
        wk_inbox_remove(q, TAILQ_FIRST(&q->q));
    free(q);
}

int wk_inbox_push(wk_inbox *q, int32_t partition, int64_t offset, const void *payload, size_t len)
{
    wk_inbox_entry *e = malloc(sizeof *e + len);

    if (e == NULL)
        return -1;
    e->partition = partition;
    e->offset = offset;
    e->len = len;
    e->seen = false;
    if (len > 0)
        memcpy(e->payload, payload, len);
    TAILQ_INSERT_TAIL(&q->q, e, link);
    q->count++;
    q->bytes += len;
    return 0;
}

size_t wk_inbox_take_new(wk_inbox *q, wk_inbox_msg *out, size_t max)
{
    wk_inbox_entry *e;
    size_t n = 0;

    if (q->seen > max / 2)
        return 0;
    /* The handed-out ones are the oldest: the first new one follows them. */
    for (e = TAILQ_FIRST(&q->q); e != NULL && e->seen; e = TAILQ_NEXT(e, link))
        ;
    for (; e != NULL && q->seen < max; e = TAILQ_NEXT(e, link)) {
        e->seen = true;
        q->seen++;
        out[n++] = (wk_inbox_msg){
            .partition = e->partition, .offset = e->offset, .len = e->len, .payload = e->payload};
    }
    return n;
}

bool wk_inbox_peek(const wk_inbox *q, wk_inbox_msg *out)
{
    const wk_inbox_entry *e = TAILQ_FIRST(&q->q);

    if (e == NULL)
        return false;
    *out = (wk_inbox_msg){
        .partition = e->partition, .offset = e->offset, .len = e->len, .payload = e->payload};
    return true;
}

void wk_inbox_pop(wk_inbox *q)
{
    if (!TAILQ_EMPTY(&q->q))
        wk_inbox_remove(q, TAILQ_FIRST(&q->q));
}

size_t wk_inbox_drop(wk_inbox *q, int32_t partition)
{
    wk_inbox_entry *e, *next;
    size_t n = 0;

    for (e = TAILQ_FIRST(&q->q); e != NULL; e = next) {
        next = TAILQ_NEXT(e, link);
        if (e->partition == partition) {
            wk_inbox_remove(q, e);
            n++;
        }
    }
    return n;
}

bool wk_inbox_full(const wk_inbox *q)
{
    return q->count >= q->max_msgs || q->bytes >= q->max_bytes;
}

bool wk_inbox_low(const wk_inbox *q)
{
    return q->count <= q->max_msgs / 2 && q->bytes <= q->max_bytes / 2;
}

size_t wk_inbox_count(const wk_inbox *q)
{
    return q->count;
}

size_t wk_inbox_bytes(const wk_inbox *q)
{
    return q->bytes;
}
