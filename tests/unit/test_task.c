/* Unit tests for hr_task_validate: a valid task passes, and each kind of bad
 * column fails with the message an admin reads in push_task.last_error;
 * and for hr_task_from_row's state and control columns, parsed into enums.
 * Tasks are hr_task structs filled in memory (static strings, so they are
 * never given to hr_task_free); the configuration is one channel loaded
 * from a YAML string. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "hr_config.h"
#include "hr_rich.h"
#include "hr_task.h"

static const char config_yaml[] = "channels:\n"
                                  "  webhook:\n"
                                  "    url: \"http://127.0.0.1:9099/push/{{uid}}\"\n"
                                  "    headers: {X-Task: \"{{task.id}}\"}\n";

static int task_setup(void **state)
{
    hr_config *cfg = NULL;
    char err[256];

    if (hr_config_load_buffer("test.yaml", config_yaml, strlen(config_yaml), &cfg, err,
                              sizeof err) != 0) {
        print_error("config: %s\n", err);
        return -1;
    }
    *state = cfg;
    return 0;
}

static int task_teardown(void **state)
{
    hr_config_free(*state);
    return 0;
}

/* A task every check accepts: throttled, with a payload and templates. */
static hr_task valid_task(void)
{
    hr_task t;

    memset(&t, 0, sizeof t);
    t.id = 7;
    t.name = "daily";
    t.topic = "games";
    t.channel = "webhook";
    t.title = "Hello {{user.name}}";
    t.body = "Your {{payload.item}} is ready";
    t.payload = "{\"item\":\"sword\"}";
    t.due_ms = 1700000000000;
    t.freeze_ms = 1699920000000;
    t.rate_limit = 0;
    t.chunk_size = 5000;
    t.throttle_limit = 1;
    t.throttle_window_s = 86400;
    t.throttle_scope = "games";
    t.expire_ms = -1;
    t.finish_ms = -1;
    return t;
}

static void expect_valid(const hr_task *t, const hr_config *cfg)
{
    char err[256] = "";

    if (hr_task_validate(t, cfg, err, sizeof err) != 0)
        fail_msg("valid task rejected: %s", err);
}

/* T must fail with a message containing WANT. */
static void expect_invalid(const hr_task *t, const hr_config *cfg, const char *want)
{
    char err[256] = "";

    assert_int_equal(hr_task_validate(t, cfg, err, sizeof err), -1);
    if (strstr(err, want) == NULL)
        fail_msg("error \"%s\" does not contain \"%s\"", err, want);
}

static void test_valid(void **state)
{
    hr_task t = valid_task();

    expect_valid(&t, *state);
    /* The optional parts absent: no payload, no throttle, no rate limit. */
    t.payload = NULL;
    t.throttle_limit = 0;
    t.throttle_window_s = 0;
    t.rate_limit = 1000;
    t.chunk_size = 1;
    expect_valid(&t, *state);
    t.chunk_size = HR_TASK_MAX_CHUNK;
    expect_valid(&t, *state);
}

static void test_unknown_channel(void **state)
{
    hr_task t = valid_task();

    t.channel = "sms";
    expect_invalid(&t, *state, "unknown channel \"sms\"");
    t.channel = NULL;
    expect_invalid(&t, *state, "unknown channel \"\"");
}

static void test_chunk_size(void **state)
{
    hr_task t = valid_task();

    t.chunk_size = 0;
    expect_invalid(&t, *state, "chunk_size 0 is outside 1..100000");
    t.chunk_size = HR_TASK_MAX_CHUNK + 1;
    expect_invalid(&t, *state, "chunk_size 100001 is outside 1..100000");
}

static void test_due_at_null(void **state)
{
    hr_task t = valid_task();

    t.due_ms = -1;
    t.freeze_ms = -1;
    expect_invalid(&t, *state, "due_at is NULL");
}

