/* hr_config_int: what the files of hr_config share (hr_config.c: the key
 * tables, applying the tree to them, loading; hr_config_yaml.c: the YAML
 * reader into a tree of cfg_node with error positions, and ${VAR}
 * expansion; hr_config_value.c: the checks and conversions of single
 * values).  Not for other modules: include hr_config.h. */
#ifndef HR_CONFIG_INT_H
#define HR_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "hr_config.h"
#include "hr_vec.h"

#define CFG_MAX_DEPTH 32                 /* herald's deepest key is 4 levels */
#define CFG_MAX_FILE (16u * 1024 * 1024) /* a config is a few KiB */
#define CFG_WHY 256                      /* room for one "what is wrong" */

/* ---- the tree (hr_config_yaml.c) ------------------------------------ */

typedef enum cfg_node_type { CFG_SCALAR, CFG_MAP, CFG_SEQ } cfg_node_type;

typedef struct cfg_node {
    cfg_node_type type;
    int line, col;                   /* 1-based */
    char *value;                     /* CFG_SCALAR: NUL-free text */
    bool plain;                      /* CFG_SCALAR: unquoted (only plain ~/null is null) */
    HR_VEC(struct cfg_node *) items; /* CFG_MAP: key, value, key, value...; CFG_SEQ: items */
} cfg_node;

typedef struct cfg_ctx {
    const char *name; /* the file name for messages */
    const char *text; /* the whole input, to place reader errors and tabs */
    size_t len;
    char *errstr;
    size_t errlen;
} cfg_ctx;

/* "NAME:LINE:COL: message" into ctx->errstr; returns -1. */
int cfg_err(const cfg_ctx *ctx, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void cfg_node_free(cfg_node *node);
bool cfg_node_is_null(const cfg_node *node);
const char *cfg_node_kind(const cfg_node *node);
/* The value of KEY in mapping MAP, or NULL. */
const cfg_node *cfg_map_get(const cfg_node *map, const char *key);
/* The whole stream: one document whose root is a mapping. */
int cfg_tree_build(const cfg_ctx *ctx, cfg_node **out);
/* Expands ${VAR}, ${VAR:-default} (used when VAR is unset or empty) and $$
 * (a literal $) in TEXT into a new string *OUT (see hr_config_yaml.c). */
int cfg_expand(const char *text, char **out, char *errstr, size_t errlen);

/* ---- single values (hr_config_value.c) ------------------------------ */

/* TEXT as a decimal integer in MIN..MAX. */
int cfg_parse_int(const char *text, long long min, long long max, long long *out, char *errstr,
                  size_t errlen);
int cfg_parse_bool(const char *text, bool *out, char *errstr, size_t errlen);
/* The checks of string keys (cfg_key.check / check_kv): 0, or -1 with WHY. */
int cfg_check_listen(const char *text, char *errstr, size_t errlen);
int cfg_check_server(const char *text, char *errstr, size_t errlen);
int cfg_check_prefix(const char *text, char *errstr, size_t errlen);
int cfg_check_instance(const char *text, char *errstr, size_t errlen);
int cfg_check_body(const char *text, char *errstr, size_t errlen);
int cfg_check_url(const char *text, char *errstr, size_t errlen);
int cfg_check_method(const char *text, char *errstr, size_t errlen);
int cfg_check_header(const char *name, const char *value, char *errstr, size_t errlen);
int cfg_check_mail_template(const char *text, char *errstr, size_t errlen);
int cfg_check_secret(const char *text, char *errstr, size_t errlen);
int cfg_check_mailbox(const char *text, char *errstr, size_t errlen);
int cfg_check_apple_id(const char *text, char *errstr, size_t errlen);
int cfg_check_unsubscribe(const char *text, char *errstr, size_t errlen);
/* Choices (cfg_key.choose): the name TEXT stored as its value in FIELD. */
int cfg_choose_level(void *field, const char *text);
int cfg_choose_format(void *field, const char *text);
int cfg_choose_escape(void *field, const char *text);
int cfg_choose_throttle(void *field, const char *text);
int cfg_choose_channel_type(void *field, const char *text);
int cfg_choose_push_type(void *field, const char *text);
int cfg_choose_priority(void *field, const char *text);

/* ---- the key tables (hr_config.c, hr_config_channel.c) --------------- */

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

/* ---- setting values through a cfg_key (hr_config_value.c) ------------ */

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

/* ---- the walk of the tables (hr_config.c, hr_config_channel.c) -------- */

/* Frees what KEYS describe in BASE. */
void cfg_clear(const cfg_key *keys, void *base);
/* Applies mapping MAP to the keys of one section; WHERE prefixes key paths
 * in messages. */
int cfg_apply_map(const cfg_ctx *ctx, const cfg_key *keys, void *base, const cfg_node *map,
                  const char *where);
/* Frees one channel's (an hr_channel's) fields and name. */
void cfg_channel_clear(void *item);
/* A secret file (at most 4 KiB) into *OUT without its final line break. */
int cfg_read_secret(const char *path, char **out, char *errstr, size_t errlen);
/* The channels mapping NODE into the channel list K describes in BASE
 * (PATH is "channels", which the messages spell). */
int cfg_apply_channels(const cfg_ctx *ctx, const cfg_key *k, void *base, const cfg_node *node,
                       const char *path);

#endif
