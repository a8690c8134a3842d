/* hr_config_file: see hr_config_file.h. */
#include "hr_config_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int hr_config_read_file(const char *path, size_t max, char **out, size_t *len, char *errstr,
                        size_t errlen)
{
    char *text = NULL;
    struct stat st;
    int fd = -1, rc = -1;

    *out = NULL;
    *len = 0;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(errstr, errlen, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    if (fstat(fd, &st) < 0) {
        snprintf(errstr, errlen, "%s: cannot read: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(errstr, errlen, "%s: cannot read: not a regular file", path);
        goto out;
    }
    if ((uintmax_t)st.st_size > max) {
        snprintf(errstr, errlen, "%s: larger than %zu bytes", path, max);
        goto out;
    }
    text = malloc((size_t)st.st_size + 1);
    if (text == NULL) {
        snprintf(errstr, errlen, "%s: out of memory", path);
        goto out;
    }
    while (*len < (size_t)st.st_size) {
        ssize_t n = read(fd, text + *len, (size_t)st.st_size - *len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(errstr, errlen, "%s: cannot read: %s", path, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        *len += (size_t)n;
    }
    text[*len] = '\0';
    *out = text;
    text = NULL;
    rc = 0;
out:
    free(text);
    if (fd >= 0)
        close(fd);
    return rc;
}

#define CFG_SECRET_MAX 4096 /* a password file holds one password */

int cfg_read_secret(const char *path, char **out, char *errstr, size_t errlen)
{
    size_t len = 0;

    if (hr_config_read_file(path, CFG_SECRET_MAX, out, &len, errstr, errlen) < 0)
        return -1;
    while (len > 0 && ((*out)[len - 1] == '\n' || (*out)[len - 1] == '\r'))
        (*out)[--len] = '\0';
    return 0;
}

bool hr_config_file_exposed(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)) != 0;
}