static void test_negative_limits(void **state)
{
    hr_task t = valid_task();

    t.rate_limit = -1;
    expect_invalid(&t, *state, "rate_limit -1 is negative");
    t = valid_task();
    t.throttle_limit = -1;
    expect_invalid(&t, *state, "throttle_limit -1 is negative");
}

static void test_throttle_window(void **state)
{
    hr_task t = valid_task();

    t.throttle_window_s = 0;
    expect_invalid(&t, *state, "throttle_window_s 0 is outside 1..2678400");
    t.throttle_window_s = HR_TASK_MAX_WINDOW_S + 1;
    expect_invalid(&t, *state, "throttle_window_s 2678401 is outside 1..2678400");
    t.throttle_window_s = HR_TASK_MAX_WINDOW_S;
    expect_valid(&t, *state);
}

static void test_payload(void **state)
{
    hr_task t = valid_task();

    t.payload = "{\"item\": sword}";
    expect_invalid(&t, *state, "payload is not a JSON object");
    t.payload = "[1, 2]";
    expect_invalid(&t, *state, "payload is not a JSON object");
    t.payload = "null";
    expect_invalid(&t, *state, "payload is not a JSON object");
    t.payload = "";
    expect_invalid(&t, *state, "payload is not a JSON object");
}

static void test_templates(void **state)
{
    hr_task t = valid_task();

    t.title = "Hello {{user.name";
    expect_invalid(&t, *state, "title template: unclosed '{{' at offset 6");
    t = valid_task();
    t.body = "Your {{item}} is ready";
    expect_invalid(&t, *state, "body template: unknown variable 'item' at offset 5");
}

/* ttl_s, collapse_key and priority: NULL / absent is the provider's
 * default; out of the providers' ranges fails. */
static void test_push_options(void **state)
{
    hr_task t = valid_task();

    t.ttl_s = -1;
    t.collapse_key = NULL;
    expect_valid(&t, *state);
    t.ttl_s = HR_TASK_MAX_TTL_S;
    t.collapse_key = "score-0123456789012345678901234567890123456789012345678901234567";
    t.priority = HR_PRIORITY_NORMAL;
    expect_valid(&t, *state);
    t.ttl_s = HR_TASK_MAX_TTL_S + 1;
    expect_invalid(&t, *state, "ttl_s 2419201 is outside 0..2419200");
    t.ttl_s = -2;
    expect_invalid(&t, *state, "ttl_s is negative");
    t.ttl_s = 0;
    t.collapse_key = "score-01234567890123456789012345678901234567890123456789012345678";
    expect_invalid(&t, *state, "collapse_key must be 1..64 bytes on one line");
    t.collapse_key = "two\nlines";
    expect_invalid(&t, *state, "collapse_key must be 1..64 bytes");
    t.collapse_key = "";
    expect_invalid(&t, *state, "collapse_key must be 1..64 bytes");
    t.collapse_key = NULL;
    t.priority = HR_PRIORITY_BAD;
    expect_invalid(&t, *state, "priority must be high or normal");
}

/* An A/B test's winner step (024_ab_winner.sql): the ranges a row is held
 * to (a raw SQL row that breaks one fails the task), and what it does not
 * go with. */
static void test_ab(void **state)
{
    hr_task t = valid_task();
    char err[256];

    t.ab_sample_pct = 20;
    t.ab_wait_s = 60;
    t.ab_metric = "click";
    assert_int_equal(hr_task_validate(&t, *state, err, sizeof err), 0);
    assert_true(hr_task_waits(&t));
    t.ab_metric = "reply";
    expect_invalid(&t, *state, "ab.metric \"reply\" is not click, open or delivered");
    t.ab_metric = NULL;
    expect_invalid(&t, *state, "ab.metric \"\" is not click");
    t.ab_metric = "delivered";
    t.ab_sample_pct = 100;
    expect_invalid(&t, *state, "ab.sample_pct 100 is outside 1..99");
    t.ab_sample_pct = -5;
    expect_invalid(&t, *state, "ab.sample_pct -5 is outside 1..99");
    t.ab_sample_pct = 20;
    t.ab_wait_s = -1;
    expect_invalid(&t, *state, "ab.wait_s -1 is outside 0..2678400");
    t.ab_wait_s = 0;
    t.local_time = 1;
    expect_invalid(&t, *state, "ab with local_time");
    t.local_time = 0;
    t.shards = 2;
    expect_invalid(&t, *state, "shards 2 with ab");
    t.shards = 1;
    t.ab_sample_pct = -1; /* the column's NULL: none */
    t.ab_metric = NULL;
    assert_int_equal(hr_task_validate(&t, *state, err, sizeof err), 0);
    assert_false(hr_task_waits(&t));
}

