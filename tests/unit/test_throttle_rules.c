/* Unit tests of the parts of the throttle that need no Redis: the rule a
 * task resolves to (mode from the task column, else the channel), the
 * throttle_key value lookup (payload first, then the user hash), and the
 * throttle column bounds hr_task_validate enforces (1 s .. 31 days). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "hr_task.h"
#include "hr_throttle.h"

static const char config_yaml[] = "channels:\n"
                                  "  loud: {url: \"http://h/{{uid}}\"}\n"
                                  "  quiet: {url: \"http://h/{{uid}}\", throttle: shadow}\n";

static hr_config *load_config(void)
{
    hr_config *cfg = NULL;
    char err[256];

    if (hr_config_load_buffer("mem", config_yaml, strlen(config_yaml), &cfg, err, sizeof err) != 0)
        fail_msg("config: %s", err);
    return cfg;
}

/* A valid throttled task in memory; the strings are static, so it is never
 * given to hr_task_free. */
static hr_task make_task(void)
{
    hr_task t;

    memset(&t, 0, sizeof t);
    t.id = 42;
    t.topic = "games";
    t.channel = "loud";
    t.title = "t";
    t.body = "b";
    t.due_ms = 1;
    t.chunk_size = 100;
    t.throttle_limit = 2;
    t.throttle_window_s = 3600;
    t.throttle_scope = "games";
    return t;
}

static void test_validate_window_bounds(void **state)
{
    (void)state;
    hr_config *cfg = load_config();
    hr_task t = make_task();
    char err[256];

    assert_int_equal(hr_task_validate(&t, cfg, err, sizeof err), 0);
    t.throttle_window_s = HR_TASK_MAX_WINDOW_S; /* 31 days */
    assert_int_equal(hr_task_validate(&t, cfg, err, sizeof err), 0);
    t.throttle_window_s = 1;
    assert_int_equal(hr_task_validate(&t, cfg, err, sizeof err), 0);

    t.throttle_window_s = 0;
    assert_int_equal(hr_task_validate(&t, cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "throttle_window_s 0"));
    t.throttle_window_s = HR_TASK_MAX_WINDOW_S + 1;
    assert_int_equal(hr_task_validate(&t, cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "throttle_window_s 2678401"));

    /* No throttle: the window column is not looked at. */
    t.throttle_limit = 0;
    t.throttle_window_s = 0;
    assert_int_equal(hr_task_validate(&t, cfg, err, sizeof err), 0);
    t.throttle_limit = -1;
    assert_int_equal(hr_task_validate(&t, cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "throttle_limit -1"));
    hr_config_free(cfg);
}

static void test_rule_from_task(void **state)
{
    (void)state;
    hr_config *cfg = load_config();
    const hr_channel *loud = hr_config_channel(cfg, "loud"),
                     *quiet = hr_config_channel(cfg, "quiet");
    hr_task t = make_task();
    hr_throttle_rule rule;
    char err[256];

    assert_int_equal(hr_throttle_rule_from_task(&t, loud, &rule, err, sizeof err), 0);
    assert_int_equal(rule.limit, 2);
    assert_int_equal(rule.window_ms, 3600000);
    assert_int_equal(rule.task, 42);
    assert_int_equal(rule.mode, HR_THROTTLE_ENFORCE);

    /* NULL column: the channel's mode; a column overrides it both ways. */
    assert_int_equal(hr_throttle_rule_from_task(&t, quiet, &rule, err, sizeof err), 0);
    assert_int_equal(rule.mode, HR_THROTTLE_SHADOW);
    t.throttle_mode = "enforce";
    assert_int_equal(hr_throttle_rule_from_task(&t, quiet, &rule, err, sizeof err), 0);
    assert_int_equal(rule.mode, HR_THROTTLE_ENFORCE);
    t.throttle_mode = "shadow";
    assert_int_equal(hr_throttle_rule_from_task(&t, loud, &rule, err, sizeof err), 0);
    assert_int_equal(rule.mode, HR_THROTTLE_SHADOW);
    t.throttle_mode = "loose";
    assert_int_equal(hr_throttle_rule_from_task(&t, loud, &rule, err, sizeof err), -1);
    assert_non_null(strstr(err, "loose"));

    /* 31 days in ms does not overflow; out-of-range columns are refused. */
    t.throttle_mode = NULL;
    t.throttle_window_s = HR_TASK_MAX_WINDOW_S;
    assert_int_equal(hr_throttle_rule_from_task(&t, loud, &rule, err, sizeof err), 0);
    assert_int_equal(rule.window_ms, INT64_C(2678400000));
    t.throttle_window_s = HR_TASK_MAX_WINDOW_S + 1;
    assert_int_equal(hr_throttle_rule_from_task(&t, loud, &rule, err, sizeof err), -1);

    /* limit 0: no throttle, not an error. */
    t.throttle_limit = 0;
    t.throttle_window_s = 0;
    assert_int_equal(hr_throttle_rule_from_task(&t, loud, &rule, err, sizeof err), 0);
    assert_int_equal(rule.limit, 0);
    hr_config_free(cfg);
}

