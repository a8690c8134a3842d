/* test_addr: the address book's dual storage against the stack's MariaDB
 * and Redis — add/remove/replace through hr_addr, rows an admin inserts
 * and deletes with raw SQL reaching Redis through the address mirror (hr_mirror_sync), a Redis
 * that lost everything refilled by the next sync, the worker's fetch of a
 * 5,000-uid chunk and its prune, and the import's caps.
 *
 * Redis keys live under the test's own prefix (so its first sync is a full
 * reload); its push_address rows use uids of a range of its own (UID0 +
 * pid), deleted at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hr_addr.h"
#include "hr_pipe.h"
#include "itest.h"

#define APNS_TOKEN "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"
#define CHUNK 5000

static hr_config *cfg;
static hr_redis *rd;
static hr_mysql *db;
static int64_t base;
static char errstr[512];

static int setup(void **state)
{
    (void)state;
    base = 8000000000000000000LL + (int64_t)getpid() * 100000;
    return itest_stores_setup(&cfg, &rd, &db);
}

static int teardown(void **state)
{
    (void)state;
    itest_stores_teardown(cfg, rd, db, "push_address", base, base + 99999);
    db = NULL;
    return 0;
}

/* The members of UID's Redis set, sorted, joined by '|'. */
static char *members(int64_t uid, char *buf, size_t len)
{
    char key[HR_KEY_MAX], uid_s[24];
    redisReply *reply;

    snprintf(uid_s, sizeof uid_s, "%" PRId64, uid);
    reply = hr_redis_cmdf(rd, errstr, sizeof errstr, "SORT %s ALPHA",
                          hr_key_addr(hr_redis_prefix(rd), key, sizeof key, uid_s));
    if (reply == NULL)
        fail_msg("SORT: %s", errstr);
    buf[0] = '\0';
    for (size_t i = 0; i < reply->elements; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? "|" : "",
                 reply->element[i]->str);
    freeReplyObject(reply);
    return buf;
}

/* A sync; another test's open transaction may hold the address epoch for
 * a second (HR_MIRROR_BUSY), so a few tries. */
static void sync_ok(hr_mirror_result *res)
{
    int rc = HR_MIRROR_BUSY;

    for (int i = 0; i < 10 && rc == HR_MIRROR_BUSY; i++)
        rc = hr_mirror_sync(&hr_addr_mirror, db, rd, "test", 100, NULL, res, errstr, sizeof errstr);
    if (rc != 0)
        fail_msg("sync: %d %s", rc, errstr);
}