/* Lead times (027_lead_times.sql): the release of a subscription's lead,
 * and what event_at does not go with. */
static void test_event_leads(void **state)
{
    hr_task t = valid_task();
    char err[256];
    const int64_t due = t.due_ms, event = due + 86400000;

    /* No event_at: a lead is no lead, everyone at due_at (or now if later). */
    assert_false(hr_task_leads(&t));
    assert_int_equal(hr_task_lead_release_ms(&t, 900, due - 5000), due);
    assert_int_equal(hr_task_lead_release_ms(&t, 900, due + 5000), due + 5000);
    t.event_ms = event;
    assert_true(hr_task_leads(&t));
    assert_false(hr_task_waits(&t));
    assert_int_equal(hr_task_validate(&t, *state, err, sizeof err), 0);
    /* 15 minutes and 1 day before; none: due_at. */
    assert_int_equal(hr_task_lead_release_ms(&t, 900, due), event - 900000);
    assert_int_equal(hr_task_lead_release_ms(&t, 86400, due), due);
    assert_int_equal(hr_task_lead_release_ms(&t, 0, due), event);
    assert_int_equal(hr_task_lead_release_ms(&t, -1, due), due);
    /* A wave before the claim (the plan's now) fires at the claim. */
    assert_int_equal(hr_task_lead_release_ms(&t, 90000, due + 1000), due + 1000);
    /* What the API and import refuse: a wave before due_at. */
    assert_int_equal(hr_task_lead_check(&t, 86400, err, sizeof err), 0);
    assert_int_equal(hr_task_lead_check(&t, 86401, err, sizeof err), -1);
    assert_non_null(
        strstr(err, "before task 7's due_at 2023-11-14T22:13:20.000Z (at most 86400 s"));
    t.event_ms = due - 1000;
    assert_int_equal(hr_task_lead_check(&t, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "event_at is before its due_at"));
    t.event_ms = -1;
    assert_int_equal(hr_task_lead_check(&t, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "has no event_at"));
    t.event_ms = event;
    t.local_time = 1;
    expect_invalid(&t, *state, "event_at with local_time");
    t.local_time = 0;
    t.window = true;
    t.window_start_s = 8 * 3600;
    t.window_end_s = 21 * 3600;
    expect_invalid(&t, *state, "event_at with a window");
    t.window = false;
    t.window_start_s = t.window_end_s = -1;
    t.ab_sample_pct = 20;
    t.ab_wait_s = 60;
    t.ab_metric = "click";
    expect_invalid(&t, *state, "event_at with ab");
    t.ab_sample_pct = -1;
    t.ab_metric = NULL;
    t.shards = 4;
    expect_invalid(&t, *state, "shards 4 with event_at");
    t.shards = 1;
    t.event_ms = -1; /* the column's NULL */
    assert_false(hr_task_leads(&t));
    t.shards = 4;
    assert_int_equal(hr_task_validate(&t, *state, err, sizeof err), 0);
}

