/* hr_hooks: the event webhooks' registry (push_hook, push_hook_dead;
 * schemas/mysql/018_hooks.sql) as the API (/v1/hooks) and heraldctl hooks
 * change it; herald-hooks reads it (hooks/hk_store.c).
 *
 * An endpoint is an http(s) URL (https unless it is a loopback address or
 * HR_HOOKS_PLAIN_OK allows it: plain HTTP would show the events to the
 * path), a filter of event types (names of hr_event.h's table, or any
 * [a-z_] name so a consumer can ask for a type a later herald adds; none =
 * every type), a description, and a signing secret "whsec_<base64 of 32
 * random bytes>" made here (or given), shown once, at creation. */
#ifndef HR_HOOKS_H
#define HR_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_mysql.h"

#define HR_HOOKS_URL_MAX 2048
#define HR_HOOKS_TYPES_MAX 1024 /* the filter, comma-separated */
#define HR_HOOKS_DESC_MAX 256
#define HR_HOOKS_SECRET_MAX 128

typedef struct hr_hook {
    int64_t id;
    char url[HR_HOOKS_URL_MAX + 1];
    char types[HR_HOOKS_TYPES_MAX + 1]; /* "" = every type */
    char description[HR_HOOKS_DESC_MAX + 1];
    char secret[HR_HOOKS_SECRET_MAX + 1]; /* filled by hr_hooks_create only */
    bool enabled;
    char disabled_reason[513];
    int64_t failing_since_ms; /* -1 = healthy */
    int64_t created_ms;
    int64_t dead_letters; /* push_hook_dead rows */
} hr_hook;

/* Checks URL (absolute http(s), no credentials, at most HR_HOOKS_URL_MAX;
 * plain http only to a loopback host).  0, or -1 with ERRSTR. */
int hr_hooks_check_url(const char *url, char *errstr, size_t errlen);
/* Normalizes the N type names TYPES into OUT (comma-separated, no
 * repeats).  0, or -1 with ERRSTR (a name that is no [a-z_]{1,32}). */
int hr_hooks_types(const char *const *types, size_t n, char out[HR_HOOKS_TYPES_MAX + 1],
                   char *errstr, size_t errlen);

/* Creates an endpoint from H's url, types and description, with H's
 * secret when it is not empty (checked: whsec_ and 24..64 bytes), else a
 * new one; fills H's id, secret and times.  0, or -1 with ERRSTR. */
int hr_hooks_create(hr_mysql *m, hr_hook *h, char *errstr, size_t errlen);
/* Every endpoint, by id (*OUT, N; free()).  0, or -1. */
int hr_hooks_list(hr_mysql *m, hr_hook **out, size_t *n, char *errstr, size_t errlen);
/* Endpoint ID into *OUT (secret empty): 0, 1 when there is none, -1. */
int hr_hooks_get(hr_mysql *m, int64_t id, hr_hook *out, char *errstr, size_t errlen);

/* What an update changes (NULL: kept). */
typedef struct hr_hook_update {
    const char *url, *types, *description;
    int enabled; /* -1 kept, 0 disable (by an operator), 1 enable (failure forgotten) */
} hr_hook_update;
/* Applies U to endpoint ID: 0, 1 when there is none, -1. */
int hr_hooks_update(hr_mysql *m, int64_t id, const hr_hook_update *u, char *errstr, size_t errlen);
/* Deletes endpoint ID and its dead letters: 0, 1 when there is none, -1. */
int hr_hooks_delete(hr_mysql *m, int64_t id, char *errstr, size_t errlen);
/* Marks endpoint ID's dead letters for a redrive: *MARKED gets how many
 * (herald-hooks delivers them once the endpoint is enabled).  0, 1 when
 * there is no such endpoint, -1. */
int hr_hooks_redrive(hr_mysql *m, int64_t id, int64_t *marked, char *errstr, size_t errlen);

/* A dead letter. */
typedef struct hr_hook_dead {
    int64_t id;
    char event_id[65];
    int64_t uid;
    char error[513];
    bool redrive;
    int64_t created_ms;
    char *payload; /* the event, as published (owned) */
} hr_hook_dead;
/* Endpoint ID's dead letters, oldest first, after id AFTER, at most LIMIT
 * (*OUT, N; free with hr_hooks_dead_free).  0, or -1. */
int hr_hooks_dead(hr_mysql *m, int64_t id, int64_t after, int limit, hr_hook_dead **out, size_t *n,
                  char *errstr, size_t errlen);
void hr_hooks_dead_free(hr_hook_dead *d, size_t n);

#endif
