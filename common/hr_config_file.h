/* hr_config_file: reading the configuration file and the files it names
 * (secrets, keys): a whole regular file with a cap on its size; the text
 * returned belongs to the caller. */
#ifndef HR_CONFIG_FILE_H
#define HR_CONFIG_FILE_H

#include <stdbool.h>
#include <stddef.h>

/* Reads the whole regular file PATH, at most MAX bytes, into *OUT (NUL
 * added; the caller frees) and its length *LEN.  0, or -1 with ERRSTR
 * "path: reason".  For the configuration and the key files it names. */
int hr_config_read_file(const char *path, size_t max, char **out, size_t *len, char *errstr,
                        size_t errlen);

/* A secret file (at most 4 KiB) into *OUT without its final line break. */
int cfg_read_secret(const char *path, char **out, char *errstr, size_t errlen);

/* True when the file PATH names (a link followed) may be read by its group
 * or by others: a secret file should be the owner's alone (mode 0400 or
 * 0600).  False when it cannot be looked at (the read says why). */
bool hr_config_file_exposed(const char *path);

#endif