/* An HGETALL reply built by hand: field, value, field, value. */
static redisReply *user_hash(const char *const *kv, size_t n)
{
    redisReply *r = calloc(1, sizeof *r);
    size_t i;

    assert_non_null(r);
    r->type = REDIS_REPLY_ARRAY;
    r->elements = n;
    r->element = calloc(n, sizeof *r->element);
    assert_non_null(r->element);
    for (i = 0; i < n; i++) {
        r->element[i] = calloc(1, sizeof **r->element);
        assert_non_null(r->element[i]);
        r->element[i]->type = REDIS_REPLY_STRING;
        r->element[i]->str = strdup(kv[i]);
        assert_non_null(r->element[i]->str);
        r->element[i]->len = strlen(kv[i]);
    }
    return r;
}

static void test_value_lookup(void **state)
{
    (void)state;
    static const char *const kv[] = {"lang", "de", "game", "chess", "tier", ""};
    cJSON *payload = cJSON_Parse("{\"game\":\"go\",\"level\":7,\"ratio\":0.5,\"vip\":true,"
                                 "\"tier\":null,\"tags\":[1]}");
    redisReply *user = user_hash(kv, 6);
    char buf[HR_THROTTLE_VALUE_MAX], small[3];

    assert_non_null(payload);
    /* Payload first, then the user hash. */
    assert_string_equal(hr_throttle_value("game", payload, user, buf, sizeof buf), "go");
    assert_string_equal(hr_throttle_value("lang", payload, user, buf, sizeof buf), "de");
    assert_string_equal(hr_throttle_value("game", NULL, user, buf, sizeof buf), "chess");
    /* Scalars as text; 7 and 7.0 name the same window. */
    assert_string_equal(hr_throttle_value("level", payload, NULL, buf, sizeof buf), "7");
    assert_string_equal(hr_throttle_value("ratio", payload, NULL, buf, sizeof buf), "0.5");
    assert_string_equal(hr_throttle_value("vip", payload, NULL, buf, sizeof buf), "true");
    /* Missing: absent, JSON null / array, empty in the hash, too long. */
    assert_null(hr_throttle_value("nope", payload, user, buf, sizeof buf));
    assert_null(hr_throttle_value("tags", payload, NULL, buf, sizeof buf));
    assert_null(hr_throttle_value("tier", payload, user, buf, sizeof buf));
    assert_null(hr_throttle_value("game", NULL, NULL, buf, sizeof buf));
    assert_null(hr_throttle_value("game", NULL, user, small, sizeof small));
    assert_string_equal(hr_throttle_value("lang", NULL, user, small, sizeof small), "de");
    /* A field name that is a prefix of another does not match it. */
    assert_null(hr_throttle_value("gam", NULL, user, buf, sizeof buf));

    freeReplyObject(user);
    cJSON_Delete(payload);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate_window_bounds),
        cmocka_unit_test(test_rule_from_task),
        cmocka_unit_test(test_value_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