/* local_time, the zones and the window (008_local_time.sql). */
static void test_local_time(void **state)
{
    hr_task t = valid_task();
    char err[256];

    t.local_time = 1;
    t.default_tz = "America/New_York";
    t.window = true;
    t.window_start_s = 8 * 3600;
    t.window_end_s = 21 * 3600;
    t.window_tz = "Asia/Kolkata";
    assert_int_equal(hr_task_validate(&t, *state, err, sizeof err), 0);
    assert_true(hr_task_waits(&t));
    assert_int_equal(hr_task_first_due_ms(&t), t.due_ms - 14 * 3600 * 1000LL);
    t.window_start_s = 22 * 3600; /* wraps midnight */
    t.window_end_s = 6 * 3600;
    assert_int_equal(hr_task_validate(&t, *state, err, sizeof err), 0);
    t.local_time = 2;
    expect_invalid(&t, *state, "local_time must be 0 or 1");
    t.local_time = 0;
    t.default_tz = "Mars/Olympus";
    expect_invalid(&t, *state, "default_tz \"Mars/Olympus\": unknown time zone");
    t.default_tz = "../../etc/passwd";
    expect_invalid(&t, *state, "default_tz \"../../etc/passwd\": not a time zone name");
    t.default_tz = NULL;
    t.window_tz = "Nowhere";
    expect_invalid(&t, *state, "window_tz \"Nowhere\": unknown time zone");
    t.window_tz = NULL;
    t.window_end_s = -1;
    expect_invalid(&t, *state, "window_start and window_end must both be set");
    t.window_end_s = t.window_start_s;
    expect_invalid(&t, *state, "must be two different times of day");
    t.window_end_s = 86400;
    expect_invalid(&t, *state, "must be two different times of day");
    t.window = false;
    t.window_start_s = t.window_end_s = -1;
    t.window_tz = "UTC";
    expect_invalid(&t, *state, "window_tz is set without window_start");
    t.window_tz = NULL;
    assert_int_equal(hr_task_validate(&t, *state, err, sizeof err), 0);
    assert_false(hr_task_waits(&t));
    assert_int_equal(hr_task_first_due_ms(&t), t.due_ms);
}

/* A row as selected with HR_TASK_COLUMNS: STATE and CONTROL as given, and
 * the push options' cells TTL, COLLAPSE and PRIORITY. */
static int task_row_cells(const char *state, const char *control, const char *ttl,
                          const char *collapse, const char *priority, hr_task **out, char *errstr,
                          size_t errlen)
{
    char *cells[] = {"7", "daily", "games", "webhook", "t", "b", NULL, "1700000000000",
                     "1699920000000", "0", "5000", "0", "0", NULL, NULL, NULL, (char *)control,
                     (char *)state, NULL, NULL, NULL, "0", "0", "0", "0", "0", "0", "0", "0",
                     (char *)ttl, (char *)collapse, (char *)priority, "1", "Europe/Berlin", "28800",
                     "75600", NULL, NULL, /* expire_at */
                     "0",
                     /* pacing */
                     "1700000060000", "channel webhook is overbooked",
                     /* sharded tasks */
                     "4",
                     /* recipients: category, opted_out, suppressed */
                     "marketing", "3", "2",
                     /* rich and silent pushes */
                     "{\"silent\": true}",
                     /* the winner step: sample, wait, metric, sampled, winner, decided,
                      * figures */
                     "20", "600", "open", "1700000100000", "B", NULL, NULL,
                     /* lead times: event_at */
                     "1700000900000",
                     /* has variants */
                     "1"};
    hr_mysql_rows rows = {.nrows = 1, .ncols = sizeof cells / sizeof cells[0], .cells = cells};

    return hr_task_from_row(&rows, 0, out, errstr, errlen);
}

static int task_row(const char *state, const char *control, hr_task **out, char *errstr,
                    size_t errlen)
{
    return task_row_cells(state, control, NULL, NULL, "high", out, errstr, errlen);
}

