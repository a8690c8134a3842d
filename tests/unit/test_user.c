/* test_user: the values of the recipients' profiles and preferences
 * (hr_user.h): the checks (zone, locale, attribute keys and size, quiet
 * hours), the JSON forms of PUT and PATCH (attributes merged, null
 * removing), the preferences' entries and their wildcards, and what the
 * book's state in Redis says of its profiles (hr_user_book_empty). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "hr_user.h"

static hr_category categories[] = {
    {.name = "reminder"}, {.name = "marketing"}, {.name = "security", .mandatory = true}};

static hr_config config(void)
{
    hr_config cfg;

    memset(&cfg, 0, sizeof cfg);
    cfg.recipients.categories = categories;
    cfg.recipients.ncategories = 3;
    cfg.recipients.attributes_max_bytes = 128;
    return cfg;
}

/* BODY applied to U (PATCH when PATCH): the hr_user_from_json code, with
 * ERR for a refusal. */
static int apply(const char *body, bool patch, hr_user *u, char *err, size_t len)
{
    hr_config cfg = config();
    cJSON *j = cJSON_Parse(body);
    int rc;

    assert_non_null(j);
    rc = hr_user_from_json(j, &cfg, patch, u, err, len);
    cJSON_Delete(j);
    return rc;
}

static void test_profile_checks(void **state)
{
    hr_user u = {.uid = 7};
    char err[256];

    (void)state;
    assert_int_equal(apply("{\"tz\": \"Europe/Berlin\", \"locale\": \"pt-BR\", "
                           "\"attributes\": {\"name\": \"Ana\", \"n\": 3}}",
                           false, &u, err, sizeof err),
                     0);
    assert_string_equal(u.tz, "Europe/Berlin");
    assert_string_equal(u.locale, "pt-BR");
    {
        static const char *const refused[] = {
            "{\"tz\": \"Mars/Base\"}",
            "{\"tz\": \"../etc/passwd\"}",
            "{\"tz\": 3}",
            "{\"locale\": \"p\"}",
            "{\"locale\": \"de_DE\"}",
            "{\"locale\": \"abcdefghi-DE\"}",
            "{\"locale\": \"de-\"}",
            "{\"attributes\": [1]}",
            "{\"attributes\": {\"tz\": \"x\"}}",
            "{\"attributes\": {\"locale\": \"x\"}}",
            "{\"attributes\": {\"_optout\": \"*/*\"}}",
            "{\"attributes\": {\"9lives\": 1}}",
            "{\"attributes\": {\"a-b\": 1}}",
            "{\"attributes\": {\"big\": "
            "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}",
            "{\"quiet_hours\": {\"start\": \"22:00\", \"end\": \"22:00\"}}",
            "{\"quiet_hours\": {\"start\": \"22:00\"}}",
            "{\"quiet_hours\": {\"start\": \"22:00\", \"end\": \"7\"}}",
            "{\"quiet_hours\": {\"start\": \"22:00\", \"end\": \"07:00\", \"tz\": \"UTC\"}}",
            "{\"quiet_hours\": \"22-07\"}",
            "{\"colour\": \"red\"}",
        };

        for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
            hr_user v = {.uid = 7};

            if (apply(refused[i], false, &v, err, sizeof err) != HR_USER_EINVAL)
                fail_msg("accepted %s", refused[i]);
            hr_user_clear(&v);
        }
    }
    hr_user_clear(&u);
    /* Without a uid nothing is a profile. */
    u.uid = 0;
    assert_int_equal(apply("{}", false, &u, err, sizeof err), HR_USER_EINVAL);
}

static void test_put_and_patch(void **state)
{
    hr_user u = {.uid = 9};
    char err[256], *text;
    cJSON *j;

    (void)state;
    assert_int_equal(apply("{\"tz\": \"UTC\", \"attributes\": {\"a\": 1, \"b\": \"x\", "
                           "\"c\": true}, \"quiet_hours\": {\"start\": \"21:30\", "
                           "\"end\": \"06:45:30\"}}",
                           false, &u, err, sizeof err),
                     0);
    assert_true(u.quiet.set);
    assert_int_equal(u.quiet.start_s, 21 * 3600 + 1800);
    assert_int_equal(u.quiet.end_s, 6 * 3600 + 45 * 60 + 30);
    /* PATCH: b replaced, a removed, d added; tz and quiet hours kept. */
    assert_int_equal(apply("{\"attributes\": {\"a\": null, \"b\": \"y\", \"d\": [1]}}", true, &u,
                           err, sizeof err),
                     0);
    text = cJSON_PrintUnformatted(u.attributes);
    assert_string_equal(text, "{\"c\":true,\"b\":\"y\",\"d\":[1]}");
    free(text);
    assert_string_equal(u.tz, "UTC");
    assert_true(u.quiet.set);
    /* Without PATCH the attributes are replaced whole; what is not given
     * is the caller's (the API's PUT starts from an empty profile). */
    assert_int_equal(
        apply("{\"locale\": \"fr\", \"attributes\": {\"z\": 0}}", false, &u, err, sizeof err), 0);
    assert_string_equal(u.tz, "UTC");
    text = cJSON_PrintUnformatted(u.attributes);
    assert_string_equal(text, "{\"z\":0}");
    free(text);
    hr_user_clear(&u);
    u.uid = 9;
    assert_int_equal(apply("{\"tz\": null, \"attributes\": {}, \"quiet_hours\": null}", false, &u,
                           err, sizeof err),
                     0);
    assert_null(u.attributes); /* an empty object is no attributes */
    j = hr_user_to_json(&u);
    text = cJSON_PrintUnformatted(j);
    assert_string_equal(text, "{\"uid\":9,\"tz\":null,\"locale\":null,\"attributes\":{},"
                              "\"quiet_hours\":null}");
    free(text);
    cJSON_Delete(j);
    hr_user_clear(&u);
}

