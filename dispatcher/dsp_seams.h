/* dsp_seams: the dispatcher's test seams, the one place they are written.
 * They exist only in a build configured with -Dtest_seams=true (which
 * defines HERALD_TEST_SEAMS); a release build has neither the environment
 * reads nor the branches, and `herald-dispatcher --version` says which.
 *
 *   HERALD_TEST_TASK_TOPIC=<topic>  only tasks of this topic are seen, so
 *                                   tests sharing the database do not
 *                                   take each other's tasks
 *   HERALD_TEST_CRASH_AFTER_MOVE=N  _exit(137) right after the N-th chunk
 *                                   move, before its message is produced
 *
 * Without the seams the topic filter's two parameters are NULL constants:
 * "(? IS NULL OR topic = ?)" is then always true, which MySQL folds away. */
#ifndef DSP_SEAMS_H
#define DSP_SEAMS_H

#include <stdbool.h>

#include "hr_mysql.h"

#ifndef HERALD_TEST_SEAMS
#define HERALD_TEST_SEAMS 0
#endif

/* Whether this binary carries the seams (for --version). */
#define DSP_SEAMS_ON (HERALD_TEST_SEAMS != 0)

#if HERALD_TEST_SEAMS
/* Reads the seams' environment; called once at start-up. */
void dsp_seams_init(void);
/* The topic filter, or NULL. */
const char *dsp_seams_topic(void);
/* Called after every chunk move. */
void dsp_seams_moved(void);
#define DSP_TOPIC_PARAMS                                           \
    (dsp_seams_topic() ? HR_P_STR(dsp_seams_topic()) : HR_P_NULL), \
        (dsp_seams_topic() ? HR_P_STR(dsp_seams_topic()) : HR_P_NULL)
#else
static inline void dsp_seams_init(void)
{
}
static inline const char *dsp_seams_topic(void)
{
    return NULL;
}
static inline void dsp_seams_moved(void)
{
}
#define DSP_TOPIC_PARAMS HR_P_NULL, HR_P_NULL
#endif

#endif
