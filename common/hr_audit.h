/* hr_audit: the audit log (push_audit, schemas/mysql/012_audit.sql): who
 * changed what, when, from where, and the fields the change changed.
 *
 * Every change a person makes through the API, the console or heraldctl
 * writes one row with hr_audit_write, on the connection (and inside the
 * transaction) of the change itself where the change is a MySQL write, so
 * the row commits or rolls back with it (hr_mysql's transactions nest,
 * hr_mysql.h).  The caller says who (hr_audit_who: an actor such as
 * "token:alice", the role it acted with, the way it came, its address) and
 * what: the action (the route "POST /v1/tasks/{id}/pause" or the command
 * "heraldctl pause"), the task and another target, and the fields before
 * and after (JSON objects; hr_audit_diff keeps only those that changed).
 * A side larger than HR_AUDIT_JSON_MAX is stored shortened, never cut
 * mid-value: members over HR_AUDIT_VALUE_MAX bytes become
 * {"omitted_bytes": N, "sha256": "..."}, and a side still too large
 * becomes that as a whole.
 *
 * Rows are append-only (the table's triggers); the retention purge is
 * hr_audit_purge.  Nothing here logs; cJSON trees are the caller's. */
#ifndef HR_AUDIT_H
#define HR_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "hr_mysql.h"
#include "hr_role.h"

#define HR_AUDIT_ACTOR 200        /* bytes of push_audit.actor */
#define HR_AUDIT_PEER 300         /* bytes of push_audit.peer */
#define HR_AUDIT_TARGET 200       /* bytes of push_audit.target */
#define HR_AUDIT_JSON_MAX 16384   /* bytes of one side, before or after */
#define HR_AUDIT_VALUE_MAX 2048   /* bytes of one member's value within it */
#define HR_AUDIT_LIST_MAX 200     /* rows of one page of hr_audit_list */
#define HR_AUDIT_KEEP_MIN_DAYS 30 /* the purge deletes nothing younger (the trigger's floor) */

/* How a change came. */
typedef enum hr_audit_via {
    HR_AUDIT_API = 0,     /* the HTTP API */
    HR_AUDIT_CONSOLE = 1, /* the web console (an API call the page marked as its own) */
    HR_AUDIT_CLI = 2,     /* heraldctl */
    HR_AUDIT__VIAS
} hr_audit_via;

const char *hr_audit_via_name(hr_audit_via via);

/* Who made a change. */
typedef struct hr_audit_who {
    char actor
        [HR_AUDIT_ACTOR]; /* token:<name>, bootstrap:<n>, jwt:<subject>, cli:<user>, insecure */
    hr_role role;         /* HR_ROLE_NONE for heraldctl (it has the database itself) */
    hr_audit_via via;
    char peer[HR_AUDIT_PEER]; /* the client's address, or "host:<name>" */
} hr_audit_who;

/* heraldctl's who: "cli:<login name of the effective user>" (with
 * " sudo:<SUDO_USER>" when run through sudo) from "host:<host name>". */
void hr_audit_who_cli(hr_audit_who *who);

/* One change. */
typedef struct hr_audit {
    const hr_audit_who *who;
    const char *action;          /* "POST /v1/tasks/{id}/pause", "heraldctl pause" */
    int64_t task_id;             /* 0: no task */
    const char *target;          /* another object ("uid 42", "token 7"); NULL: none */
    const cJSON *before, *after; /* objects of the fields changed; NULL: none */
} hr_audit;

/* Writes A's row on M (in the caller's transaction, if one is open).  0,
 * or -1 with ERRSTR: the caller rolls the change back. */
int hr_audit_write(hr_mysql *m, const hr_audit *a, char *errstr, size_t errlen);

/* A change of one object and its audit row in one transaction, run by
 * hr_audit_apply.  SIDE reads the object's fields as they are (*OUT NULL:
 * there is none); APPLY makes the change and returns its code (>= 0), or
 * a negative one with ERRSTR when it refused or failed (nothing changed),
 * and may add to NOTE what it did beyond the fields (how many it marked),
 * which goes into the row's after; RESTORE (NULL: none) rewrites a copy
 * kept outside MySQL (a Redis key) from what MySQL holds, after the
 * transaction rolled back.  ARG is theirs; TARGET names the object in the
 * row (APPLY may fill it, for an object it creates). */
typedef struct hr_audit_change {
    int (*side)(hr_mysql *m, void *arg, cJSON **out, char *errstr, size_t errlen);
    int (*apply)(hr_mysql *m, struct hr_audit_change *c, cJSON *note, char *errstr, size_t errlen);
    int (*restore)(hr_mysql *m, void *arg, char *errstr, size_t errlen);
    void *arg;
    char target[HR_AUDIT_TARGET];
} hr_audit_change;

/* C in one transaction on M: the object's fields before, the change, its
 * fields after, and, when they differ (or NOTE holds something), the row
 * of WHO doing ACTION with what changed (hr_audit_diff).  A change that
 * changed nothing writes no row.  APPLY's code, or -1 with ERRSTR when the
 * row or the commit failed: the transaction rolled back and RESTORE ran
 * (its failure appended to ERRSTR). */
int hr_audit_apply(hr_mysql *m, hr_audit_change *c, const hr_audit_who *who, const char *action,
                   char *errstr, size_t errlen);

/* Removes from objects BEFORE and AFTER every member both hold with equal
 * values, so that what is left is what changed (a member only one holds
 * stays).  Either may be NULL. */
void hr_audit_diff(cJSON *before, cJSON *after);

/* What hr_audit_list returns: every field optional. */
typedef struct hr_audit_filter {
    int64_t task_id;    /* 0: any task */
    const char *actor;  /* NULL: anyone; else exactly this actor */
    const char *action; /* NULL: any; else exactly this route or command */
    int64_t since_ms;   /* -1: from the first; else rows at or after */
    int64_t until_ms;   /* -1: to the last; else rows before */
    int64_t before_id;  /* 0: from the newest; else rows with a smaller id (paging) */
    int limit;          /* 1..HR_AUDIT_LIST_MAX */
} hr_audit_filter;

/* A page of rows, newest first, as a JSON array of {id, at, actor, role,
 * via, action, task_id, target, peer, before, after} into *OUT (the
 * caller's); *NEXT the before_id of the next page, 0 on the last.  0, or
 * -1 with ERRSTR. */
int hr_audit_list(hr_mysql *m, const hr_audit_filter *f, cJSON **out, int64_t *next, char *errstr,
                  size_t errlen);

/* The retention purge: deletes the rows older than CUTOFF_MS (which must
 * be at least HR_AUDIT_KEEP_MIN_DAYS before NOW_MS) in one transaction
 * that also writes its own row (action "heraldctl audit purge", by WHO,
 * after {"older_than", "deleted"}), with the session variable the delete
 * trigger asks for set only around its DELETE.  *DELETED gets the count.
 * 0, or -1 with ERRSTR. */
int hr_audit_purge(hr_mysql *m, const hr_audit_who *who, int64_t now_ms, int64_t cutoff_ms,
                   int64_t *deleted, char *errstr, size_t errlen);

#endif
