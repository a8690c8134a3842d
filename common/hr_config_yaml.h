/* hr_config_yaml: the first pass of the configuration (hr_config.h), for
 * the other hr_config_* modules only: libyaml's events into a tree of
 * cfg_node with 1-based positions, the "file:line:col: message" of every
 * error (cfg_err), and ${VAR} expansion.  A node owns the nodes under it:
 * cfg_node_free() frees them all.  (cfg_ is the prefix of the
 * configuration's internal modules.) */
#ifndef HR_CONFIG_YAML_H
#define HR_CONFIG_YAML_H

#include <stdbool.h>
#include <stddef.h>

#include "hr_vec.h"

#define CFG_MAX_DEPTH 32 /* herald's deepest key is 4 levels */
#define CFG_WHY 256      /* room for one "what is wrong" */

typedef enum cfg_node_type { CFG_SCALAR, CFG_MAP, CFG_SEQ } cfg_node_type;

typedef struct cfg_node {
    cfg_node_type type;
    int line, col;                   /* 1-based */
    char *value;                     /* CFG_SCALAR: NUL-free text */
    bool plain;                      /* CFG_SCALAR: unquoted (only plain ~/null is null) */
    HR_VEC(struct cfg_node *) items; /* CFG_MAP: key, value, key, value...; CFG_SEQ: items */
} cfg_node;

/* Paths of secret files that their group or others may read, as the load
 * finds them (hr_config.h's exposed_files). */
typedef HR_VEC(char *) cfg_paths;

typedef struct cfg_ctx {
    const char *name; /* the file name for messages */
    const char *text; /* the whole input, to place reader errors and tabs */
    size_t len;
    char *errstr;
    size_t errlen;
    cfg_paths *exposed; /* where readers note an exposed secret file; NULL: not noted */
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

#endif