/* Rich and silent options (hr_rich.h): what parses, what is refused. */
static void test_rich(void **state)
{
    hr_rich r;
    char err[256];

    (void)state;
    assert_int_equal(hr_rich_parse(NULL, &r, err, sizeof err), 0);
    assert_false(hr_rich_any(&r));
    assert_int_equal(hr_rich_parse("{\"image\": \"https://x.example/a.png\", \"badge\": 0, "
                                   "\"buttons\": [{\"id\": \"ok\", \"title\": \"OK\"}], "
                                   "\"thread\": \"t\", \"mutable_content\": true}",
                                   &r, err, sizeof err),
                     0);
    assert_true(hr_rich_any(&r));
    assert_string_equal(r.image, "https://x.example/a.png");
    assert_int_equal(r.badge, 0);
    assert_int_equal(r.nbuttons, 1);
    assert_string_equal(r.buttons[0].title, "OK");
    assert_true(r.mutable_content);
    assert_false(r.silent);
    assert_int_equal(hr_rich_parse("{\"silent\": true, \"thread\": \"s\"}", &r, err, sizeof err),
                     0);
    assert_true(r.silent);
    assert_int_equal(hr_rich_parse("{\"silent\": true, \"badge\": 1}", &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "shows nothing"));
    assert_int_equal(
        hr_rich_parse("{\"buttons\": [{\"id\": \"a b\", \"title\": \"x\"}]}", &r, err, sizeof err),
        -1);
    assert_non_null(strstr(err, "rich.buttons[0]"));
    assert_int_equal(hr_rich_parse("{\"badge\": 1.5}", &r, err, sizeof err), -1);
    assert_int_equal(hr_rich_parse("[1]", &r, err, sizeof err), -1);
    assert_int_equal(hr_rich_parse("{\"sound\": \"a\\nb\"}", &r, err, sizeof err), -1);
}

static void test_from_row_enums(void **state)
{
    hr_task *t = NULL;
    char err[256];

    (void)state;
    assert_int_equal(task_row("paused", "pause", &t, err, sizeof err), 0);
    assert_int_equal(t->state, HR_STATE_PAUSED);
    assert_int_equal(t->control, HR_CONTROL_PAUSE);
    assert_string_equal(t->throttle_scope, "games");
    assert_int_equal(t->ttl_s, -1);
    assert_null(t->collapse_key);
    assert_int_equal(t->priority, HR_PRIORITY_HIGH);
    assert_int_equal(t->expire_ms, -1);
    assert_int_equal(t->finish_ms, 1700000060000);
    assert_string_equal(t->last_warning, "channel webhook is overbooked");
    assert_int_equal(t->shards, 4);
    assert_string_equal(t->rich, "{\"silent\": true}");
    assert_int_equal(t->ab_sample_pct, 20);
    assert_int_equal(t->ab_wait_s, 600);
    assert_string_equal(t->ab_metric, "open");
    assert_int_equal(t->ab_sampled_ms, 1700000100000);
    assert_string_equal(t->ab_winner, "B");
    assert_int_equal(t->event_ms, 1700000900000);
    assert_int_equal(t->has_variants, 1);
    assert_int_equal(t->ab_decided_ms, -1);
    assert_null(t->ab_figures);
    assert_true(hr_task_waits(t)); /* the rest waits in the wait set */
    hr_task_free(t);
    assert_int_equal(task_row_cells("done", "run", "-1", "x", "urgent", &t, err, sizeof err), 0);
    assert_int_equal(t->ttl_s, -2); /* a written -1 is not NULL */
    assert_string_equal(t->collapse_key, "x");
    assert_int_equal(t->priority, HR_PRIORITY_BAD);
    hr_task_free(t);
    assert_int_equal(task_row("archived", "run", &t, err, sizeof err), -1);
    assert_null(t);
    assert_non_null(strstr(err, "(state) has an unknown value \"archived\""));
    assert_int_equal(task_row("done", "stop", &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "(control) has an unknown value \"stop\""));
    assert_int_equal(task_row("done", NULL, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "(control) has an unknown value \"NULL\""));
}

/* expire_at: NULL never expires; it must be after due_at (a task that
 * could never send anything is refused); hr_task_expired holds from
 * expire_at on. */
