/* hr_vec: a growable array of one element type, for lists whose length is
 * known only once they are read (ids of a file, metric children, ...).
 *
 * A vector is a plain struct declared with HR_VEC(T): V points at N used
 * elements of CAP allocated ones.  The owner zero-initialises it, grows it
 * with hr_vec_push() / hr_vec_reserve() and releases it with hr_vec_free();
 * V may be read and indexed directly.  Growth doubles (from HR_VEC_MIN_CAP
 * or the asked capacity), so N pushes cost O(N) copies.  A failed growth
 * (out of memory, or a size that would overflow) leaves the vector as it
 * was and returns -1. */
#ifndef HR_VEC_H
#define HR_VEC_H

#include <stddef.h>
#include <stdlib.h>

#define HR_VEC_MIN_CAP 16

#define HR_VEC(T)   \
    struct {        \
        T *v;       \
        size_t n;   \
        size_t cap; \
    }

/* Makes room for NEED elements of ELEM bytes in the array whose pointer
 * is stored at PTR (any object pointer type) and whose capacity is *CAP.
 * 0, or -1 with nothing changed.  Use the macros below. */
int hr_vec_reserve_(void *ptr, size_t *cap, size_t need, size_t elem);

#define hr_vec_reserve(vec, need) hr_vec_reserve_(&(vec)->v, &(vec)->cap, (need), sizeof *(vec)->v)

/* Appends X.  0, or -1 (out of memory) with VEC unchanged. */
#define hr_vec_push(vec, x) \
    (hr_vec_reserve((vec), (vec)->n + 1) == 0 ? ((vec)->v[(vec)->n++] = (x), 0) : -1)

/* Frees the elements' storage (not what they point to) and empties VEC. */
#define hr_vec_free(vec) (free((vec)->v), (vec)->v = NULL, (vec)->n = (vec)->cap = 0)

#endif
