/* hr_cluster: the slot map and the routing of commands over a Redis
 * Cluster (see hr_cluster.h).
 *
 * NODES holds every node known, never removed (so an index or hr_node *
 * taken by a pipeline stays valid; a node that stopped being a master just
 * keeps its idle connection).  OWNER maps each slot to the index of its
 * master in NODES, HR_CLUSTER_NONE when none is known; NEXT is the scratch
 * map a CLUSTER SLOTS reply is read into, so a malformed reply changes
 * nothing.  MASTERS lists the distinct owners in the order of their first
 * slot (keyless commands, and the order of a SCAN over every master).
 * STALE says a MOVED or CLUSTERDOWN was seen: the map is read again before
 * the next command, at most every HR_CLUSTER_REFRESH_MIN_MS (REFRESHED_MS
 * is the last attempt), so a failover does not turn every failed call into
 * a CLUSTER SLOTS. */
#include "hr_cluster.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "hr_clock.h"
#include "hr_slot.h"
#include "hr_vec.h"

#define HR_CLUSTER_NONE UINT16_MAX
/* TRYAGAIN / CLUSTERDOWN: first and longest pause before the next try. */
#define HR_CLUSTER_WAIT_MIN_MS 20
#define HR_CLUSTER_WAIT_MAX_MS 500
/* SCAN cursor [MATCH pattern] [COUNT n] [TYPE t], with room to spare. */
#define HR_CLUSTER_SCAN_ARGS 16

struct hr_cluster {
    const hr_node_opts *opts;
    HR_VEC(hr_node *) nodes;
    uint16_t owner[HR_SLOT_COUNT];
    uint16_t next[HR_SLOT_COUNT];
    HR_VEC(uint16_t) masters;
    bool stale;
    int64_t refreshed_ms;
};

