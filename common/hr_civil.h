/* hr_civil: proleptic Gregorian calendar arithmetic on days since
 * 1970-01-01, for any year (no time zone: hr_tz.h is zones).  Pure. */
#ifndef HR_CIVIL_H
#define HR_CIVIL_H

#include <stdbool.h>
#include <stdint.h>

/* Days since 1970-01-01 of the proleptic Gregorian date Y-M-D (any valid
 * date; H. Hinnant's days_from_civil), and back. */
int64_t hr_civil_days(int y, int m, int d);
void hr_civil_date(int64_t days, int *y, int *m, int *d);
/* Whether year Y has a Feb 29; the days of month M (1..12) of year Y. */
bool hr_civil_leap(int64_t y);
int hr_civil_month_days(int y, int m);
/* Floor division, for instants before 1970. */
int64_t hr_civil_floordiv(int64_t a, int64_t b);

#endif