static void test_add_remove(void **state)
{
    char buf[4096];
    hr_addr_list l = {0};
    int64_t uid = base + 1;

    (void)state;
    assert_int_equal(hr_addr_add(db, rd, uid, HR_ADDR_FCM, "proj", "tokA", errstr, sizeof errstr),
                     1);
    assert_int_equal(hr_addr_add(db, rd, uid, HR_ADDR_FCM, "proj", "tokB", errstr, sizeof errstr),
                     1);
    assert_int_equal(hr_addr_add(db, rd, uid, HR_ADDR_FCM, "proj", "tokA", errstr, sizeof errstr),
                     0);
    /* Tokens are case-sensitive: another row. */
    assert_int_equal(hr_addr_add(db, rd, uid, HR_ADDR_FCM, "proj", "TOKA", errstr, sizeof errstr),
                     1);
    assert_int_equal(
        hr_addr_add(db, rd, uid, HR_ADDR_EMAIL, "", "a@example.org", errstr, sizeof errstr), 1);
    assert_int_equal(
        hr_addr_add(db, rd, uid, HR_ADDR_EMAIL, "x", "a@example.org", errstr, sizeof errstr),
        HR_ADDR_EINVAL);
    assert_string_equal(members(uid, buf, sizeof buf),
                        "email  a@example.org|fcm proj TOKA|fcm proj tokA|fcm proj tokB");
    assert_int_equal(hr_addr_list_uid(db, uid, &l, errstr, sizeof errstr), 0);
    assert_int_equal(l.a.n, 4);
    assert_int_equal(
        hr_addr_remove(db, rd, uid, HR_ADDR_FCM, "proj", "tokB", errstr, sizeof errstr), 1);
    assert_int_equal(
        hr_addr_remove(db, rd, uid, HR_ADDR_FCM, "proj", "tokB", errstr, sizeof errstr), 0);
    assert_string_equal(members(uid, buf, sizeof buf),
                        "email  a@example.org|fcm proj TOKA|fcm proj tokA");
    {
        const hr_addr repl[] = {{.platform = HR_ADDR_APNS, .app = "com.x", .address = APNS_TOKEN}};

        assert_int_equal(hr_addr_replace(db, rd, uid, repl, 1, errstr, sizeof errstr), 0);
    }
    assert_string_equal(members(uid, buf, sizeof buf), "apns com.x " APNS_TOKEN);
    assert_int_equal(hr_addr_replace(db, rd, uid, NULL, 0, errstr, sizeof errstr), 0);
    assert_string_equal(members(uid, buf, sizeof buf), "");
    /* The cap. */
    for (int i = 0; i < HR_ADDR_PER_UID_MAX; i++) {
        char tok[16];

        snprintf(tok, sizeof tok, "t%d", i);
        assert_int_equal(hr_addr_add(db, rd, uid, HR_ADDR_FCM, "p", tok, errstr, sizeof errstr), 1);
    }
    assert_int_equal(hr_addr_add(db, rd, uid, HR_ADDR_FCM, "p", "more", errstr, sizeof errstr),
                     HR_ADDR_EFULL);
    assert_int_equal(hr_addr_add(db, rd, uid, HR_ADDR_FCM, "p", "t0", errstr, sizeof errstr), 0);
    hr_addr_list_free(&l);
}

/* Raw SQL: an insert, a delete of a uid's last address, an update and a
 * row hr_addr_check refuses, then a sync. */
static void test_raw_sql(void **state)
{
    hr_mirror_result res;
    char buf[4096];
    int64_t u1 = base + 10, u2 = base + 11, u3 = base + 12;

    (void)state;
    sync_ok(&res);
    assert_true(res.full);
    assert_int_equal(
        itest_sql_exec(
            db,
            "INSERT INTO push_address (uid, platform, app, address) VALUES (?, 'email', '', "
            "'raw@example.org'), (?, 'fcm', 'p', 'gone'), (?, 'fcm', 'p', 'bad token')",
            (hr_mysql_param[]){HR_P_I64(u1), HR_P_I64(u2), HR_P_I64(u3)}, 3),
        0);
    sync_ok(&res);
    assert_false(res.full);
    /* Other tests share the database: their changes may be synced too. */
    assert_true(res.refused >= 1);
    assert_true(res.first_refused[0] != '\0');
    assert_string_equal(members(u1, buf, sizeof buf), "email  raw@example.org");
    assert_string_equal(members(u2, buf, sizeof buf), "fcm p gone");
    assert_string_equal(members(u3, buf, sizeof buf), "");
    assert_int_equal(itest_sql_exec(db, "DELETE FROM push_address WHERE uid = ?",
                                    (hr_mysql_param[]){HR_P_I64(u2)}, 1),
                     0);
    assert_int_equal(
        itest_sql_exec(db, "UPDATE push_address SET address = 'new@example.org' WHERE uid = ?",
                       (hr_mysql_param[]){HR_P_I64(u1)}, 1),
        0);
    sync_ok(&res);
    assert_true(res.uids >= 2);
    assert_string_equal(members(u1, buf, sizeof buf), "email  new@example.org");
    assert_string_equal(members(u2, buf, sizeof buf), "");
}

/* Redis lost everything (its keys and the synced mark): the next sync
 * reloads every address, and a uid emptied meanwhile stays empty. */
