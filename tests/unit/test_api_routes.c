/* The route table's roles (dispatcher/dsp_api_routes.c), table-driven: a
 * /v1 route without a role, a route this table does not know (a new one:
 * decide its role here and in schemas/openapi.yaml), or a role other than
 * the one written here fails.  The roles (docs/api.md "Operators and
 * roles"): viewers read what the console shows; operators also act on
 * campaigns and on what names a person (addresses, profiles and
 * preferences, suppressions, user attributes, the pull); admins also create
 * and change tasks, take an address off the suppression list, manage tokens
 * and read the audit log.  Integration tests call every route with a token of each role
 * (tests/integration/test_api_roles.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dsp_api_routes.h"

static const struct {
    const char *method, *pattern;
    hr_role role; /* HR_ROLE_NONE: an open route */
} want[] = {
    {"GET", "/console", HR_ROLE_NONE},
    {"GET", "/console/", HR_ROLE_NONE},
    {"GET", "/console/{asset}", HR_ROLE_NONE},
    {"GET", "/t/o/{token}", HR_ROLE_NONE},
    {"GET", "/t/c/{token}", HR_ROLE_NONE},
    {"GET", "/v1/me", HR_ROLE_VIEWER},
    {"POST", "/v1/tasks", HR_ROLE_ADMIN},
    {"GET", "/v1/tasks", HR_ROLE_VIEWER},
    {"GET", "/v1/tasks/{id}", HR_ROLE_VIEWER},
    {"PATCH", "/v1/tasks/{id}", HR_ROLE_ADMIN},
    {"POST", "/v1/tasks/{id}/pause", HR_ROLE_OPERATOR},
    {"POST", "/v1/tasks/{id}/resume", HR_ROLE_OPERATOR},
    {"POST", "/v1/tasks/{id}/cancel", HR_ROLE_OPERATOR},
    {"POST", "/v1/tasks/{id}/subscribers", HR_ROLE_OPERATOR},
    {"DELETE", "/v1/tasks/{id}/subscribers/{uid}", HR_ROLE_OPERATOR},
    {"GET", "/v1/tasks/{id}/subscribers/count", HR_ROLE_VIEWER},
    {"GET", "/v1/tasks/{id}/chunks", HR_ROLE_VIEWER},
    {"GET", "/v1/tasks/{id}/dead-letters", HR_ROLE_VIEWER},
    {"POST", "/v1/tasks/{id}/redrive", HR_ROLE_OPERATOR},
    {"POST", "/v1/tasks/{id}/recover", HR_ROLE_OPERATOR},
    {"GET", "/v1/tasks/{id}/render", HR_ROLE_OPERATOR},
    {"GET", "/v1/tasks/{id}/stats", HR_ROLE_VIEWER},
    {"POST", "/v1/render", HR_ROLE_OPERATOR},
    {"GET", "/v1/users/{uid}/reminders", HR_ROLE_OPERATOR},
    {"POST", "/v1/users/{uid}/events", HR_ROLE_OPERATOR},
    {"GET", "/v1/users/{uid}/addresses", HR_ROLE_OPERATOR},
    {"POST", "/v1/users/{uid}/addresses", HR_ROLE_OPERATOR},
    {"PUT", "/v1/users/{uid}/addresses", HR_ROLE_OPERATOR},
    {"DELETE", "/v1/users/{uid}/addresses", HR_ROLE_OPERATOR},
    {"GET", "/v1/jobs/{id}", HR_ROLE_VIEWER},
    {"GET", "/v1/tokens", HR_ROLE_ADMIN},
    {"POST", "/v1/tokens", HR_ROLE_ADMIN},
    {"DELETE", "/v1/tokens/{id}", HR_ROLE_ADMIN},
    {"GET", "/v1/audit", HR_ROLE_ADMIN},
    {"GET", "/v1/users/{uid}", HR_ROLE_OPERATOR},
    {"PUT", "/v1/users/{uid}", HR_ROLE_OPERATOR},
    {"PATCH", "/v1/users/{uid}", HR_ROLE_OPERATOR},
    {"DELETE", "/v1/users/{uid}", HR_ROLE_OPERATOR},
    {"GET", "/v1/users/{uid}/preferences", HR_ROLE_OPERATOR},
    {"PUT", "/v1/users/{uid}/preferences", HR_ROLE_OPERATOR},
    {"GET", "/v1/suppressions", HR_ROLE_OPERATOR},
    {"POST", "/v1/suppressions", HR_ROLE_OPERATOR},
    {"DELETE", "/v1/suppressions", HR_ROLE_ADMIN},
    {"GET", "/u/{token}", HR_ROLE_NONE},
    {"POST", "/u/{token}", HR_ROLE_NONE},
    {"POST", "/v1/hooks", HR_ROLE_ADMIN},
    {"GET", "/v1/hooks", HR_ROLE_OPERATOR},
    {"GET", "/v1/hooks/{id}", HR_ROLE_OPERATOR},
    {"PATCH", "/v1/hooks/{id}", HR_ROLE_ADMIN},
    {"DELETE", "/v1/hooks/{id}", HR_ROLE_ADMIN},
    {"GET", "/v1/hooks/{id}/dead-letters", HR_ROLE_OPERATOR},
    {"POST", "/v1/hooks/{id}/redrive", HR_ROLE_OPERATOR},
    {"POST", "/v1/series", HR_ROLE_OPERATOR},
    {"GET", "/v1/series", HR_ROLE_VIEWER},
    {"GET", "/v1/series/{id}", HR_ROLE_VIEWER},
    {"GET", "/v1/series/{id}/next", HR_ROLE_VIEWER},
    {"POST", "/v1/series/{id}/pause", HR_ROLE_OPERATOR},
    {"POST", "/v1/series/{id}/resume", HR_ROLE_OPERATOR},
    {"POST", "/v1/series/{id}/end", HR_ROLE_OPERATOR},
    {"POST", "/v1/series/{id}/subscribers", HR_ROLE_OPERATOR},
    {"DELETE", "/v1/series/{id}/subscribers/{uid}", HR_ROLE_OPERATOR},
    {"GET", "/v1/series/{id}/subscribers", HR_ROLE_OPERATOR},
};

