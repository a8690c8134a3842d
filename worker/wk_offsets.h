/* wk_offsets: which Kafka offset a worker may store, per partition.
 *
 * A worker processes several chunks at once, and they finish out of order.
 * Storing offset+1 of a chunk that finished while an earlier message of the
 * same partition is still being pushed would lose that earlier chunk on a
 * crash, so offsets are stored only for the contiguous completed prefix:
 * wk_offsets_begin() records each message as it is received (in increasing
 * order per partition), wk_offsets_finish() marks it done and says when the
 * storable offset (the lowest unfinished offset, or last finished + 1)
 * advanced.  wk_offsets_drop() forgets a revoked partition.
 *
 * Per partition the in-flight offsets sit in a growable array used as a
 * queue (head index, compacted as it drains); partitions are found by a
 * linear search, as a worker owns a handful of them. */
#ifndef WK_OFFSETS_H
#define WK_OFFSETS_H

#include <stddef.h>
#include <stdint.h>

typedef struct wk_offsets wk_offsets;

int wk_offsets_new(wk_offsets **out);
void wk_offsets_free(wk_offsets *o);

/* Records OFFSET of PARTITION as in flight.  0, or -1 when out of memory or
 * when OFFSET is not above the partition's last recorded offset. */
int wk_offsets_begin(wk_offsets *o, int32_t partition, int64_t offset);

/* Marks OFFSET finished.  Returns 1 with *STORE = the offset to store when
 * the completed prefix grew, 0 when an earlier offset is still in flight,
 * -1 when OFFSET is not in flight (e.g. its partition was dropped). */
int wk_offsets_finish(wk_offsets *o, int32_t partition, int64_t offset, int64_t *store);

/* Forgets every in-flight offset of PARTITION (revoked). */
void wk_offsets_drop(wk_offsets *o, int32_t partition);

/* Offsets of PARTITION received and not yet part of the completed prefix. */
size_t wk_offsets_pending(const wk_offsets *o, int32_t partition);

#endif
