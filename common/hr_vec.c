/* hr_vec: the one growth function behind the HR_VEC macros (hr_vec.h).
 *
 * The array pointer is read and written with memcpy: the macros pass the
 * address of a T * member, which this file may not access as a void *. */
#include "hr_vec.h"

#include <stdint.h>
#include <string.h>

int hr_vec_reserve_(void *ptr, size_t *cap, size_t need, size_t elem)
{
    void *old, *grown;
    size_t ncap;

    if (need <= *cap)
        return 0;
    ncap = *cap > 0 ? *cap : HR_VEC_MIN_CAP;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return -1;
        ncap *= 2;
    }
    if (elem > 0 && ncap > SIZE_MAX / elem)
        return -1;
    memcpy(&old, ptr, sizeof old);
    grown = realloc(old, ncap * elem);
    if (grown == NULL)
        return -1;
    memcpy(ptr, &grown, sizeof grown);
    *cap = ncap;
    return 0;
}
