/* hr_config_key: the walk of the key tables (see hr_config_key.h): values
 * set through a cfg_key (defaults, file values, env overrides), the list
 * and map types, a mapping applied to a table, and freeing through a
 * table. */
#include "hr_config_key.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_config_file.h"
#include "hr_config_value.h"
#include "hr_kv.h"

/* ---- setting values ------------------------------------------------- */

/* A string list from one comma-separated TEXT (an env override such as
 * HERALD_REDIS_NODES): items trimmed of spaces, empty ones dropped, each
 * checked; it replaces the list. */
static int cfg_set_strlist(const cfg_key *k, void *base, const char *text, char *errstr,
                           size_t errlen)
{
    char ***list = CFG_FIELD(base, k);
    size_t *count = CFG_COUNT(base, k), n = 0, cap = 1;
    char **items;

    for (const char *p = text; *p != '\0'; p++)
        cap += *p == ',';
    items = calloc(cap + 1, sizeof(char *));
    if (items == NULL)
        goto oom;
    for (const char *p = text; *p != '\0';) {
        size_t len = strcspn(p, ","), lead = strspn(p, " ");
        const char *next = p + len + (p[len] == ',');

        lead = lead < len ? lead : len;
        p += lead;
        len -= lead;
        while (len > 0 && p[len - 1] == ' ')
            len--;
        if (len > 0) {
            items[n] = strndup(p, len);
            if (items[n] == NULL)
                goto oom;
            if (k->check != NULL && k->check(items[n++], errstr, errlen) < 0)
                goto fail;
        }
        p = next;
    }
    for (size_t i = 0; i < *count; i++)
        free((*list)[i]);
    free(*list);
    *list = items;
    *count = n;
    return 0;

oom:
    snprintf(errstr, errlen, "out of memory");
fail:
    for (size_t i = 0; items != NULL && i < cap; i++)
        free(items[i]);
    free(items);
    return -1;
}

/* Sets a scalar-typed key from TEXT (already expanded): the one conversion
 * used for defaults, file values and env overrides. */
int cfg_set_scalar(const cfg_key *k, void *base, const char *text, char *errstr, size_t errlen)
{
    void *field = CFG_FIELD(base, k);
    long long v;

    switch (k->type) {
    case CFG_T_STR: {
        if (k->min > 0 && text[0] == '\0') {
            snprintf(errstr, errlen, "must not be empty");
            return -1;
        }
        if (k->check != NULL && k->check(text, errstr, errlen) < 0)
            return -1;
        char *copy = strdup(text);
        if (copy == NULL) {
            snprintf(errstr, errlen, "out of memory");
            return -1;
        }
        free(*(char **)field);
        *(char **)field = copy;
        return 0;
    }
    case CFG_T_INT:
        if (cfg_parse_int(text, k->min, k->max, &v, errstr, errlen) < 0)
            return -1;
        *(int *)field = (int)v;
        return 0;
    case CFG_T_LONG:
        if (cfg_parse_int(text, k->min, k->max, &v, errstr, errlen) < 0)
            return -1;
        *(long *)field = (long)v;
        return 0;
    case CFG_T_BOOL:
        return cfg_parse_bool(text, (bool *)field, errstr, errlen);
    case CFG_T_CHOICE:
        if (k->choose(field, text) == 0)
            return 0;
        snprintf(errstr, errlen, "unknown value \"%.64s\" (expected: %s)", text, k->allowed);
        return -1;
    case CFG_T_STRLIST:
        return cfg_set_strlist(k, base, text, errstr, errlen);
    default:
        snprintf(errstr, errlen, "not a scalar key");
        return -1;
    }
}

int cfg_set_defaults(const cfg_key *keys, void *base, char *errstr, size_t errlen)
{
    for (const cfg_key *k = keys; k->name != NULL; k++) {
        if (k->type == CFG_T_SECTION) {
            if (cfg_set_defaults(k->sub, base, errstr, errlen) < 0)
                return -1;
        } else if (k->def != NULL && cfg_set_scalar(k, base, k->def, errstr, errlen) < 0) {
            return -1;
        }
    }
    return 0;
}