#define NWANT (sizeof want / sizeof want[0])

static void test_every_route_has_its_role(void **state)
{
    size_t n, i, j;
    const dsp_api_route *rt = dsp_api_routes_table(&n);

    (void)state;
    for (i = 0; i < n; i++) {
        for (j = 0; j < NWANT; j++)
            if (strcmp(rt[i].method, want[j].method) == 0 &&
                strcmp(rt[i].pattern, want[j].pattern) == 0)
                break;
        if (j == NWANT)
            fail_msg("%s %s is not in this test's table: decide its role", rt[i].method,
                     rt[i].pattern);
        /* A public route (the tracking links) checks its own signature. */
        if (rt[i].fn != NULL && !rt[i].public && rt[i].role == HR_ROLE_NONE)
            fail_msg("%s %s has no role", rt[i].method, rt[i].pattern);
        if (rt[i].public && rt[i].role != HR_ROLE_NONE)
            fail_msg("%s %s is public and has a role", rt[i].method, rt[i].pattern);
        if (rt[i].fn == NULL && rt[i].open == NULL)
            fail_msg("%s %s has no handler", rt[i].method, rt[i].pattern);
        if ((rt[i].fn == NULL || rt[i].public) != (want[j].role == HR_ROLE_NONE) ||
            rt[i].role != want[j].role)
            fail_msg("%s %s: role %s, want %s", rt[i].method, rt[i].pattern,
                     rt[i].fn == NULL || rt[i].public ? "open" : hr_role_name(rt[i].role),
                     want[j].role == HR_ROLE_NONE ? "open" : hr_role_name(want[j].role));
        /* Only the pull, the app's events and the preferences take a
         * client token. */
        assert_true(rt[i].client == (strcmp(rt[i].pattern, "/v1/users/{uid}/reminders") == 0 ||
                                     strcmp(rt[i].pattern, "/v1/users/{uid}/events") == 0 ||
                                     strcmp(rt[i].pattern, "/v1/users/{uid}/preferences") == 0));
    }
    /* And every route of the table above is served. */
    for (j = 0; j < NWANT; j++) {
        for (i = 0; i < n; i++)
            if (strcmp(rt[i].method, want[j].method) == 0 &&
                strcmp(rt[i].pattern, want[j].pattern) == 0)
                break;
        if (i == n)
            fail_msg("%s %s is not served any more", want[j].method, want[j].pattern);
    }
}

/* A viewer changes nothing: every route it may call is a GET, and none of
 * those acts (the pull's ?ack=1 acts, so the pull is an operator's). */
static void test_viewer_only_reads(void **state)
{
    size_t n;
    const dsp_api_route *rt = dsp_api_routes_table(&n);

    (void)state;
    for (size_t i = 0; i < n; i++)
        if (rt[i].fn != NULL && rt[i].role == HR_ROLE_VIEWER && strcmp(rt[i].method, "GET") != 0)
            fail_msg("%s %s is a viewer's but not a GET", rt[i].method, rt[i].pattern);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_route_has_its_role),
        cmocka_unit_test(test_viewer_only_reads),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
