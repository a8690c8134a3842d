/* hr_arena: Redis replies in large blocks (see hr_arena.h).
 *
 * The arena is a list of blocks, newest first, each filled from its start
 * by bumping USED; an object that does not fit starts a new block (one
 * larger than HR_ARENA_BLOCK when the object is: a long string).  Nothing
 * is freed before hr_arena_free(), which frees the blocks and the adopted
 * replies.  The reply functions attach each object to its parent array as
 * hiredis's own do, so the trees read the same. */
#include "hr_arena.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hr_vec.h"

/* A block's bytes: a chunk open's batch of replies (HR_ADDR_FETCH_BATCH
 * members, two replies each) fits in a few. */
#define HR_ARENA_BLOCK (64 * 1024)

typedef struct hr_arena_block {
    struct hr_arena_block *next;
    size_t size, used;
    alignas(max_align_t) unsigned char mem[];
} hr_arena_block;

struct hr_arena {
    hr_arena_block *blocks;    /* newest first: the one being filled */
    HR_VEC(redisReply *) kept; /* adopted replies */
};

hr_arena *hr_arena_new(void)
{
    return calloc(1, sizeof(hr_arena));
}

void hr_arena_free(hr_arena *arena)
{
    if (arena == NULL)
        return;
    while (arena->blocks != NULL) {
        hr_arena_block *b = arena->blocks;

        arena->blocks = b->next;
        free(b);
    }
    for (size_t i = 0; i < arena->kept.n; i++)
        freeReplyObject(arena->kept.v[i]);
    hr_vec_free(&arena->kept);
    free(arena);
}

/* LEN bytes of ARENA, zeroed and aligned for any object; NULL when out of
 * memory. */
static void *hr_arena_alloc(hr_arena *arena, size_t len)
{
    const size_t align = alignof(max_align_t);
    size_t need = (len + align - 1) & ~(align - 1);
    hr_arena_block *b = arena->blocks;
    void *p;

    if (b == NULL || b->size - b->used < need) {
        size_t size = need > HR_ARENA_BLOCK ? need : HR_ARENA_BLOCK;

        if ((b = malloc(sizeof *b + size)) == NULL)
            return NULL;
        b->size = size;
        b->used = 0;
        b->next = arena->blocks;
        arena->blocks = b;
    }
    p = b->mem + b->used;
    b->used += need;
    return memset(p, 0, len);
}

/* A reply of TYPE for TASK, attached to its parent array; NULL when out
 * of memory. */
static redisReply *hr_arena_reply(const redisReadTask *task, int type)
{
    redisReply *reply = hr_arena_alloc(task->privdata, sizeof *reply);

    if (reply == NULL)
        return NULL;
    reply->type = type;
    if (task->parent != NULL)
        ((redisReply *)task->parent->obj)->element[task->idx] = reply;
    return reply;
}

static void *hr_arena_string(const redisReadTask *task, char *str, size_t len)
{
    redisReply *reply = hr_arena_reply(task, task->type);

    if (reply == NULL || (reply->str = hr_arena_alloc(task->privdata, len + 1)) == NULL)
        return NULL;
    memcpy(reply->str, str, len);
    reply->len = len;
    return reply;
}

static void *hr_arena_array(const redisReadTask *task, int elements)
{
    redisReply *reply = hr_arena_reply(task, REDIS_REPLY_ARRAY);

    if (reply == NULL)
        return NULL;
    if (elements > 0 && (reply->element = hr_arena_alloc(
                             task->privdata, (size_t)elements * sizeof(redisReply *))) == NULL)
        return NULL;
    reply->elements = (size_t)elements;
    return reply;
}

static void *hr_arena_integer(const redisReadTask *task, long long value)
{
    redisReply *reply = hr_arena_reply(task, REDIS_REPLY_INTEGER);

    if (reply != NULL)
        reply->integer = value;
    return reply;
}

/* A nil's task has the type of the bulk or array it stood for. */
static void *hr_arena_nil(const redisReadTask *task)
{
    return hr_arena_reply(task, REDIS_REPLY_NIL);
}

/* The arena frees its objects, all at once. */
static void hr_arena_object_free(void *obj)
{
    (void)obj;
}

static redisReplyObjectFunctions hr_arena_fn = {
    .createString = hr_arena_string,
    .createArray = hr_arena_array,
    .createInteger = hr_arena_integer,
    .createNil = hr_arena_nil,
    .freeObject = hr_arena_object_free,
};

redisReplyObjectFunctions *hr_arena_functions(void)
{
    return &hr_arena_fn;
}

int hr_arena_adopt(hr_arena *arena, redisReply *reply)
{
    if (reply == NULL)
        return 0;
    if (hr_vec_push(&arena->kept, reply) != 0) {
        freeReplyObject(reply);
        return -1;
    }
    return 0;
}
