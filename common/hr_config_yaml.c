/* hr_config_yaml: the first pass of hr_config (see hr_config.c) — libyaml's
 * event parser builds a small tree of cfg_node, each node with the 1-based
 * line and column of its first character; syntax errors, duplicate keys,
 * aliases and excessive nesting are reported here with their positions,
 * in document order.  Also the ${VAR} expansion of scalar values. */
#include "hr_config_yaml.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* ---- the tree ------------------------------------------------------- */

int cfg_err(const cfg_ctx *ctx, int line, int col, const char *fmt, ...)
{
    if (ctx->errstr == NULL || ctx->errlen == 0)
        return -1;
    int n = snprintf(ctx->errstr, ctx->errlen, "%s:%d:%d: ", ctx->name, line, col);
    if (n >= 0 && (size_t)n < ctx->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->errstr + n, ctx->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void cfg_node_free(cfg_node *node)
{
    if (node == NULL)
        return;
    for (size_t i = 0; i < node->items.n; i++)
        cfg_node_free(node->items.v[i]);
    hr_vec_free(&node->items);
    free(node->value);
    free(node);
}

bool cfg_node_is_null(const cfg_node *node)
{
    if (node->type != CFG_SCALAR || !node->plain)
        return false;
    const char *v = node->value;
    return v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
           strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

const char *cfg_node_kind(const cfg_node *node)
{
    if (node->type == CFG_MAP)
        return "a mapping";
    if (node->type == CFG_SEQ)
        return "a sequence";
    return "a scalar";
}

/* The value of KEY in mapping MAP, or NULL. */
const cfg_node *cfg_map_get(const cfg_node *map, const char *key)
{
    if (map == NULL || map->type != CFG_MAP)
        return NULL;
    for (size_t i = 0; i + 1 < map->items.n; i += 2)
        if (strcmp(map->items.v[i]->value, key) == 0)
            return map->items.v[i + 1];
    return NULL;
}

/* 1-based line and column of byte OFFSET; columns count characters, as
 * libyaml's marks do. */
static void cfg_locate(const cfg_ctx *ctx, size_t offset, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < offset && i < ctx->len; i++) {
        unsigned char c = (unsigned char)ctx->text[i];
        if (c == '\n') {
            (*line)++;
            *col = 1;
        } else if ((c & 0xC0) != 0x80) {
            (*col)++;
        }
    }
}

/* The byte at 0-based LINE and COL (characters), or 0 past the end. */
static char cfg_char_at(const cfg_ctx *ctx, size_t line, size_t col)
{
    size_t i = 0;
    while (line > 0 && i < ctx->len)
        if (ctx->text[i++] == '\n')
            line--;
    while (i < ctx->len) {
        unsigned char c = (unsigned char)ctx->text[i];
        if ((c & 0xC0) != 0x80) {
            if (col == 0)
                return (char)c;
            col--;
        }
        i++;
    }
    return 0;
}

static int cfg_yaml_error(const cfg_ctx *ctx, const yaml_parser_t *p)
{
    const char *problem = p->problem ? p->problem : "unknown error";
    int line, col;

    switch (p->error) {
    case YAML_MEMORY_ERROR:
        return cfg_err(ctx, 1, 1, "out of memory");
    case YAML_READER_ERROR:
        cfg_locate(ctx, p->problem_offset, &line, &col);
        if (p->problem_value != -1)
            return cfg_err(ctx, line, col, "%s (byte 0x%02x); the file must be UTF-8 text", problem,
                           (unsigned)p->problem_value & 0xFFu);
        return cfg_err(ctx, line, col, "%s; the file must be UTF-8 text", problem);
    case YAML_SCANNER_ERROR:
    case YAML_PARSER_ERROR: {
        line = (int)p->problem_mark.line + 1;
        col = (int)p->problem_mark.column + 1;
        const char *note = "";
        if (strstr(problem, "tab") == NULL &&
            cfg_char_at(ctx, p->problem_mark.line, p->problem_mark.column) == '\t')
            note = " (tabs are not allowed for indentation)";
        /* "while scanning for the next token" at the same place adds nothing. */
        if (p->context != NULL && (p->context_mark.line != p->problem_mark.line ||
                                   p->context_mark.column != p->problem_mark.column))
            return cfg_err(ctx, line, col, "%s %s that starts at %d:%d%s", problem, p->context,
                           (int)p->context_mark.line + 1, (int)p->context_mark.column + 1, note);
        return cfg_err(ctx, line, col, "%s%s", problem, note);
    }
    default:
        return cfg_err(ctx, 1, 1, "%s", problem);
    }
}

/* The next event into *EV, which the caller deletes. */
static int cfg_next(const cfg_ctx *ctx, yaml_parser_t *p, yaml_event_t *ev)
{
    if (!yaml_parser_parse(p, ev))
        return cfg_yaml_error(ctx, p);
    return 0;
}

static int cfg_node_push(const cfg_ctx *ctx, cfg_node *parent, cfg_node *child)
{
    if (hr_vec_push(&parent->items, child) != 0)
        return cfg_err(ctx, child->line, child->col, "out of memory");
    return 0;
}

/* Builds the node that starts with event EV (consumed by the caller) and
 * every node inside it. */
static int cfg_node_parse(const cfg_ctx *ctx, yaml_parser_t *p, const yaml_event_t *ev, int depth,
                          cfg_node **out)
{
    cfg_node *node = NULL, *child = NULL;
    yaml_event_t next;
    int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;

    *out = NULL;
    if (ev->type == YAML_ALIAS_EVENT)
        return cfg_err(ctx, line, col, "aliases (*%s) are not supported",
                       (const char *)ev->data.alias.anchor);
    if (depth > CFG_MAX_DEPTH)
        return cfg_err(ctx, line, col, "nested deeper than %d levels", CFG_MAX_DEPTH);
    node = calloc(1, sizeof(*node));
    if (node == NULL)
        return cfg_err(ctx, line, col, "out of memory");
    node->line = line;
    node->col = col;

    if (ev->type == YAML_SCALAR_EVENT) {
        size_t n = ev->data.scalar.length;
        node->type = CFG_SCALAR;
        node->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        if (memchr(ev->data.scalar.value, '\0', n) != NULL) {
            cfg_err(ctx, line, col, "NUL characters are not allowed in values");
            goto fail;
        }
        node->value = strndup((const char *)ev->data.scalar.value, n);
        if (node->value == NULL) {
            cfg_err(ctx, line, col, "out of memory");
            goto fail;
        }
        *out = node;
        return 0;
    }

    node->type = ev->type == YAML_MAPPING_START_EVENT ? CFG_MAP : CFG_SEQ;
    yaml_event_type_t end =
        node->type == CFG_MAP ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
    for (;;) {
        if (cfg_next(ctx, p, &next) < 0)
            goto fail;
        if (next.type == end) {
            yaml_event_delete(&next);
            break;
        }
        int rc = cfg_node_parse(ctx, p, &next, depth + 1, &child);
        yaml_event_delete(&next);
        if (rc < 0)
            goto fail;
        if (node->type == CFG_MAP && node->items.n % 2 == 0) {
            if (child->type != CFG_SCALAR) {
                cfg_err(ctx, child->line, child->col, "a key must be a plain string, not %s",
                        cfg_node_kind(child));
                goto fail;
            }
            for (size_t i = 0; i < node->items.n; i += 2) {
                const cfg_node *prev = node->items.v[i];
                if (strcmp(prev->value, child->value) == 0) {
                    cfg_err(ctx, child->line, child->col, "duplicate key \"%s\" (first at line %d)",
                            child->value, prev->line);
                    goto fail;
                }
            }
        }
        if (cfg_node_push(ctx, node, child) < 0)
            goto fail;
        child = NULL;
    }
    *out = node;
    return 0;

fail:
    cfg_node_free(child);
    cfg_node_free(node);
    return -1;
}

/* The whole stream: one document whose root is a mapping. */
int cfg_tree_build(const cfg_ctx *ctx, cfg_node **out)
{
    yaml_parser_t p;
    yaml_event_t ev;
    cfg_node *root = NULL;
    int rc = -1;

    *out = NULL;
    if (!yaml_parser_initialize(&p))
        return cfg_err(ctx, 1, 1, "out of memory");
    yaml_parser_set_input_string(&p, (const unsigned char *)ctx->text, ctx->len);

    if (cfg_next(ctx, &p, &ev) < 0)
        goto out; /* STREAM-START */
    yaml_event_delete(&ev);
    if (cfg_next(ctx, &p, &ev) < 0)
        goto out;
    if (ev.type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&ev);
        cfg_err(ctx, 1, 1, "empty configuration");
        goto out;
    }
    yaml_event_delete(&ev); /* DOCUMENT-START */
    if (cfg_next(ctx, &p, &ev) < 0)
        goto out;
    rc = cfg_node_parse(ctx, &p, &ev, 0, &root);
    yaml_event_delete(&ev);
    if (rc < 0)
        goto out;
    rc = -1;
    if (cfg_next(ctx, &p, &ev) < 0)
        goto out; /* DOCUMENT-END */
    yaml_event_delete(&ev);
    if (cfg_next(ctx, &p, &ev) < 0)
        goto out;
    if (ev.type != YAML_STREAM_END_EVENT) {
        cfg_err(ctx, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1,
                "only one YAML document is allowed");
        yaml_event_delete(&ev);
        goto out;
    }
    yaml_event_delete(&ev);

    if (cfg_node_is_null(root)) {
        cfg_err(ctx, 1, 1, "empty configuration");
        goto out;
    }
    if (root->type != CFG_MAP) {
        cfg_err(ctx, root->line, root->col,
                "the configuration must be a mapping of sections, not %s", cfg_node_kind(root));
        goto out;
    }
    *out = root;
    root = NULL;
    rc = 0;
out:
    cfg_node_free(root);
    yaml_parser_delete(&p);
    return rc;
}

/* ---- ${VAR} expansion ----------------------------------------------- */

/* Expands ${VAR}, ${VAR:-default} (used when VAR is unset or empty) and $$
 * (a literal $) in TEXT into a new string *OUT.  A default runs to the first
 * '}'; it is not expanded again.  Any other '$' is kept as is, so passwords
 * like "pa$s" need no escaping. */
int cfg_expand(const char *text, char **out, char *errstr, size_t errlen)
{
    char *buf = NULL;
    size_t buflen = 0;
    FILE *f = open_memstream(&buf, &buflen);

    *out = NULL;
    if (f == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    const char *s = text;
    while (*s != '\0') {
        if (s[0] != '$' || (s[1] != '$' && s[1] != '{')) {
            fputc(*s++, f);
            continue;
        }
        if (s[1] == '$') {
            fputc('$', f);
            s += 2;
            continue;
        }
        const char *name = s + 2, *close = strchr(name, '}');
        if (close == NULL) {
            snprintf(errstr, errlen, "unterminated \"${\" (write $$ for a literal $)");
            goto fail;
        }
        size_t namelen = 0;
        if (isalpha((unsigned char)name[0]) || name[0] == '_')
            while (isalnum((unsigned char)name[namelen]) || name[namelen] == '_')
                namelen++;
        const char *rest = name + namelen, *def = NULL;
        if (rest[0] == ':' && rest[1] == '-')
            def = rest + 2;
        if (namelen == 0 || (rest != close && def == NULL)) {
            snprintf(errstr, errlen,
                     "bad variable reference \"%.*s\" (expected ${NAME} or ${NAME:-default})",
                     (int)(close - s + 1), s);
            goto fail;
        }
        char var[128];
        if (namelen >= sizeof(var)) {
            snprintf(errstr, errlen, "variable name longer than %zu characters", sizeof(var) - 1);
            goto fail;
        }
        memcpy(var, name, namelen);
        var[namelen] = '\0';
        const char *val = getenv(var);
        if (def != NULL && (val == NULL || val[0] == '\0')) {
            fwrite(def, 1, (size_t)(close - def), f);
        } else if (val == NULL) {
            snprintf(errstr, errlen, "${%s} is not set", var);
            goto fail;
        } else {
            fputs(val, f);
        }
        s = close + 1;
    }
    if (fclose(f) != 0) {
        f = NULL;
        snprintf(errstr, errlen, "out of memory");
        goto fail;
    }
    *out = buf;
    return 0;

fail:
    if (f != NULL)
        fclose(f);
    free(buf);
    return -1;
}