static void test_flush_refill(void **state)
{
    hr_mirror_result res;
    char buf[4096];
    int64_t u1 = base + 20, u2 = base + 21;

    (void)state;
    assert_int_equal(
        hr_addr_add(db, rd, u1, HR_ADDR_EMAIL, "", "x@example.org", errstr, sizeof errstr), 1);
    assert_int_equal(
        hr_addr_add(db, rd, u2, HR_ADDR_EMAIL, "", "y@example.org", errstr, sizeof errstr), 1);
    sync_ok(&res);
    assert_true(itest_redis_cleanup(cfg) >= 2);
    /* Redis came back with u2's set only (an older snapshot) and u2 lost
     * its address meanwhile. */
    assert_int_equal(itest_sql_exec(db, "DELETE FROM push_address WHERE uid = ?",
                                    (hr_mysql_param[]){HR_P_I64(u2)}, 1),
                     0);
    {
        char key[HR_KEY_MAX], uid_s[24];
        redisReply *reply;

        snprintf(uid_s, sizeof uid_s, "%" PRId64, u2);
        reply = hr_redis_cmdf(rd, errstr, sizeof errstr, "SADD %s %s",
                              hr_key_addr(hr_redis_prefix(rd), key, sizeof key, uid_s),
                              "email  y@example.org");
        assert_non_null(reply);
        freeReplyObject(reply);
    }
    assert_string_equal(members(u1, buf, sizeof buf), "");
    sync_ok(&res);
    assert_true(res.full);
    assert_string_equal(members(u1, buf, sizeof buf), "email  x@example.org");
    assert_string_equal(members(u2, buf, sizeof buf), "");
}

/* The worker's read of N uids' address sets (one pipeline, as its open
 * does beside the profiles), their fcm addresses (of APP; NULL = any) taken
 * with hr_addr_take into OUT; *BAD counts what does not parse.  0 or -1. */
static int fetch(char **uids, size_t n, const char *app, hr_addr_list *out, size_t *bad)
{
    hr_pipe *pipe = hr_pipe_new(rd);
    int rc = -1;

    *bad = 0;
    for (size_t i = 0; pipe != NULL && i < n; i++) {
        char key[HR_KEY_MAX];
        const char *argv[] = {"SMEMBERS",
                              hr_key_addr(hr_redis_prefix(rd), key, sizeof key, uids[i])};

        if (hr_pipe_cmd(pipe, 2, argv, NULL) != 0)
            goto done;
    }
    if (pipe == NULL || hr_pipe_exec(pipe, errstr, sizeof errstr) != 0)
        goto done;
    for (size_t i = 0; i < n; i++) {
        redisReply *reply = hr_pipe_reply(pipe, i, errstr, sizeof errstr);

        if (reply == NULL ||
            hr_addr_take(out, reply, strtoll(uids[i], NULL, 10), i, HR_ADDR_FCM, app, bad) != 0) {
            freeReplyObject(reply);
            goto done;
        }
        freeReplyObject(reply);
    }
    rc = 0;
done:
    hr_pipe_free(pipe);
    return rc;
}

/* A chunk of 5,000 uids, every third with addresses on two platforms:
 * the right ones, grouped by uid in the chunk's order, and a hand-written
 * member skipped. */