const char *cfg_type_name(cfg_type t)
{
    switch (t) {
    case CFG_T_INT:
    case CFG_T_LONG:
        return "an integer";
    case CFG_T_BOOL:
        return "true or false";
    case CFG_T_STR:
    case CFG_T_CHOICE:
        return "a string";
    case CFG_T_STRLIST:
    case CFG_T_CODES:
        return "a sequence";
    default:
        return "a mapping";
    }
}

/* NODE as text for a scalar key: ${} expanded, null read as "". */
int cfg_scalar_text(const cfg_ctx *ctx, const cfg_node *node, const char *path,
                    const char *expected, char **out)
{
    char detail[CFG_WHY];
    *out = NULL;
    if (node->type != CFG_SCALAR)
        return cfg_err(ctx, node->line, node->col, "%s: expected %s, got %s", path, expected,
                       cfg_node_kind(node));
    if (cfg_expand(cfg_node_is_null(node) ? "" : node->value, out, detail, sizeof(detail)) < 0)
        return cfg_err(ctx, node->line, node->col, "%s: %s", path, detail);
    return 0;
}

int cfg_apply_strlist(const cfg_ctx *ctx, const cfg_key *k, void *base, const cfg_node *node,
                      const char *path)
{
    char ***list = CFG_FIELD(base, k);
    size_t *count = CFG_COUNT(base, k);
    char *text = NULL;

    if (cfg_node_is_null(node))
        return 0;
    if (node->type != CFG_SEQ)
        return cfg_err(ctx, node->line, node->col, "%s: expected a sequence, got %s", path,
                       cfg_node_kind(node));
    *list = calloc(node->items.n + 1, sizeof(char *));
    if (*list == NULL)
        return cfg_err(ctx, node->line, node->col, "out of memory");
    for (size_t i = 0; i < node->items.n; i++) {
        const cfg_node *item = node->items.v[i];
        char detail[CFG_WHY];
        if (cfg_scalar_text(ctx, item, path, "a string", &text) < 0)
            return -1;
        if (text[0] != '\0' && k->check != NULL && k->check(text, detail, sizeof(detail)) < 0) {
            free(text);
            return cfg_err(ctx, item->line, item->col, "%s: %s", path, detail);
        }
        if (text[0] == '\0')
            free(text);
        else
            (*list)[(*count)++] = text;
    }
    return 0;
}

int cfg_note_secret(const cfg_ctx *ctx, const char *file)
{
    char *copy;

    if (ctx->exposed == NULL || !hr_config_file_exposed(file))
        return 0;
    if ((copy = strdup(file)) == NULL || hr_vec_push(ctx->exposed, copy) != 0) {
        free(copy);
        return -1;
    }
    return 0;
}

int cfg_read_secret_file(const cfg_ctx *ctx, const cfg_node *node, const char *path,
                         const char *file, char **out)
{
    char detail[CFG_WHY];

    if (cfg_read_secret(file, out, detail, sizeof(detail)) < 0)
        return cfg_err(ctx, node->line, node->col, "%s: %s", path, detail);
    if (cfg_note_secret(ctx, file) < 0)
        return cfg_err(ctx, node->line, node->col, "out of memory");
    return 0;
}

int cfg_apply_list_file(const cfg_ctx *ctx, const cfg_key *k, void *base, const cfg_node *node,
                        const char *path, const char *file)
{
    char ***list = CFG_FIELD(base, k);
    size_t *count = CFG_COUNT(base, k);
    char *text = NULL, *line, *save = NULL, detail[CFG_WHY], **grown;
    int rc = -1, lineno = 0;

    if (cfg_read_secret_file(ctx, node, path, file, &text) < 0)
        return -1;
    for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        size_t len = strlen(line);

        lineno++;
        while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        if (k->check != NULL && k->check(line, detail, sizeof(detail)) < 0) {
            /* The line's number, never its text: it is a secret. */
            cfg_err(ctx, node->line, node->col, "%s: line %d: %s", path, lineno, detail);
            goto done;
        }
        grown = realloc(*list, (*count + 2) * sizeof(char *));
        if (grown == NULL) {
            cfg_err(ctx, node->line, node->col, "out of memory");
            goto done;
        }
        *list = grown;
        if (((*list)[*count] = strdup(line)) == NULL) {
            cfg_err(ctx, node->line, node->col, "out of memory");
            goto done;
        }
        (*list)[++*count] = NULL;
    }
    rc = 0;
