/* ctl_variant: heraldctl's variant flags (see ctl_variant.h). */
#include "ctl_variant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_config_file.h"
#include "hr_variant.h"

int ctl_variant_arg(cJSON *variants, const char *arg, char *errstr, size_t errlen)
{
    const char *eq = strchr(arg, '=');
    char locale[HR_VARIANT_KEY_MAX + 1];
    cJSON *o;

    if (eq == NULL || eq == arg || (size_t)(eq - arg) > HR_VARIANT_KEY_MAX) {
        snprintf(errstr, errlen, "--variant: \"%.60s\" is not LOCALE=JSON", arg);
        return -1;
    }
    memcpy(locale, arg, (size_t)(eq - arg));
    locale[eq - arg] = '\0';
    if ((o = cJSON_Parse(eq + 1)) == NULL || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        snprintf(errstr, errlen, "--variant %s: the value is not a JSON object", locale);
        return -1;
    }
    if (cJSON_AddStringToObject(o, "locale", locale) == NULL ||
        !cJSON_AddItemToArray(variants, o)) {
        cJSON_Delete(o);
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    return 0;
}

int ctl_variant_file(cJSON *variants, const char *path, char *errstr, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    cJSON *arr, *m;

    if (hr_config_read_file(strcmp(path, "-") == 0 ? "/dev/stdin" : path, CTL_VARIANT_FILE_MAX,
                            &text, &len, errstr, errlen) != 0)
        return -1;
    arr = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        snprintf(errstr, errlen, "--variants %s: not a JSON array", path);
        return -1;
    }
    while ((m = cJSON_DetachItemFromArray(arr, 0)) != NULL)
        cJSON_AddItemToArray(variants, m);
    cJSON_Delete(arr);
    return 0;
}
