/* wk_h2_mem: the allocator wk_h2 hands to nghttp2 (nghttp2_mem), so that
 * a warmed-up HTTP/2 session makes no heap allocation per stream.
 *
 * nghttp2 allocates a stream, an outbound item, a copy of the request's
 * header array and the received header buffers for every request, and
 * frees them when the stream closes.  This allocator keeps freed blocks
 * on one free list per power-of-two size class (WK_H2_MEM_MIN_SIZE up to
 * WK_H2_MEM_MAX_SIZE) and hands them out again; bigger blocks go to malloc.
 * Blocks carry a 16-byte header with their class, so free and realloc
 * need no size.  The lists only grow to the most blocks in use at once
 * (bounded by the engine's streams), and are freed with the allocator,
 * after every session that used it.  One thread. */
#ifndef WK_H2_MEM_H
#define WK_H2_MEM_H

#include <nghttp2/nghttp2.h>
#include <stddef.h>

#define WK_H2_MEM_MIN_SIZE 32
#define WK_H2_MEM_MAX_SIZE 16384
#define WK_H2_MEM_CLASSES 10 /* 32, 64, ... 16384 */

typedef struct wk_h2_mem {
    nghttp2_mem mem; /* handed to nghttp2; mem_user_data is this struct */
    void *free_list[WK_H2_MEM_CLASSES];
    size_t blocks; /* made by malloc for the lists (for tests and stats) */
} wk_h2_mem;

void wk_h2_mem_init(wk_h2_mem *m);
/* Frees the blocks on the lists; every session that used M is gone. */
void wk_h2_mem_release(wk_h2_mem *m);

#endif
