/* hr_config_records: the lists of records in herald.yaml (the categories,
 * the client keys).  Their types are the public part, which hr_config.h
 * includes; the functions are for hr_config.c, whose tables name them as
 * the keys' apply() and clear_item(). */
#ifndef HR_CONFIG_RECORDS_H
#define HR_CONFIG_RECORDS_H

#include <stdbool.h>
#include <stddef.h>

#define HR_CLIENT_KEYS_MAX 2
#define HR_CLIENT_SECRET_MIN 32 /* bytes: an HMAC-SHA256 key of a guessable size is no key */

/* One key of dispatcher.api.client_keys: {id, secret | secret_file}. */
typedef struct hr_client_key {
    char *id;          /* 1..32 of [A-Za-z0-9_-], unique */
    char *secret;      /* at least HR_CLIENT_SECRET_MIN bytes */
    char *secret_file; /* read into secret at load, then NULL */
} hr_client_key;

/* Recipients (docs/recipients.md): the categories a task may have. */
#define HR_CATEGORIES_MAX 64
#define HR_CATEGORY_NAME_MAX 32        /* push_task.category, push_user_pref.category */
#define HR_CATEGORY_DEFAULT "reminder" /* push_task.category's default */

/* One of recipients.categories: {name, mandatory}. */
typedef struct hr_category {
    char *name;     /* 1..HR_CATEGORY_NAME_MAX of [a-z0-9_-], unique */
    bool mandatory; /* opt-outs, quiet hours and unsubscribed addresses do not apply */
} hr_category;

struct cfg_ctx;
struct cfg_key;
struct cfg_node;

/* dispatcher.api.client_keys and one of its items. */
int cfg_apply_client_keys(const struct cfg_ctx *ctx, const struct cfg_key *k, void *base,
                          const struct cfg_node *node, const char *path);
void cfg_client_key_clear(void *item);
/* recipients.categories and one of its items. */
int cfg_apply_categories(const struct cfg_ctx *ctx, const struct cfg_key *k, void *base,
                         const struct cfg_node *node, const char *path);
void cfg_category_clear(void *item);
/* No categories in the file (*N is 0): *CATEGORIES becomes the one
 * push_task.category defaults to.  0, or -1 out of memory. */
int cfg_default_categories(hr_category **categories, size_t *n);

#endif
