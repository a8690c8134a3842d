/* hr_config_records: the lists of records in herald.yaml,
 * recipients.categories and dispatcher.api.client_keys: their key tables,
 * their walk (the apply() and clear_item() of their keys in hr_config.c's
 * tables) and the default category.  See hr_config_records.h. */
#include "hr_config_records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_config_key.h"

static const cfg_key cfg_client_key_keys[] = {
    K_STR("id", hr_client_key, id, 1, NULL),
    K_STR("secret", hr_client_key, secret, 1, NULL),
    K_STR("secret_file", hr_client_key, secret_file, 1, NULL),
    K_END,
};

static const cfg_key cfg_category_keys[] = {
    K_STR("name", hr_category, name, 1, NULL),
    K_BOOL("mandatory", hr_category, mandatory, false),
    K_END,
};

void cfg_client_key_clear(void *item)
{
    cfg_clear(cfg_client_key_keys, item);
}

/* The start of a list of records: NODE a sequence of at most MAX items
 * (WHAT names them in the message), *ITEMS its N + 1 zeroed records of
 * SIZE bytes.  1 to fill them, 0 for a null node (none), -1 after the
 * error. */
static int cfg_records_alloc(const cfg_ctx *ctx, const cfg_node *node, const char *path, size_t max,
                             const char *what, size_t size, void **items)
{
    if (cfg_node_is_null(node))
        return 0;
    if (node->type != CFG_SEQ)
        return cfg_err(ctx, node->line, node->col, "%s: expected a sequence, got %s", path,
                       cfg_node_kind(node));
    if (node->items.n > max) {
        const char *note = strchr(what, ' ');
        int wlen = note != NULL ? (int)(note - what) : (int)strlen(what);

        return cfg_err(ctx, node->line, node->col, "%s: %zu %.*s; at most %zu%s", path,
                       node->items.n, wlen, what, max, note != NULL ? note : "");
    }
    *items = calloc(node->items.n + 1, size);
    if (*items == NULL)
        return cfg_err(ctx, node->line, node->col, "out of memory");
    return 1;
}

void cfg_category_clear(void *item)
{
    cfg_clear(cfg_category_keys, item);
}

/* recipients.categories: 0..HR_CATEGORIES_MAX mappings {name, mandatory},
 * names of [a-z0-9_-] (they are stored in ascii columns and written in
 * the unsubscribe links), unique. */
int cfg_apply_categories(const cfg_ctx *ctx, const cfg_key *k, void *base, const cfg_node *node,
                         const char *path)
{
    hr_category **cats = CFG_FIELD(base, k);
    size_t *count = CFG_COUNT(base, k);
    char where[CFG_WHY];
    int rc = cfg_records_alloc(ctx, node, path, HR_CATEGORIES_MAX, "categories", sizeof(**cats),
                               (void **)cats);

    if (rc <= 0)
        return rc;
    for (size_t i = 0; i < node->items.n; i++) {
        const cfg_node *item = node->items.v[i];
        hr_category *cat = &(*cats)[i];
        size_t n;
        snprintf(where, sizeof(where), "%.150s[%zu]", path, i);
        (*count)++;
        if (item->type != CFG_MAP)
            return cfg_err(ctx, item->line, item->col,
                           "%s: expected a mapping {name, mandatory}, got %s", where,
                           cfg_node_kind(item));
        if (cfg_apply_map(ctx, cfg_category_keys, cat, item, where) < 0)
            return -1;
        n = cat->name != NULL ? strlen(cat->name) : 0;
        if (n == 0 || n > HR_CATEGORY_NAME_MAX ||
            strspn(cat->name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != n)
            return cfg_err(ctx, item->line, item->col, "%s.name: required, 1..%d of a-z 0-9 _ -",
                           where, HR_CATEGORY_NAME_MAX);
        for (size_t j = 0; j < i; j++)
            if (strcmp((*cats)[j].name, cat->name) == 0)
                return cfg_err(ctx, item->line, item->col, "%s.name: \"%s\" is used twice", where,
                               cat->name);
    }
    return 0;
}

int cfg_default_categories(hr_category **categories, size_t *n)
{
    if (*n > 0)
        return 0;
    free(*categories);
    *categories = calloc(2, sizeof(**categories));
    if (*categories == NULL || ((*categories)[0].name = strdup(HR_CATEGORY_DEFAULT)) == NULL)
        return -1;
    *n = 1;
    return 0;
}

static bool cfg_key_id_ok(const char *id)
{
    size_t n = strlen(id);
    return n >= 1 && n <= 32 &&
           strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* dispatcher.api.client_keys: 0..HR_CLIENT_KEYS_MAX mappings {id, secret}
 * or {id, secret_file}; ids unique, secrets long enough.  A message names
 * the key by its id and place, never the secret. */
int cfg_apply_client_keys(const cfg_ctx *ctx, const cfg_key *k, void *base, const cfg_node *node,
                          const char *path)
{
    hr_client_key **keys = CFG_FIELD(base, k);
    size_t *count = CFG_COUNT(base, k);
    char where[CFG_WHY];
    int rc = cfg_records_alloc(ctx, node, path, HR_CLIENT_KEYS_MAX,
                               "keys (the current one and the one being rotated out)",
                               sizeof(**keys), (void **)keys);

    if (rc <= 0)
        return rc;
    for (size_t i = 0; i < node->items.n; i++) {
        const cfg_node *item = node->items.v[i];
        hr_client_key *key = &(*keys)[i];
        snprintf(where, sizeof(where), "%.150s[%zu]", path, i);
        (*count)++;
        if (item->type != CFG_MAP)
            return cfg_err(ctx, item->line, item->col,
                           "%s: expected a mapping {id, secret}, got %s", where,
                           cfg_node_kind(item));
        if (cfg_apply_map(ctx, cfg_client_key_keys, key, item, where) < 0)
            return -1;
        if (key->id == NULL || !cfg_key_id_ok(key->id))
            return cfg_err(ctx, item->line, item->col, "%s.id: required, 1..32 of A-Z a-z 0-9 _ -",
                           where);
        for (size_t j = 0; j < i; j++)
            if (strcmp((*keys)[j].id, key->id) == 0)
                return cfg_err(ctx, item->line, item->col, "%s.id: \"%s\" is used twice", where,
                               key->id);
        if ((key->secret == NULL) == (key->secret_file == NULL))
            return cfg_err(ctx, item->line, item->col,
                           "%s: give exactly one of secret and secret_file", where);
        if (key->secret_file != NULL) {
            char at_path[CFG_WHY];

            snprintf(at_path, sizeof(at_path), "%.200s.secret_file", where);
            if (cfg_read_secret_file(ctx, cfg_map_get(item, "secret_file"), at_path,
                                     key->secret_file, &key->secret) < 0)
                return -1;
            free(key->secret_file);
            key->secret_file = NULL;
        }
        if (strlen(key->secret) < HR_CLIENT_SECRET_MIN)
            return cfg_err(ctx, item->line, item->col,
                           "%s: the secret of key \"%s\" is %zu bytes; at least %d (e.g. "
                           "openssl rand -hex 32)",
                           where, key->id, strlen(key->secret), HR_CLIENT_SECRET_MIN);
    }
    return 0;
}
