/* hr_seams: whether this build has test seams (docs/style.md "Test
 * seams"): -Dtest_seams=true defines HERALD_TEST_SEAMS for every target.
 * common/ uses it only to accept what the tests' stand-ins need and a
 * production build refuses, such as an http:// FCM token endpoint
 * (hr_config_channel.c, worker/wk_fcm.c). */
#ifndef HR_SEAMS_H
#define HR_SEAMS_H

#ifndef HERALD_TEST_SEAMS
#define HERALD_TEST_SEAMS 0
#endif

#define HR_SEAMS_ON (HERALD_TEST_SEAMS != 0)

#endif