/* CLUSTER SLOTS, formatted. */
static const char hr_cluster_slots_cmd[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";

/* "host:port" or "[v6]:port" (the port after the last ':') into HOST and
 * *PORT; the host may be empty (a redirection that leaves it out).  0 or -1. */
static int hr_cluster_split(const char *text, size_t len, char *host, size_t hostlen, int *port)
{
    const char *colon = NULL, *h = text;
    size_t n;
    long v = 0;

    for (size_t i = 0; i < len; i++)
        if (text[i] == ':')
            colon = text + i;
    if (colon == NULL || colon + 1 == text + len)
        return -1;
    for (const char *p = colon + 1; p < text + len; p++) {
        if (*p < '0' || *p > '9' || v > 65535)
            return -1;
        v = v * 10 + (*p - '0');
    }
    n = (size_t)(colon - text);
    if (n >= 2 && text[0] == '[' && text[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (n >= hostlen || v < 1 || v > 65535)
        return -1;
    memcpy(host, h, n);
    host[n] = '\0';
    *port = (int)v;
    return 0;
}

/* The index of node HOST:PORT in NODES, added when ADD and unknown.  -1
 * when unknown (not ADD), or the table is full or out of memory. */
static int hr_cluster_find(hr_cluster *cl, const char *host, int port, bool add)
{
    hr_node *node;

    for (size_t i = 0; i < cl->nodes.n; i++)
        if (hr_node_port(cl->nodes.v[i]) == port && strcmp(hr_node_host(cl->nodes.v[i]), host) == 0)
            return (int)i;
    if (!add || cl->nodes.n >= HR_CLUSTER_NODES_MAX)
        return -1;
    node = hr_node_new(host, port, cl->opts);
    if (node == NULL || hr_vec_push(&cl->nodes, node) != 0) {
        hr_node_free(node);
        return -1;
    }
    return (int)cl->nodes.n - 1;
}

int hr_cluster_new(const char *const *seeds, size_t nseeds, const hr_node_opts *opts,
                   hr_cluster **out, char *errstr, size_t errlen)
{
    hr_cluster *cl = calloc(1, sizeof *cl);
    char host[HR_CLUSTER_HOST_MAX];
    int port;

    *out = NULL;
    if (cl == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    cl->opts = opts;
    memset(cl->owner, 0xff, sizeof cl->owner);
    if (nseeds == 0) {
        snprintf(errstr, errlen, "redis cluster: no seed node");
        goto fail;
    }
    for (size_t i = 0; i < nseeds; i++) {
        if (hr_cluster_split(seeds[i], strlen(seeds[i]), host, sizeof host, &port) != 0 ||
            host[0] == '\0') {
            snprintf(errstr, errlen, "redis cluster: seed \"%.64s\" is not host:port", seeds[i]);
            goto fail;
        }
        if (hr_cluster_find(cl, host, port, true) < 0) {
            snprintf(errstr, errlen, "redis cluster: out of memory or too many nodes");
            goto fail;
        }
    }
    *out = cl;
    return 0;

fail:
    hr_cluster_free(cl);
    return -1;
}

void hr_cluster_free(hr_cluster *cl)
{
    if (cl == NULL)
        return;
    for (size_t i = 0; i < cl->nodes.n; i++)
        hr_node_free(cl->nodes.v[i]);
    hr_vec_free(&cl->nodes);
    hr_vec_free(&cl->masters);
    free(cl);
}

/* The node of a CLUSTER SLOTS endpoint [ip, port, id, ...], added when
 * new; FROM stands in for a null or empty ip.  The index, -1 when the
 * endpoint is unknown ("?") or the table is full, -2 when malformed. */
static int hr_cluster_endpoint(hr_cluster *cl, const redisReply *e, const char *from)
{
    const redisReply *ip, *port;
    const char *host;

    if (e->type != REDIS_REPLY_ARRAY || e->elements < 2)
        return -2;
    ip = e->element[0];
    port = e->element[1];
    if ((ip->type != REDIS_REPLY_STRING && ip->type != REDIS_REPLY_NIL) ||
        port->type != REDIS_REPLY_INTEGER || port->integer < 1 || port->integer > 65535 ||
        (ip->type == REDIS_REPLY_STRING && ip->len >= HR_CLUSTER_HOST_MAX))
        return -2;
    host = ip->type == REDIS_REPLY_NIL || ip->len == 0 ? from : ip->str;
    if (strcmp(host, "?") == 0)
        return -1;
    return hr_cluster_find(cl, host, (int)port->integer, true);
}

static bool hr_cluster_is_master(const hr_cluster *cl, size_t idx)
{
    for (size_t i = 0; i < cl->masters.n; i++)
        if (cl->masters.v[i] == idx)
            return true;
    return false;
}

int hr_cluster_apply_slots(hr_cluster *cl, const redisReply *reply, const char *from, char *errstr,
                           size_t errlen)
{
    if (reply->type != REDIS_REPLY_ARRAY) {
        snprintf(errstr, errlen, "CLUSTER SLOTS: not an array");
        return -1;
    }
    memset(cl->next, 0xff, sizeof cl->next);
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *r = reply->element[i];
        long long start, end;
        int idx;

        if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
            r->element[0]->type != REDIS_REPLY_INTEGER ||
            r->element[1]->type != REDIS_REPLY_INTEGER) {
            snprintf(errstr, errlen, "CLUSTER SLOTS: range %zu is malformed", i);
            return -1;
        }
        start = r->element[0]->integer;
        end = r->element[1]->integer;
        if (start < 0 || end < start || end >= HR_SLOT_COUNT) {
            snprintf(errstr, errlen, "CLUSTER SLOTS: bad range %lld-%lld", start, end);
            return -1;
        }
        /* element 2 is the master; the replicas after it become known
         * nodes, to ask for the map while their master is down */
        for (size_t j = 3; j < r->elements; j++)
            if (hr_cluster_endpoint(cl, r->element[j], from) == -2) {
                snprintf(errstr, errlen, "CLUSTER SLOTS: range %lld-%lld: bad replica %zu", start,
                         end, j - 3);
                return -1;
            }
        idx = hr_cluster_endpoint(cl, r->element[2], from);
        if (idx == -2) {
            snprintf(errstr, errlen, "CLUSTER SLOTS: range %lld-%lld: bad master", start, end);
            return -1;
        }
        for (long long s = start; idx >= 0 && s <= end; s++)
            cl->next[s] = (uint16_t)idx;
    }
    /* MASTERS gets room for every node first, so nothing below can fail
     * half-way. */
    if (hr_vec_reserve(&cl->masters, cl->nodes.n) != 0) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    memcpy(cl->owner, cl->next, sizeof cl->owner);
    cl->masters.n = 0;
    for (size_t s = 0; s < HR_SLOT_COUNT; s++)
        if (cl->owner[s] != HR_CLUSTER_NONE && (s == 0 || cl->owner[s] != cl->owner[s - 1]) &&
            !hr_cluster_is_master(cl, cl->owner[s]))
            cl->masters.v[cl->masters.n++] = cl->owner[s];
    cl->stale = false;
    return 0;
}

/* Whether the map names as a master a node whose last connect failed. */
static bool hr_cluster_names_failed(const hr_cluster *cl)
{
    for (size_t i = 0; i < cl->masters.n; i++)
        if (hr_node_failed(cl->nodes.v[cl->masters.v[i]]))
            return true;
    return false;
}

int hr_cluster_refresh(hr_cluster *cl, char *errstr, size_t errlen)
{
    bool any = false;

    cl->refreshed_ms = hr_clock_mono_ms();
    snprintf(errstr, errlen, "redis cluster: no node answers");
    /* Masters first (their connections are likely open), then the others.
     * A map that still names a master we cannot reach is taken but not
     * trusted: the nodes learn a promotion by gossip, the promoted replica
     * first, and a master that answered with the dead one kept the
     * worker's calls on it for 5 s after the promotion (issue 34).  So the
     * other nodes are asked on, replicas included, and the first map naming
     * only reachable masters wins; else the last one read stays. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < cl->nodes.n; i++) {
            hr_node *node = cl->nodes.v[i];
            redisReply *reply;
            int rc;

            if (hr_cluster_is_master(cl, i) != (pass == 0) || hr_node_down(node))
                continue;
            reply = hr_node_exec(node, hr_cluster_slots_cmd, sizeof hr_cluster_slots_cmd - 1, -1,
                                 false, errstr, errlen);
            if (reply == NULL)
                continue;
            if (reply->type == REDIS_REPLY_ERROR) {
                snprintf(errstr, errlen, "redis %s:%d: CLUSTER SLOTS: %s", hr_node_host(node),
                         hr_node_port(node), reply->str);
                freeReplyObject(reply);
                continue;
            }
            rc = hr_cluster_apply_slots(cl, reply, hr_node_host(node), errstr, errlen);
            freeReplyObject(reply);
            if (rc != 0)
                continue;
            any = true;
            if (!hr_cluster_names_failed(cl))
                return 0;
        }
    }
    return any ? 0 : -1;
}

/* A refresh unless one was tried within HR_CLUSTER_REFRESH_MIN_MS; its
 * failure leaves the map as it was, which the caller's routing then uses. */
static void hr_cluster_refresh_soon(hr_cluster *cl)
{
    char err[256];

    if (hr_clock_mono_ms() - cl->refreshed_ms >= HR_CLUSTER_REFRESH_MIN_MS)
        hr_cluster_refresh(cl, err, sizeof err);
}

hr_node *hr_cluster_node(hr_cluster *cl, int slot, char *errstr, size_t errlen)
{
    if (slot >= 0 && slot < HR_SLOT_COUNT) {
        if (cl->owner[slot] != HR_CLUSTER_NONE)
            return cl->nodes.v[cl->owner[slot]];
        snprintf(errstr, errlen, "redis cluster: no master known for slot %d", slot);
        return NULL;
    }
    if (slot == HR_SLOT_ANY && cl->masters.n > 0) {
        for (size_t i = 0; i < cl->masters.n; i++)
            if (!hr_node_down(cl->nodes.v[cl->masters.v[i]]))
                return cl->nodes.v[cl->masters.v[i]];
        return cl->nodes.v[cl->masters.v[0]];
    }
    snprintf(errstr, errlen,
             slot == HR_SLOT_ANY
                 ? "redis cluster: no master known"
                 : "redis cluster: a pattern without a hash tag needs every master");
    return NULL;
}

/* The master of SLOT, after a refresh when the map is stale or knows
 * none. */
static hr_node *hr_cluster_route_slot(hr_cluster *cl, int slot, char *errstr, size_t errlen)
{
    hr_node *node;

    if (cl->stale)
        hr_cluster_refresh_soon(cl);
    node = hr_cluster_node(cl, slot, errstr, errlen);
    if (node == NULL && slot != HR_SLOT_ALL) {
        /* nothing known for the slot: ask the cluster */
        hr_cluster_refresh_soon(cl);
        node = hr_cluster_node(cl, slot, errstr, errlen);
    }
    return node;
}

void hr_cluster_mark_stale(hr_cluster *cl)
{
    cl->stale = true;
}

void hr_cluster_settle(hr_cluster *cl)
{
    if (cl->stale)
        hr_cluster_refresh_soon(cl);
}

hr_node *hr_cluster_route(hr_cluster *cl, const char *cmd, size_t len, char *errstr, size_t errlen)
{
    return hr_cluster_node(cl, hr_slot_of_command(cmd, len), errstr, errlen);
}

hr_cluster_answer hr_cluster_parse_answer(const redisReply *reply, int *slot, char *host,
                                          size_t hostlen, int *port)
{
    hr_cluster_answer kind;
    const char *p, *target;
    long v = 0;

    if (reply == NULL || reply->type != REDIS_REPLY_ERROR)
        return HR_CLUSTER_RAN;
    if (strncmp(reply->str, "TRYAGAIN", 8) == 0)
        return HR_CLUSTER_TRYAGAIN;
    if (strncmp(reply->str, "CLUSTERDOWN", 11) == 0)
        return HR_CLUSTER_DOWN;
    if (strncmp(reply->str, "MOVED ", 6) == 0) {
        kind = HR_CLUSTER_MOVED;
        p = reply->str + 6;
    } else if (strncmp(reply->str, "ASK ", 4) == 0) {
        kind = HR_CLUSTER_ASK;
        p = reply->str + 4;
    } else {
        return HR_CLUSTER_RAN;
    }
    /* "<slot> <endpoint>:<port>"; anything else is passed on as an error */
    for (target = p; *target >= '0' && *target <= '9' && v < HR_SLOT_COUNT; target++)
        v = v * 10 + (*target - '0');
    if (target == p || v >= HR_SLOT_COUNT || *target != ' ' ||
        hr_cluster_split(target + 1, strlen(target + 1), host, hostlen, port) != 0 ||
        strcmp(host, "?") == 0)
        return HR_CLUSTER_RAN;
    *slot = (int)v;
    return kind;
}

/* SCAN without a hash tag in its pattern: one step on the master the
 * cursor "<i>-<cursor>" names (header).  Anything else that needs every
 * master is refused. */
static redisReply *hr_cluster_scan_all(hr_cluster *cl, const char *cmd, size_t len, char *errstr,
                                       size_t errlen)
{
    hr_slot_arg a[HR_CLUSTER_SCAN_ARGS];
    const char *argv[HR_CLUSTER_SCAN_ARGS];
    size_t argvlen[HR_CLUSTER_SCAN_ARGS], k = 0;
    char cursor[32], next[64], *dash, *fcmd = NULL, *s;
    redisReply *reply, *c;
    int n = hr_slot_args(cmd, len, a, HR_CLUSTER_SCAN_ARGS), flen;

    if (n < 2 || n > HR_CLUSTER_SCAN_ARGS || a[0].len != 4 || strncasecmp(a[0].p, "SCAN", 4) != 0) {
        snprintf(errstr, errlen,
                 "redis cluster: a pattern without a hash tag needs every master (only SCAN "
                 "walks them)");
        return NULL;
    }
    if (a[1].len == 0 || a[1].len >= sizeof cursor) {
        snprintf(errstr, errlen, "redis cluster: bad SCAN cursor");
        return NULL;
    }
    memcpy(cursor, a[1].p, a[1].len);
    cursor[a[1].len] = '\0';
    dash = strchr(cursor, '-');
    if (dash != NULL) {
        *dash = '\0';
        k = strtoul(cursor, NULL, 10);
    }
    if (cl->masters.n == 0)
        hr_cluster_refresh_soon(cl);
    if (k >= cl->masters.n) {
        snprintf(errstr, errlen, "redis cluster: SCAN cursor names master %zu of %zu", k,
                 cl->masters.n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        argv[i] = a[i].p;
        argvlen[i] = a[i].len;
    }
    argv[1] = dash != NULL ? dash + 1 : cursor;
    argvlen[1] = strlen(argv[1]);
    flen = redisFormatCommandArgv(&fcmd, n, argv, argvlen);
    if (flen < 0) {
        snprintf(errstr, errlen, "out of memory");
        return NULL;
    }
    reply =
        hr_node_exec(cl->nodes.v[cl->masters.v[k]], fcmd, (size_t)flen, -1, false, errstr, errlen);
    redisFreeCommand(fcmd);
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING)
        return reply;
    c = reply->element[0];
    if (strcmp(c->str, "0") != 0)
        snprintf(next, sizeof next, "%zu-%s", k, c->str);
    else if (k + 1 < cl->masters.n)
        snprintf(next, sizeof next, "%zu-0", k + 1);
    else
        snprintf(next, sizeof next, "0");
    /* hiredis 0.14 allocates reply strings with malloc */
    s = strdup(next);
    if (s == NULL) {
        freeReplyObject(reply);
        snprintf(errstr, errlen, "out of memory");
        return NULL;
    }
    free(c->str);
    c->str = s;
    c->len = strlen(s);
    return reply;
}

static void hr_cluster_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int64_t hr_cluster_deadline(const hr_cluster *cl)
{
    return hr_clock_mono_ms() + cl->opts->timeout_ms;
}

redisReply *hr_cluster_exec(hr_cluster *cl, const char *cmd, size_t len, int script,
                            redisReply *first, hr_node *from, int64_t deadline, char *errstr,
                            size_t errlen)
{
    int slot = hr_slot_of_command(cmd, len), hops = 0, wait_ms = HR_CLUSTER_WAIT_MIN_MS;
    hr_node *node = from;
    redisReply *reply = first;
    bool asking = false;
    char host[HR_CLUSTER_HOST_MAX], err[256];
    int rslot = 0, port = 0, idx;
    hr_cluster_answer answer;

    if (slot == HR_SLOT_ALL) {
        freeReplyObject(first);
        return hr_cluster_scan_all(cl, cmd, len, errstr, errlen);
    }
    for (;;) {
        if (reply == NULL) {
            if (!asking && (node = hr_cluster_route_slot(cl, slot, errstr, errlen)) == NULL)
                return NULL;
            reply = hr_node_exec(node, cmd, len, script, asking, errstr, errlen);
            asking = false;
            if (reply == NULL) {
                /* unreachable: a failover may have given the slot to
                 * another master; else fail now with the node's error */
                hr_node *failed = node;

                hr_cluster_refresh_soon(cl);
                node = hr_cluster_node(cl, slot, err, sizeof err);
                if (node == NULL || node == failed || ++hops > HR_CLUSTER_REDIRECTS_MAX)
                    return NULL;
                continue;
            }
        }
        answer = hr_cluster_parse_answer(reply, &rslot, host, sizeof host, &port);
        switch (answer) {
        case HR_CLUSTER_RAN:
            return reply;
        case HR_CLUSTER_MOVED:
        case HR_CLUSTER_ASK:
            if (host[0] == '\0' && node == NULL)
                return reply;
            idx = hr_cluster_find(cl, host[0] != '\0' ? host : hr_node_host(node), port, true);
            if (idx < 0 || ++hops > HR_CLUSTER_REDIRECTS_MAX)
                return reply;
            if (answer == HR_CLUSTER_MOVED) {
                cl->owner[rslot] = (uint16_t)idx;
                cl->stale = true;
            } else {
                node = cl->nodes.v[idx];
                asking = true;
            }
            break;
        case HR_CLUSTER_TRYAGAIN:
        case HR_CLUSTER_DOWN:
            if (hr_clock_mono_ms() + wait_ms > deadline)
                return reply;
            if (answer == HR_CLUSTER_DOWN)
                cl->stale = true;
            hr_cluster_sleep_ms(wait_ms);
            wait_ms = wait_ms * 2 < HR_CLUSTER_WAIT_MAX_MS ? wait_ms * 2 : HR_CLUSTER_WAIT_MAX_MS;
            break;
        }
        freeReplyObject(reply);
        reply = NULL;
    }
}
