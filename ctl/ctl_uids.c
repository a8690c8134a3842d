/* ctl_uids: a file of user ids (see ctl_uids.h). */
#include "ctl_uids.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_parse.h"

/* One line's id: hr_parse_uid's, as the API takes it (digits only, no
 * leading zero, 1 .. 2^63-1).  Whitespace around it is allowed.  1 = an id
 * in *OUT, 0 = blank or comment, -1 = bad. */
static int ctl_uids_parse_line(char *line, int64_t *out)
{
    char *s = line, *end;

    while (*s == ' ' || *s == '\t')
        s++;
    end = s + strlen(s);
    while (end > s && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
        *--end = '\0';
    if (*s == '\0' || *s == '#')
        return 0;
    return hr_parse_uid(s, (size_t)(end - s), out) == 0 ? 1 : -1;
}

int ctl_uids_read(const char *path, ctl_uids *ids, char *errstr, size_t errlen)
{
    bool std = strcmp(path, "-") == 0;
    const char *name = std ? "<stdin>" : path;
    FILE *f = std ? stdin : fopen(path, "r");
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    int64_t v;
    int rc = -1, got;

    if (f == NULL) {
        snprintf(errstr, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        got = ctl_uids_parse_line(line, &v);
        if (got < 0) {
            snprintf(errstr, errlen, "%s:%zu: \"%.40s\" is not a user id (an integer 1..2^63-1)",
                     name, lineno, line);
            goto done;
        }
        if (got == 1 && hr_vec_push(ids, v) < 0) {
            snprintf(errstr, errlen, "%s:%zu: out of memory", name, lineno);
            goto done;
        }
    }
    if (ferror(f)) {
        snprintf(errstr, errlen, "%s: %s", name, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    free(line);
    if (!std)
        fclose(f);
    return rc;
}
