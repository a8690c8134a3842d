/* hr_role: the roles of the API's callers (docs/api.md "Operators and
 * roles"), ordered so that a higher role may do everything a lower one
 * may: a viewer watches, an operator also acts on running campaigns, an
 * admin also creates and changes tasks and manages tokens.  The route
 * table names the least role of each route; an API token, a JWT's role
 * claim and the audit log name a role by hr_role_name. */
#ifndef HR_ROLE_H
#define HR_ROLE_H

typedef enum hr_role {
    HR_ROLE_NONE = 0, /* no role: an open route, or a caller not let in */
    HR_ROLE_VIEWER = 1,
    HR_ROLE_OPERATOR = 2,
    HR_ROLE_ADMIN = 3,
} hr_role;

#define HR_ROLE_COUNT 4

/* "viewer", "operator", "admin"; "none" for HR_ROLE_NONE or a value out of
 * range. */
const char *hr_role_name(hr_role role);
/* The role named S (one of the three above); -1 for anything else,
 * "none" included. */
int hr_role_parse(const char *s, hr_role *out);

#endif
