/* wk_h2_mem: size-class free lists behind nghttp2's allocations (see
 * wk_h2_mem.h).  A block is a 16-byte header (the size asked for and the
 * class, or WK_H2_MEM_BIG for a malloc'ed block over WK_H2_MEM_MAX_SIZE)
 * followed by the caller's bytes, so alignment stays 16 bytes; a block on
 * a free list links to the next through its first caller bytes. */
#include "wk_h2_mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WK_H2_MEM_BIG 0xff
#define WK_H2_MEM_HEAD 16

typedef struct wk_h2_mem_head {
    size_t size;
    unsigned char cls;
} wk_h2_mem_head;

_Static_assert(sizeof(wk_h2_mem_head) == WK_H2_MEM_HEAD, "a block header is 16 bytes");

#define WK_H2_MEM_USER(h) ((void *)((char *)(h) + WK_H2_MEM_HEAD))
#define WK_H2_MEM_NEXT(h) (*(wk_h2_mem_head **)WK_H2_MEM_USER(h))

/* The class of a block of SIZE bytes, or WK_H2_MEM_BIG. */
static unsigned wk_h2_mem_class(size_t size)
{
    unsigned cls = 0;
    size_t cap = WK_H2_MEM_MIN_SIZE;

    if (size > WK_H2_MEM_MAX_SIZE)
        return WK_H2_MEM_BIG;
    while (cap < size) {
        cap <<= 1;
        cls++;
    }
    return cls;
}

static size_t wk_h2_mem_class_size(unsigned cls)
{
    return (size_t)WK_H2_MEM_MIN_SIZE << cls;
}

static void *wk_h2_mem_malloc(size_t size, void *data)
{
    wk_h2_mem *m = data;
    unsigned cls = wk_h2_mem_class(size);
    wk_h2_mem_head *h;

    if (cls == WK_H2_MEM_BIG) {
        h = malloc(WK_H2_MEM_HEAD + size);
    } else if (m->free_list[cls] != NULL) {
        h = m->free_list[cls];
        m->free_list[cls] = WK_H2_MEM_NEXT(h);
    } else {
        h = malloc(WK_H2_MEM_HEAD + wk_h2_mem_class_size(cls));
        if (h != NULL)
            m->blocks++;
    }
    if (h == NULL)
        return NULL;
    h->size = size;
    h->cls = (unsigned char)cls;
    return WK_H2_MEM_USER(h);
}

static void wk_h2_mem_free(void *ptr, void *data)
{
    wk_h2_mem *m = data;
    wk_h2_mem_head *h;
    unsigned cls;

    if (ptr == NULL)
        return;
    h = (wk_h2_mem_head *)((char *)ptr - WK_H2_MEM_HEAD);
    cls = h->cls;
    if (cls == WK_H2_MEM_BIG) {
        free(h);
        return;
    }
    WK_H2_MEM_NEXT(h) = m->free_list[cls];
    m->free_list[cls] = h;
}

static void *wk_h2_mem_calloc(size_t nmemb, size_t size, void *data)
{
    void *p;

    if (size != 0 && nmemb > SIZE_MAX / size)
        return NULL;
    p = wk_h2_mem_malloc(nmemb * size, data);
    if (p != NULL)
        memset(p, 0, nmemb * size);
    return p;
}

static void *wk_h2_mem_realloc(void *ptr, size_t size, void *data)
{
    wk_h2_mem_head *h;
    void *p;

    if (ptr == NULL)
        return wk_h2_mem_malloc(size, data);
    h = (wk_h2_mem_head *)((char *)ptr - WK_H2_MEM_HEAD);
    if (h->cls != WK_H2_MEM_BIG && size <= wk_h2_mem_class_size(h->cls)) {
        h->size = size;
        return ptr;
    }
    p = wk_h2_mem_malloc(size, data);
    if (p == NULL)
        return NULL;
    memcpy(p, ptr, h->size < size ? h->size : size);
    wk_h2_mem_free(ptr, data);
    return p;
}

void wk_h2_mem_init(wk_h2_mem *m)
{
    memset(m, 0, sizeof *m);
    m->mem.mem_user_data = m;
    m->mem.malloc = wk_h2_mem_malloc;
    m->mem.free = wk_h2_mem_free;
    m->mem.calloc = wk_h2_mem_calloc;
    m->mem.realloc = wk_h2_mem_realloc;
}

void wk_h2_mem_release(wk_h2_mem *m)
{
    for (unsigned cls = 0; cls < WK_H2_MEM_CLASSES; cls++) {
        while (m->free_list[cls] != NULL) {
            wk_h2_mem_head *h = m->free_list[cls];
            m->free_list[cls] = WK_H2_MEM_NEXT(h);
            free(h);
            m->blocks--;
        }
    }
}