static void test_fetch_prune(void **state)
{
    char **uids = calloc(CHUNK, sizeof *uids);
    hr_addr *rows = calloc(CHUNK, sizeof *rows);
    hr_addr_import_result ir;
    hr_addr_list got = {0};
    size_t n = 0, bad = 0, prev = 0;
    char buf[4096];

    (void)state;
    assert_non_null(uids);
    assert_non_null(rows);
    for (size_t i = 0; i < CHUNK; i++) {
        uids[i] = malloc(24);
        snprintf(uids[i], 24, "%" PRId64, base + 1000 + (int64_t)(CHUNK - i));
        if (i % 3 == 0) {
            rows[n++] = (hr_addr){.uid = base + 1000 + (int64_t)(CHUNK - i),
                                  .platform = HR_ADDR_FCM,
                                  .app = "p1",
                                  .address = "tok1"};
            rows[n++] = (hr_addr){.uid = base + 1000 + (int64_t)(CHUNK - i),
                                  .platform = i % 2 ? HR_ADDR_FCM : HR_ADDR_EMAIL,
                                  .app = i % 2 ? "p2" : "",
                                  .address = i % 2 ? "tok2" : "e@x.org"};
        }
    }
    assert_int_equal(hr_addr_import(db, rd, rows, n, &ir, errstr, sizeof errstr), 0);
    assert_int_equal(ir.added, n);
    assert_int_equal(hr_addr_import(db, rd, rows, n, &ir, errstr, sizeof errstr), 0);
    assert_int_equal(ir.existed, n);
    {
        char key[HR_KEY_MAX];
        redisReply *reply =
            hr_redis_cmdf(rd, errstr, sizeof errstr, "SADD %s %s",
                          hr_key_addr(hr_redis_prefix(rd), key, sizeof key, uids[0]), "garbage");

        assert_non_null(reply);
        freeReplyObject(reply);
    }
    assert_int_equal(fetch(uids, CHUNK, NULL, &got, &bad), 0);
    assert_int_equal(bad, 1);
    /* Every third uid: tok1, plus tok2 for the odd ones. */
    assert_int_equal(got.a.n, (CHUNK + 2) / 3 + (CHUNK + 2) / 6);
    for (size_t i = 0; i < got.a.n; i++) {
        assert_true(got.a.v[i].idx >= prev);
        prev = got.a.v[i].idx;
        assert_int_equal(got.a.v[i].idx % 3, 0);
        assert_int_equal(got.a.v[i].uid, strtoll(uids[got.a.v[i].idx], NULL, 10));
    }
    hr_addr_list_free(&got);
    assert_int_equal(fetch(uids, CHUNK, "p2", &got, &bad), 0);
    assert_int_equal(got.a.n, (CHUNK + 2) / 6);
    assert_string_equal(got.a.v[0].address, "tok2");
    /* The provider said tok2 of the first is dead. */
    assert_int_equal(hr_addr_prune(db, rd, &got.a.v[0], errstr, sizeof errstr), 1);
    assert_int_equal(hr_addr_prune(db, rd, &got.a.v[0], errstr, sizeof errstr), 0);
    assert_string_equal(members(got.a.v[0].uid, buf, sizeof buf), "fcm p1 tok1");
    hr_addr_list_free(&got);
    for (size_t i = 0; i < CHUNK; i++)
        free(uids[i]);
    free(uids);
    free(rows);
}

/* The import's per-uid cap and repeats within one import. */
static void test_import_caps(void **state)
{
    hr_addr rows[HR_ADDR_PER_UID_MAX + 4];
    char toks[HR_ADDR_PER_UID_MAX + 4][16];
    hr_addr_import_result ir;
    int64_t uid = base + 30;

    (void)state;
    assert_int_equal(hr_addr_add(db, rd, uid, HR_ADDR_FCM, "p", "t0", errstr, sizeof errstr), 1);
    for (int i = 0; i < HR_ADDR_PER_UID_MAX + 4; i++) {
        snprintf(toks[i], sizeof toks[i], "t%d", i < 2 ? 0 : i);
        rows[i] = (hr_addr){.uid = uid, .platform = HR_ADDR_FCM, .app = "p", .address = toks[i]};
    }
    assert_int_equal(
        hr_addr_import(db, rd, rows, HR_ADDR_PER_UID_MAX + 4, &ir, errstr, sizeof errstr), 0);
    assert_int_equal(ir.existed, 2);
    assert_int_equal(ir.added, HR_ADDR_PER_UID_MAX - 1);
    assert_int_equal(ir.full, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_remove),   cmocka_unit_test(test_raw_sql),
        cmocka_unit_test(test_flush_refill), cmocka_unit_test(test_fetch_prune),
        cmocka_unit_test(test_import_caps),
    };

    if (getenv("HERALD_TEST_CONFIG") == NULL || *getenv("HERALD_TEST_CONFIG") == '\0') {
        fprintf(stderr, "test_addr: HERALD_TEST_CONFIG is not set -- skipping\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
