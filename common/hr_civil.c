/* hr_civil: proleptic Gregorian calendar arithmetic (hr_civil.h), used by
 * the zones (hr_tz.c), the time parser (hr_parse.c) and the send instants
 * (hr_release.c). */
#include "hr_civil.h"

int64_t hr_civil_days(int y, int m, int d)
{
    int64_t era, yoe, doy, doe, yy = (int64_t)y - (m <= 2);

    era = (yy >= 0 ? yy : yy - 399) / 400;
    yoe = yy - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void hr_civil_date(int64_t days, int *y, int *m, int *d)
{
    int64_t z = days + 719468, era, doe, yoe, doy, mp;

    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

bool hr_civil_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int hr_civil_month_days(int y, int m)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

    return mdays[m - 1] + (m == 2 && hr_civil_leap(y));
}

/* Floor division, for instants before 1970. */
int64_t hr_civil_floordiv(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}
