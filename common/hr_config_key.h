/* hr_config_key: the key tables of the configuration and their walk, for
 * the other hr_config_* modules only.  A cfg_key names a key, its type, its
 * bounds, its default as written in the file and where the value lives as
 * an offset from a base object (redis' static_configs[]); a table is an
 * array of them ended by K_END.  The walk applies a mapping of the tree to
 * a table, gives defaults, converts env overrides and frees what a table
 * describes.  A CFG_T_RECORDS key brings its own apply() and clear_item(),
 * so the walk never names the modules above it (hr_config_channel.c,
 * hr_config.c). */
#ifndef HR_CONFIG_KEY_H
#define HR_CONFIG_KEY_H

#include <stdbool.h>
#include <stddef.h>

#include "hr_config_yaml.h"

typedef enum cfg_type {
    CFG_T_STR,     /* char *; min 1 = must not be empty; check() validates */
    CFG_T_INT,     /* int in min..max */
    CFG_T_LONG,    /* long in min..max */
    CFG_T_BOOL,    /* bool */
    CFG_T_CHOICE,  /* one of `allowed`, stored by choose() */
    CFG_T_SECTION, /* a mapping described by `sub`, same base */
    CFG_T_STRLIST, /* char ** + size_t count; empty strings dropped; check() each item;
                    * an env override is one comma-separated string */
    CFG_T_KVMAP,   /* hr_kv * + size_t count; string -> scalar */
    CFG_T_CODES,   /* int * + size_t count; HTTP status codes */
    CFG_T_RECORDS, /* an array of `size`-byte records + size_t count, read by apply()
                    * and each record freed by clear_item() (channels, client keys):
                    * the walk calls the module that owns the records, not the reverse */
} cfg_type;

typedef struct cfg_key {
    const char *name;
    cfg_type type;
    size_t off;       /* the field, from the base object */
    size_t count_off; /* list types: the element count */
    long long min, max;
    const char *def; /* default as written in the file; NULL = none */
    int (*check)(const char *text, char *errstr, size_t errlen);
    int (*choose)(void *field, const char *text);
    int (*check_kv)(const char *key, const char *value, char *errstr, size_t errlen);
    const char *allowed; /* CFG_T_CHOICE, for messages */
    const struct cfg_key *sub;
    size_t size; /* CFG_T_RECORDS: one record */
    int (*apply)(const cfg_ctx *ctx, const struct cfg_key *k, void *base, const cfg_node *node,
                 const char *path);
    void (*clear_item)(void *item);
} cfg_key;

/* A table's entries: key name N of type T's field F. */
#define K_STR(n, T, f, nonempty, d)                                                    \
    {                                                                                  \
        .name = n, .type = CFG_T_STR, .off = offsetof(T, f), .min = nonempty, .def = d \
    }
#define K_CHECKED(n, T, f, d, fn)                                                            \
    {                                                                                        \
        .name = n, .type = CFG_T_STR, .off = offsetof(T, f), .min = 1, .def = d, .check = fn \
    }
#define K_INT(n, T, f, lo, hi, d)                                                            \
    {                                                                                        \
        .name = n, .type = CFG_T_INT, .off = offsetof(T, f), .min = lo, .max = hi, .def = #d \
    }
#define K_LONG(n, T, f, lo, hi, d)                                                            \
    {                                                                                         \
        .name = n, .type = CFG_T_LONG, .off = offsetof(T, f), .min = lo, .max = hi, .def = #d \
    }
#define K_BOOL(n, T, f, d)                                              \
    {                                                                   \
        .name = n, .type = CFG_T_BOOL, .off = offsetof(T, f), .def = #d \
    }
#define K_CHOICE(n, T, f, d, fn, names)                                                 \
    {                                                                                   \
        .name = n, .type = CFG_T_CHOICE, .off = offsetof(T, f), .def = d, .choose = fn, \
        .allowed = names                                                                \
    }
#define K_SECTION(n, keys)                            \
    {                                                 \
        .name = n, .type = CFG_T_SECTION, .sub = keys \
    }
#define K_LIST(n, t, T, f, count)                                                    \
    {                                                                                \
        .name = n, .type = t, .off = offsetof(T, f), .count_off = offsetof(T, count) \
    }
#define K_KVMAP(n, T, f, count, fn)                                                             \
    {                                                                                           \
        .name = n, .type = CFG_T_KVMAP, .off = offsetof(T, f), .count_off = offsetof(T, count), \
        .check_kv = fn                                                                          \
    }
#define K_RECORDS(n, T, f, count, R, apply_fn, clear_fn)                                          \
    {                                                                                             \
        .name = n, .type = CFG_T_RECORDS, .off = offsetof(T, f), .count_off = offsetof(T, count), \
        .size = sizeof(R), .apply = apply_fn, .clear_item = clear_fn                              \
    }
#define K_END        \
    {                \
        .name = NULL \
    }

#define CFG_FIELD(base, k) ((void *)((char *)(base) + (k)->off))
#define CFG_COUNT(base, k) ((size_t *)(void *)((char *)(base) + (k)->count_off))

/* Sets a scalar-typed key from TEXT (already expanded): the one conversion
 * used for defaults, file values and env overrides. */
int cfg_set_scalar(const cfg_key *k, void *base, const char *text, char *errstr, size_t errlen);
int cfg_set_defaults(const cfg_key *keys, void *base, char *errstr, size_t errlen);
const char *cfg_type_name(cfg_type t);
/* NODE as text for a scalar key: ${} expanded, null read as "". */
int cfg_scalar_text(const cfg_ctx *ctx, const cfg_node *node, const char *path,
                    const char *expected, char **out);
int cfg_apply_strlist(const cfg_ctx *ctx, const cfg_key *k, void *base, const cfg_node *node,
                      const char *path);
int cfg_apply_kvmap(const cfg_ctx *ctx, const cfg_key *k, void *base, const cfg_node *node,
                    const char *path);
int cfg_apply_codes(const cfg_ctx *ctx, const cfg_key *k, void *base, const cfg_node *node,
                    const char *path);

/* A secret file the configuration names (its key at NODE, for messages):
 * cfg_read_secret, and the path noted in ctx->exposed when its group or
 * others may read it.  cfg_note_secret only notes (a file another part of
 * herald reads, such as a private key). */
int cfg_read_secret_file(const cfg_ctx *ctx, const cfg_node *node, const char *path,
                         const char *file, char **out);
int cfg_note_secret(const cfg_ctx *ctx, const char *file);
/* The lines of the secret file FILE, named by the key at NODE (PATH in
 * messages), appended to the string list K describes in BASE: one item a
 * line, blank lines and lines starting with # skipped, each checked by
 * k->check.  The `*_file` form of a list of secrets (tokens_file,
 * signing_secrets_file). */
int cfg_apply_list_file(const cfg_ctx *ctx, const cfg_key *k, void *base, const cfg_node *node,
                        const char *path, const char *file);

/* Frees what KEYS describe in BASE. */
void cfg_clear(const cfg_key *keys, void *base);
/* Applies mapping MAP to the keys of one section; WHERE prefixes key paths
 * in messages. */
int cfg_apply_map(const cfg_ctx *ctx, const cfg_key *keys, void *base, const cfg_node *map,
                  const char *where);

#endif