done:
    free(text);
    return rc;
}

int cfg_apply_kvmap(const cfg_ctx *ctx, const cfg_key *k, void *base, const cfg_node *node,
                    const char *path)
{
    hr_kv **kv = CFG_FIELD(base, k);
    size_t *count = CFG_COUNT(base, k);
    char detail[CFG_WHY];

    if (cfg_node_is_null(node))
        return 0;
    if (node->type != CFG_MAP)
        return cfg_err(ctx, node->line, node->col, "%s: expected a mapping, got %s", path,
                       cfg_node_kind(node));
    *kv = calloc(node->items.n / 2 + 1, sizeof(hr_kv));
    if (*kv == NULL)
        return cfg_err(ctx, node->line, node->col, "out of memory");
    for (size_t i = 0; i + 1 < node->items.n; i += 2) {
        const cfg_node *key = node->items.v[i], *val = node->items.v[i + 1];
        hr_kv *pair = &(*kv)[*count];
        char sub[CFG_WHY];
        snprintf(sub, sizeof(sub), "%.150s.%.64s", path, key->value);
        if (key->value[0] == '\0')
            return cfg_err(ctx, key->line, key->col, "%s: empty key", path);
        pair->key = strdup(key->value);
        if (pair->key == NULL)
            return cfg_err(ctx, key->line, key->col, "out of memory");
        (*count)++;
        if (cfg_scalar_text(ctx, val, sub, "a scalar", &pair->value) < 0)
            return -1;
        if (k->check_kv != NULL && k->check_kv(pair->key, pair->value, detail, sizeof(detail)) < 0)
            return cfg_err(ctx, key->line, key->col, "%s: %s", path, detail);
    }
    return 0;
}

int cfg_apply_codes(const cfg_ctx *ctx, const cfg_key *k, void *base, const cfg_node *node,
                    const char *path)
{
    int **codes = CFG_FIELD(base, k);
    size_t *count = CFG_COUNT(base, k);
    char detail[CFG_WHY];

    if (cfg_node_is_null(node))
        return 0;
    if (node->type != CFG_SEQ)
        return cfg_err(ctx, node->line, node->col, "%s: expected a sequence, got %s", path,
                       cfg_node_kind(node));
    if (node->items.n == 0)
        return cfg_err(ctx, node->line, node->col, "%s: list at least one HTTP status code", path);
    *codes = calloc(node->items.n, sizeof(int));
    if (*codes == NULL)
        return cfg_err(ctx, node->line, node->col, "out of memory");
    for (size_t i = 0; i < node->items.n; i++) {
        const cfg_node *item = node->items.v[i];
        char *text;
        long long v;
        if (cfg_scalar_text(ctx, item, path, "an integer", &text) < 0)
            return -1;
        int rc = cfg_parse_int(text, 100, 599, &v, detail, sizeof(detail));
        free(text);
        if (rc < 0)
            return cfg_err(ctx, item->line, item->col, "%s: %s", path, detail);
        (*codes)[(*count)++] = (int)v;
    }
    return 0;
}

/* ---- applying a mapping --------------------------------------------- */

