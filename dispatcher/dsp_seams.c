/* dsp_seams: the test seams' state (see dsp_seams.h); compiled only with
 * -Dtest_seams=true.  Set once by dsp_seams_init before any thread starts,
 * read-only afterwards except the move counter, which only the loop
 * thread touches. */
#include <stdlib.h>
#include <unistd.h>

#include "dsp_seams.h"

static const char *dsp_seams_topic_filter;
static long dsp_seams_crash_after_move; /* 0 = off */
static long dsp_seams_moves;

void dsp_seams_init(void)
{
    const char *crash = getenv("HERALD_TEST_CRASH_AFTER_MOVE");

    dsp_seams_topic_filter = getenv("HERALD_TEST_TASK_TOPIC");
    dsp_seams_crash_after_move = crash ? strtol(crash, NULL, 10) : 0;
}

const char *dsp_seams_topic(void)
{
    return dsp_seams_topic_filter;
}

void dsp_seams_moved(void)
{
    if (dsp_seams_crash_after_move > 0 && ++dsp_seams_moves == dsp_seams_crash_after_move)
        _exit(137); /* die between the move and the publish */
}
