/* hk_event: an event of the events topic as herald-hooks holds it while
 * its endpoints deliver it, the offsets it lets the consumer commit, and
 * the window of event ids seen (duplicates).
 *
 * An event is read from its record once (id, type, uid; the value kept
 * verbatim for the deliveries) and shared by the endpoints that want it:
 * REFS counts them (and the dispatch in progress).  Each assigned partition
 * keeps its events in offset order; an event is finished when its refs
 * fall to 0 (delivered, or dead-lettered), and the partition may commit up
 * to its first unfinished event — so a crash re-reads exactly what some
 * endpoint had not finished (at least once), never skips one.
 *
 * The window remembers the last events.hooks.dedupe_window ids (as 64-bit
 * hashes, FIFO): at-least-once publishing repeats an event with the same
 * id (a worker killed after its event was confirmed but before the
 * recipient's acknowledgement), and a repeat inside the window is counted
 * and not delivered again.  A hash collision would drop an event; at
 * 2^-64 per pair it is left at that. */
#ifndef HK_EVENT_H
#define HK_EVENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "hr_event.h"

#define HK_EVENT_TYPE_MAX 33

typedef struct hk_event {
    TAILQ_ENTRY(hk_event) link; /* its partition's list */
    int refs;
    int32_t partition; /* -1: a redriven dead letter, not from a record */
    int64_t offset;
    int64_t dead_id; /* a redriven dead letter's push_hook_dead.id */
    int64_t read_ms; /* when it was read (a batch's age is its first event's) */
    char id[HR_EVENT_ID_MAX];
    char type[HK_EVENT_TYPE_MAX];
    uint64_t uid;
    char *value; /* the record's value, verbatim */
    size_t len;
} hk_event;

/* Reads the LEN bytes of VALUE (a record's value): a new event with one
 * ref, or NULL with ERRSTR (no JSON object, no id, type or uid, out of
 * memory). */
hk_event *hk_event_read(const void *value, size_t len, char *errstr, size_t errlen);
/* Frees EV (no list holds it).  Accepts NULL. */
void hk_event_free(hk_event *ev);

typedef struct hk_offsets hk_offsets;

/* Offsets of up to 1024 partitions. */
hk_offsets *hk_offsets_new(void);
/* Frees, with the events still listed.  Accepts NULL. */
void hk_offsets_free(hk_offsets *o);
/* Lists EV (its partition and offset set) at the end of its partition. */
void hk_offsets_add(hk_offsets *o, hk_event *ev);
/* Drops one ref of EV; at 0 it is finished (freed once every earlier event
 * of its partition is).  A redriven dead letter (partition -1) is freed
 * at once. */
void hk_offsets_put(hk_offsets *o, hk_event *ev);
/* The offset PARTITION may commit (its first unfinished event's, or one
 * past the last event read), and frees the finished events before it;
 * -1 when it has read nothing since the last call answered the same. */
int64_t hk_offsets_committable(hk_offsets *o, int32_t partition);
/* Forgets PARTITION's events (revoked): they are still delivered, but no
 * longer keep an offset back.  Their offsets are the next owner's. */
void hk_offsets_forget(hk_offsets *o, int32_t partition);

typedef struct hk_dedupe hk_dedupe;

/* A window of CAP ids (0: none, every event passes).  NULL when out of
 * memory. */
hk_dedupe *hk_dedupe_new(size_t cap);
void hk_dedupe_free(hk_dedupe *d);
/* True when ID was seen within the window (a duplicate); else remembers it. */
bool hk_dedupe_seen(hk_dedupe *d, const char *id);

#endif
