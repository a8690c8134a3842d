/* hr_role: the role names (see hr_role.h). */
#include "hr_role.h"

#include <stddef.h>
#include <string.h>

static const char *const hr_role_names[HR_ROLE_COUNT] = {
    [HR_ROLE_NONE] = "none",
    [HR_ROLE_VIEWER] = "viewer",
    [HR_ROLE_OPERATOR] = "operator",
    [HR_ROLE_ADMIN] = "admin",
};

const char *hr_role_name(hr_role role)
{
    return role > HR_ROLE_NONE && role < HR_ROLE_COUNT ? hr_role_names[role] : "none";
}

int hr_role_parse(const char *s, hr_role *out)
{
    for (int i = HR_ROLE_VIEWER; s != NULL && i < HR_ROLE_COUNT; i++)
        if (strcmp(s, hr_role_names[i]) == 0) {
            *out = (hr_role)i;
            return 0;
        }
    return -1;
}
