/* ctl_variant: heraldctl's per-locale variant flags (`create` and `series
 * create`): --variant L=JSON and --variants FILE, each appended to the JSON
 * array the API's "variants" member is, which hr_variant_from_json reads
 * (common/hr_variant.h). */
#ifndef CTL_VARIANT_H
#define CTL_VARIANT_H

#include <stddef.h>

#include <cJSON.h>

#define CTL_VARIANT_FILE_MAX (4 * 1024 * 1024) /* --variants FILE */

/* --variant "L=JSON": the object JSON with "locale": L appended to
 * VARIANTS.  0, or -1 with ERRSTR. */
int ctl_variant_arg(cJSON *variants, const char *arg, char *errstr, size_t errlen);

/* --variants FILE ("-": stdin): its array's members appended to VARIANTS.
 * 0, or -1 with ERRSTR. */
int ctl_variant_file(cJSON *variants, const char *path, char *errstr, size_t errlen);

#endif
