/* hr_clock: the wall clock's test seam (see hr_clock.h), compiled only
 * with meson -Dtest_seams=true.  The skew is read from the environment
 * once, on the first reading of the clock. */
#include "hr_clock.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_once_t hr_clock_skew_once = PTHREAD_ONCE_INIT;
static int64_t hr_clock_skew;

static void hr_clock_skew_read(void)
{
    const char *v = getenv("HERALD_TEST_CLOCK_SKEW_MS");

    hr_clock_skew = v != NULL ? strtoll(v, NULL, 10) : 0;
}

int64_t hr_clock_test_skew_ms(void)
{
    pthread_once(&hr_clock_skew_once, hr_clock_skew_read);
    return hr_clock_skew;
}