static int cfg_apply_key(const cfg_ctx *ctx, const cfg_key *k, void *base, const cfg_node *node,
                         const char *path)
{
    char detail[CFG_WHY];
    char *text = NULL;
    int rc;

    switch (k->type) {
    case CFG_T_SECTION:
        return cfg_apply_map(ctx, k->sub, base, node, path);
    case CFG_T_STRLIST:
        return cfg_apply_strlist(ctx, k, base, node, path);
    case CFG_T_KVMAP:
        return cfg_apply_kvmap(ctx, k, base, node, path);
    case CFG_T_CODES:
        return cfg_apply_codes(ctx, k, base, node, path);
    case CFG_T_RECORDS:
        return k->apply(ctx, k, base, node, path);
    default:
        if (cfg_scalar_text(ctx, node, path, cfg_type_name(k->type), &text) < 0)
            return -1;
        rc = cfg_set_scalar(k, base, text, detail, sizeof(detail));
        free(text);
        if (rc < 0)
            return cfg_err(ctx, node->line, node->col, "%s: %s", path, detail);
        return 0;
    }
}

/* Applies mapping MAP to the keys of one section; WHERE ("" at the top,
 * "mysql", "channels.webhook.retry") prefixes key paths in messages.  A null
 * value (`log:` with nothing after it) is an empty section. */
int cfg_apply_map(const cfg_ctx *ctx, const cfg_key *keys, void *base, const cfg_node *map,
                  const char *where)
{
    if (cfg_node_is_null(map))
        return 0;
    if (map->type != CFG_MAP)
        return cfg_err(ctx, map->line, map->col, "%s: expected a mapping, got %s", where,
                       cfg_node_kind(map));
    for (size_t i = 0; i + 1 < map->items.n; i += 2) {
        const cfg_node *key = map->items.v[i], *val = map->items.v[i + 1];
        const cfg_key *k = keys;
        while (k->name != NULL && strcmp(k->name, key->value) != 0)
            k++;
        if (k->name == NULL) {
            char expected[CFG_WHY] = "";
            size_t n = 0;
            for (const cfg_key *e = keys; e->name != NULL && n < sizeof(expected); e++)
                n += (size_t)snprintf(expected + n, sizeof(expected) - n, "%s%s",
                                      e == keys ? "" : ", ", e->name);
            return cfg_err(ctx, key->line, key->col, "unknown key \"%.64s\" %s%s (expected: %s)",
                           key->value, where[0] ? "in " : "at the top level", where, expected);
        }
        char path[CFG_WHY];
        snprintf(path, sizeof(path), "%.150s%s%s", where, where[0] ? "." : "", k->name);
        if (cfg_apply_key(ctx, k, base, val, path) < 0)
            return -1;
    }
    return 0;
}

/* ---- freeing, through the tables ------------------------------------ */

void cfg_clear(const cfg_key *keys, void *base)
{
    for (const cfg_key *k = keys; k->name != NULL; k++) {
        void *field = CFG_FIELD(base, k);
        switch (k->type) {
        case CFG_T_STR:
            free(*(char **)field);
            *(char **)field = NULL;
            break;
        case CFG_T_SECTION:
            cfg_clear(k->sub, base);
            break;
        case CFG_T_STRLIST: {
            char **list = *(char ***)field;
            for (size_t i = 0; i < *CFG_COUNT(base, k); i++)
                free(list[i]);
            free(list);
            *(char ***)field = NULL;
            *CFG_COUNT(base, k) = 0;
            break;
        }
        case CFG_T_KVMAP: {
            hr_kv *kv = *(hr_kv **)field;
            for (size_t i = 0; i < *CFG_COUNT(base, k); i++) {
                free(kv[i].key);
                free(kv[i].value);
            }
            free(kv);
            *(hr_kv **)field = NULL;
            *CFG_COUNT(base, k) = 0;
            break;
        }
        case CFG_T_CODES:
            free(*(int **)field);
            *(int **)field = NULL;
            *CFG_COUNT(base, k) = 0;
            break;
        case CFG_T_RECORDS: {
            char *items = *(void **)field;
            for (size_t i = 0; i < *CFG_COUNT(base, k); i++)
                k->clear_item(items + i * k->size);
            free(items);
            *(void **)field = NULL;
            *CFG_COUNT(base, k) = 0;
            break;
        }
        case CFG_T_INT:
        case CFG_T_LONG:
        case CFG_T_BOOL:
        case CFG_T_CHOICE:
            break;
        }
    }
}
