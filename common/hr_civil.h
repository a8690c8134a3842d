/* hr_civil: proleptic Gregorian calendar arithmetic (moved here from
 * hr_tz.h). */
#ifndef HR_CIVIL_H
#define HR_CIVIL_H

#include <stdbool.h>
#include <stdint.h>

/* Days since 1970-01-01 of the proleptic Gregorian date Y-M-D (any valid
 * date; H. Hinnant's days_from_civil), and back. */
int64_t hr_tz_days_from_civil(int y, int m, int d);
void hr_tz_civil_from_days(int64_t days, int *y, int *m, int *d);
bool hr_tz_leap(int64_t y);
int hr_tz_month_days(int y, int m);
/* Floor division, for instants before 1970. */
int64_t hr_tz_floordiv(int64_t a, int64_t b);

#endif