static void test_expiry(void **state)
{
    hr_task t = valid_task();

    expect_valid(&t, *state);
    assert_false(hr_task_expired(&t, INT64_MAX));
    t.expire_ms = t.due_ms + 1;
    expect_valid(&t, *state);
    assert_false(hr_task_expired(&t, t.due_ms));
    assert_true(hr_task_expired(&t, t.due_ms + 1));
    assert_true(hr_task_expired(&t, t.due_ms + 3600000));
    t.expire_ms = t.due_ms;
    expect_invalid(&t, *state, "expire_at is not after due_at");
    t.expire_ms = 1;
    expect_invalid(&t, *state, "expire_at is not after due_at");
    t.expire_ms = 0; /* zeroed in memory: never */
    expect_valid(&t, *state);
    assert_false(hr_task_expired(&t, INT64_MAX));
}

/* finish_by: NULL (or absent) paces nothing; set, it must come after
 * due_at. */
static void test_finish_by(void **state)
{
    hr_task t = valid_task();

    assert_false(hr_task_paced(&t));
    expect_valid(&t, *state);
    t.finish_ms = t.due_ms + 1;
    assert_true(hr_task_paced(&t));
    expect_valid(&t, *state);
    t.finish_ms = t.due_ms;
    expect_invalid(&t, *state, "finish_by must be after due_at");
    t.finish_ms = 1;
    expect_invalid(&t, *state, "finish_by must be after due_at");
}

/* shards: 0 (zeroed) and 1 are one set, up to 256; more than one set is
 * refused with local time, a window or finish_by (docs/architecture.md
 * "Sharded tasks"). */
static void test_shards(void **state)
{
    hr_task t = valid_task();

    t.shards = 0;
    expect_valid(&t, *state);
    t.shards = 256;
    expect_valid(&t, *state);
    t.shards = 257;
    expect_invalid(&t, *state, "shards 257 is outside 1..256");
    t.shards = -1;
    expect_invalid(&t, *state, "shards -1 is outside 1..256");
    t.shards = 4;
    t.finish_ms = t.due_ms + 60000;
    expect_invalid(&t, *state, "shards 4 with finish_by: a sharded task cannot be paced");
    t.finish_ms = -1;
    t.local_time = 1;
    expect_invalid(&t, *state, "shards 4 with local_time");
    t.local_time = 0;
    t.window = true;
    t.window_start_s = 3600;
    t.window_end_s = 7200;
    expect_invalid(&t, *state, "shards 4 with a window");
    t.shards = 1;
    expect_valid(&t, *state);
}

/* The defaults a new task starts from: valid once it has a name, a channel
 * and a due time, and with none of the optional features on. */
static void test_defaults(void **state)
{
    hr_task t;

    hr_task_defaults(&t);
    assert_string_equal(t.topic, "default");
    assert_int_equal(t.chunk_size, 5000);
    assert_int_equal(t.shards, 1);
    assert_int_equal(t.ttl_s, -1);
    assert_false(hr_task_paced(&t));
    assert_false(hr_task_waits(&t));
    t.name = "n";
    t.channel = "webhook";
    t.throttle_scope = t.topic;
    expect_invalid(&t, *state, "due_at is NULL");
    t.due_ms = 1700000000000;
    expect_valid(&t, *state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_unknown_channel),
        cmocka_unit_test(test_chunk_size),
        cmocka_unit_test(test_due_at_null),
        cmocka_unit_test(test_negative_limits),
        cmocka_unit_test(test_throttle_window),
        cmocka_unit_test(test_payload),
        cmocka_unit_test(test_templates),
        cmocka_unit_test(test_push_options),
        cmocka_unit_test(test_from_row_enums),
        cmocka_unit_test(test_expiry),
        cmocka_unit_test(test_local_time),
        cmocka_unit_test(test_finish_by),
        cmocka_unit_test(test_shards),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_rich),
        cmocka_unit_test(test_ab),
        cmocka_unit_test(test_event_leads),
    };
    return cmocka_run_group_tests(tests, task_setup, task_teardown);
}
