/* hr_arena: Redis replies built in a few large blocks and freed at once.
 *
 * hiredis builds each reply as a tree of allocations: an object per
 * element, its string and its element array, each freed on its own later
 * (an HMGET of four absent fields is five objects).  A reader given
 * hr_arena_functions() and an arena as its privdata builds them in the
 * arena's blocks instead: a pipeline's batch of replies costs a few
 * allocations, and freeing them is one hr_arena_free().
 *
 * Ownership: the arena owns every reply built in it and every reply handed
 * to hr_arena_adopt(); none of them may be passed to freeReplyObject.  The
 * replies stay valid until hr_arena_free().  One thread at a time uses an
 * arena: the one whose hr_redis reads into it, then whoever it is handed
 * to with its replies (a chunk's open hands them to the chunk's loop). */
#ifndef HR_ARENA_H
#define HR_ARENA_H

#include <hiredis/hiredis.h>

typedef struct hr_arena hr_arena;

/* An empty arena (it allocates on its first reply); NULL when out of
 * memory. */
hr_arena *hr_arena_new(void);
/* Frees every reply of ARENA and ARENA; NULL is fine. */
void hr_arena_free(hr_arena *arena);

/* The reply functions that build in the arena a reader's privdata points
 * to (a redisReader's fn; its freeObject frees nothing: the arena does). */
redisReplyObjectFunctions *hr_arena_functions(void);

/* Takes REPLY (from freeReplyObject's world; NULL is fine) into ARENA:
 * freed with it.  0, or -1 when out of memory (REPLY is then freed). */
int hr_arena_adopt(hr_arena *arena, redisReply *reply);

#endif