static void test_prefs(void **state)
{
    hr_config cfg = config();
    hr_user_prefs p = {0};
    char err[256], *text;
    cJSON *j;

    (void)state;
    j = cJSON_Parse("{\"opt_out\": [{\"category\": \"marketing\"}, {\"channel\": \"smtp\"}, "
                    "{\"category\": \"reminder\", \"channel\": \"fcm\"}, {\"category\": "
                    "\"marketing\", \"channel\": \"*\"}], \"quiet_hours\": {\"start\": \"23:00\", "
                    "\"end\": \"06:00\"}}");
    assert_int_equal(hr_user_prefs_from_json(j, &cfg, &p, err, sizeof err), 0);
    cJSON_Delete(j);
    /* Repeats held once; a left-out side is '*'. */
    assert_int_equal(p.noptouts, 3);
    assert_string_equal(p.optouts[0].channel, "*");
    assert_string_equal(p.optouts[1].category, "*");
    j = hr_user_prefs_to_json(42, &p, &cfg);
    text = cJSON_PrintUnformatted(j);
    assert_non_null(strstr(text, "\"quiet_hours\":{\"start\":\"23:00\",\"end\":\"06:00\"}"));
    assert_non_null(strstr(text, "{\"name\":\"security\",\"mandatory\":true}"));
    free(text);
    cJSON_Delete(j);
    {
        static const char *const refused[] = {
            "{\"opt_out\": [{\"category\": \"promo\"}]}",
            "{\"opt_out\": [{\"channel\": \"sms\"}]}",
            "{\"opt_out\": [{}]}",
            "{\"opt_out\": [{\"category\": 1}]}",
            "{\"opt_out\": [{\"category\": \"marketing\", \"x\": 1}]}",
            "{\"opt_out\": [\"marketing\"]}",
            "{\"opt_out\": {\"category\": \"marketing\"}}",
            "{\"quiet_hours\": {\"start\": \"24:00\", \"end\": \"06:00\"}}",
            "{\"snooze\": true}",
        };

        for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
            j = cJSON_Parse(refused[i]);
            if (hr_user_prefs_from_json(j, &cfg, &p, err, sizeof err) != HR_USER_EINVAL)
                fail_msg("accepted %s", refused[i]);
            cJSON_Delete(j);
        }
    }
    /* Without a configuration (raw SQL rows) a category is checked by its
     * form alone. */
    assert_int_equal(hr_user_check_optout(NULL, "promo", "*", err, sizeof err), 0);
    assert_int_equal(hr_user_check_optout(NULL, "Promo", "*", err, sizeof err), HR_USER_EINVAL);
    hr_user_prefs_clear(&p);
}

/* HMGET herald:user_book writes empty's answer: "writes" WRITES and
 * "empty" EMPTY (NULL: a nil). */
static void book_reply(redisReply *reply, redisReply *fields[2], redisReply field[2],
                       const char *writes, const char *empty)
{
    const char *v[2] = {writes, empty};

    for (int i = 0; i < 2; i++) {
        memset(&field[i], 0, sizeof field[i]);
        field[i].type = v[i] != NULL ? REDIS_REPLY_STRING : REDIS_REPLY_NIL;
        field[i].str = (char *)v[i];
        field[i].len = v[i] != NULL ? strlen(v[i]) : 0;
        fields[i] = &field[i];
    }
    memset(reply, 0, sizeof *reply);
    reply->type = REDIS_REPLY_ARRAY;
    reply->elements = 2;
    reply->element = fields;
}

static void test_book_empty(void **state)
{
    redisReply reply, *fields[2], field[2];

    (void)state;
    /* a sync found MySQL empty at the count of rewrites there is now */
    book_reply(&reply, fields, field, "7", "7");
    assert_true(hr_user_book_empty(&reply));
    book_reply(&reply, fields, field, NULL, "0");
    assert_true(hr_user_book_empty(&reply));
    /* a rewrite began since: a profile may exist */
    book_reply(&reply, fields, field, "8", "7");
    assert_false(hr_user_book_empty(&reply));
    book_reply(&reply, fields, field, "1", "0");
    assert_false(hr_user_book_empty(&reply));
    /* no state (a Redis an older herald wrote, or no sync found it empty
     * yet), or an answer of another shape: read the profiles */
    book_reply(&reply, fields, field, "3", NULL);
    assert_false(hr_user_book_empty(&reply));
    book_reply(&reply, fields, field, NULL, NULL);
    assert_false(hr_user_book_empty(&reply));
    reply.elements = 1;
    assert_false(hr_user_book_empty(&reply));
    assert_false(hr_user_book_empty(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_checks),
        cmocka_unit_test(test_put_and_patch),
        cmocka_unit_test(test_prefs),
        cmocka_unit_test(test_book_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
