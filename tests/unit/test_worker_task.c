/* wk_task rendering and wk_chunk's uid check, without servers: header
 * values lose control bytes (no header injection), values in the URL are
 * percent-encoded, huge payload numbers print without undefined casts, a
 * title and body that name no uid or user.* are rendered once per task,
 * an smtp channel's html part escapes what it inserts ({{raw x}} opts
 * out) while its text part does not, and chunk members must be uids
 * 1..INT64_MAX. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hr_track.h"
#include "wk_chunk.h"
#include "wk_task.h"

static const char yaml[] = "channels:\n"
                           "  webhook:\n"
                           "    url: \"http://127.0.0.1/push/{{uid}}?p={{payload.p}}\"\n"
                           "    headers:\n"
                           "      X-Value: \"v={{payload.h}};\"\n"
                           "    body: \"{{payload.n}}|{{payload.m}}\"\n"
                           "  titled:\n"
                           "    url: \"http://127.0.0.1/t\"\n"
                           "    body: \"{{title}}|{{body}}|{{uid}}\"\n"
                           "  mail:\n"
                           "    type: smtp\n"
                           "    url: \"smtp://127.0.0.1:2525\"\n"
                           "    from: \"herald@example.com\"\n"
                           "    subject: \"{{title}}\"\n"
                           "    text: \"Hi {{user.name}}: {{body}}\"\n"
                           "    html: \"<p>Hi {{user.name}}: {{body}}</p>{{raw payload.p}}\"\n";

typedef struct fixture {
    hr_config *cfg;
    wk_task *task;
} fixture;

static int setup(void **state)
{
    char path[] = "/tmp/herald-unit-task-XXXXXX.yaml", errstr[512];
    fixture *f = calloc(1, sizeof *f);
    hr_task *row = calloc(1, sizeof *row);
    int fd = mkstemps(path, 5);

    assert_non_null(f);
    assert_non_null(row);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, yaml, sizeof yaml - 1), (ssize_t)(sizeof yaml - 1));
    close(fd);
    assert_int_equal(hr_config_load(path, &f->cfg, errstr, sizeof errstr), 0);
    unlink(path);
    row->id = 7;
    row->name = strdup("t");
    row->topic = strdup("default");
    row->channel = strdup("webhook");
    row->title = strdup("");
    row->body = strdup("");
    row->payload = strdup("{\"p\":\"a/b?c=d&e\",\"h\":\"x\\r\\nX-Evil: 1\\u007f\","
                          "\"n\":1e300,\"m\":-42}");
    row->due_ms = 0;
    row->freeze_ms = 0;
    row->chunk_size = 100;
    row->lease_until_ms = -1;
    assert_int_equal(wk_task_build(f->cfg, row, NULL, &f->task, errstr, sizeof errstr), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;

    wk_task_free(f->task);
    hr_config_free(f->cfg);
    free(f);
    return 0;
}

static void test_render_escapes(void **state)
{
    fixture *f = *state;
    wk_task_out out;
    char errstr[256];

    wk_task_out_init(&out);
    for (int round = 0; round < 2; round++) {
        /* The second render into the same buffers gives the same request,
         * nothing of the first left over. */
        assert_int_equal(wk_task_render(f->task, 0, "42", NULL, &out, errstr, sizeof errstr), 0);
        assert_string_equal(out.url.data, "http://127.0.0.1/push/42?p=a%2Fb%3Fc%3Dd%26e");
        assert_int_equal(out.nheaders, 1);
        /* One line and its NUL: "X-Value: v=xX-Evil: 1;" */
        assert_int_equal(out.headers.len, 23);
        assert_string_equal(out.headers.data, "X-Value: v=xX-Evil: 1;");
        assert_int_equal(out.stripped, 3); /* CR, LF, DEL */
        /* 1e300 is outside int64_t: printed as a double, not cast. */
        assert_string_equal(out.body.data, "1.0000000000000001e+300|-42");
    }
    wk_task_out_free(&out);
}

/* Renders TASK for UID into a string compared with WANT. */
static void assert_rendered(const wk_task *task, const char *uid, const char *want)
{
    wk_task_out out;
    char errstr[256];

    wk_task_out_init(&out);
    assert_int_equal(wk_task_render(task, 0, uid, NULL, &out, errstr, sizeof errstr), 0);
    assert_string_equal(out.body.data, want);
    wk_task_out_free(&out);
}

/* Task 8 ("t8") on CHANNEL with TITLE, BODY and PAYLOAD. */
static wk_task *channel_task(const hr_config *cfg, const char *channel, const char *title,
                             const char *body, const char *payload)
{
    hr_task *row = calloc(1, sizeof *row);
    wk_task *task = NULL;
    char errstr[512];

    assert_non_null(row);
    row->id = 8;
    row->name = strdup("t8");
    row->topic = strdup("default");
    row->channel = strdup(channel);
    row->title = strdup(title);
    row->body = strdup(body);
    row->payload = strdup(payload);
    row->chunk_size = 100;
    row->lease_until_ms = -1;
    assert_int_equal(wk_task_build(cfg, row, NULL, &task, errstr, sizeof errstr), 0);
    return task;
}

/* A task on channel "titled" with TITLE and BODY. */
static wk_task *titled_task(const hr_config *cfg, const char *title, const char *body)
{
    return channel_task(cfg, "titled", title, body, "{\"p\":\"pv\"}");
}

static void test_render_fixed_texts(void **state)
{
    fixture *f = *state;
    wk_task *fixed = titled_task(f->cfg, "Hi {{task.name}}", "{{payload.p}} {{title}}");
    wk_task *per_uid = titled_task(f->cfg, "Hi {{uid}}", "{{payload.p}}");
    wk_task *per_user = titled_task(f->cfg, "Hi", "{{user.name}}");

    assert_true(fixed->content[0].fixed);
    assert_rendered(fixed, "1", "Hi t8|pv Hi t8|1");
    assert_rendered(fixed, "2", "Hi t8|pv Hi t8|2");
    assert_false(per_uid->content[0].fixed);
    assert_rendered(per_uid, "5", "Hi 5|pv|5");
    assert_rendered(per_uid, "6", "Hi 6|pv|6");
    assert_false(per_user->content[0].fixed);
    assert_rendered(per_user, "7", "Hi||7");
    wk_task_free(fixed);
    wk_task_free(per_uid);
    wk_task_free(per_user);
}

/* A user whose name is a link: in the html part it is text, not a link;
 * the text part and the subject are not HTML and keep it as it is. */
static void test_render_mail_html(void **state)
{
    fixture *f = *state;
    wk_task *task = channel_task(f->cfg, "mail", "News & <offers>", "from {{user.name}}",
                                 "{\"p\":\"<b>footer</b>\"}");
    hr_buf out[WK_TASK__MAIL];
    char errstr[512];
    static const char name[] = "<a href=\"https://evil.example/\">Your account is locked</a>";
    redisReply k = {.type = REDIS_REPLY_STRING, .str = "name", .len = 4};
    redisReply v = {.type = REDIS_REPLY_STRING, .str = (char *)name, .len = sizeof name - 1};
    redisReply *items[] = {&k, &v};
    redisReply user = {.type = REDIS_REPLY_ARRAY, .elements = 2, .element = items};

    for (size_t i = 0; i < WK_TASK__MAIL; i++)
        hr_buf_init(&out[i], 4096);
    assert_int_equal(wk_task_render_mail(task, 0, "3", &user, out, errstr, sizeof errstr), 0);
    assert_string_equal(out[WK_TASK_HTML].data,
                        "<p>Hi &lt;a href=&quot;https://evil.example/&quot;&gt;Your account is "
                        "locked&lt;/a&gt;: from &lt;a href=&quot;https://evil.example/&quot;&gt;"
                        "Your account is locked&lt;/a&gt;</p><b>footer</b>");
    assert_string_equal(out[WK_TASK_TEXT].data,
                        "Hi <a href=\"https://evil.example/\">Your account is locked</a>: from "
                        "<a href=\"https://evil.example/\">Your account is locked</a>");
    assert_string_equal(out[WK_TASK_SUBJECT].data, "News & <offers>");
    for (size_t i = 0; i < WK_TASK__MAIL; i++)
        hr_buf_free(&out[i]);
    wk_task_free(task);
}

/* With events.tracking the html part's links go through the click redirect
 * and the pixel is added (hr_track.h), signed for the task and the uid;
 * the text part is left alone. */
static void test_render_mail_tracked(void **state)
{
    fixture *f = *state;
    wk_task *task;
    hr_buf out[WK_TASK__MAIL], link;
    char errstr[512], want[1024];
    redisReply k = {.type = REDIS_REPLY_STRING, .str = "name", .len = 4};
    redisReply v = {.type = REDIS_REPLY_STRING, .str = "Ann", .len = 3};
    redisReply *items[] = {&k, &v};
    redisReply user = {.type = REDIS_REPLY_ARRAY, .elements = 2, .element = items};

    f->cfg->events.tracking.base_url = strdup("https://h.test");
    f->cfg->events.tracking.key = strdup("0123456789abcdef0123456789abcdef");
    task =
        channel_task(f->cfg, "mail", "T", "see it", "{\"p\":\"<a href='https://x.test/a'>a</a>\"}");
    for (size_t i = 0; i < WK_TASK__MAIL; i++)
        hr_buf_init(&out[i], 4096);
    hr_buf_init(&link, 512);
    assert_int_equal(wk_task_render_mail(task, 0, "3", &user, out, errstr, sizeof errstr), 0);
    assert_int_equal(hr_track_token(f->cfg->events.tracking.key, HR_TRACK_CLICKED, 8, 3,
                                    "https://x.test/a", &link),
                     0);
    snprintf(want, sizeof want,
             "<p>Hi Ann: see it</p><a href='https://h.test/t/c/%s?u=https%%3A%%2F%%2Fx.test%%2Fa'>a"
             "</a><img src=\"https://h.test/t/o/8.3.",
             link.data);
    assert_int_equal(strncmp(out[WK_TASK_HTML].data, want, strlen(want)), 0);
    assert_string_equal(out[WK_TASK_TEXT].data, "Hi Ann: see it");
    for (size_t i = 0; i < WK_TASK__MAIL; i++)
        hr_buf_free(&out[i]);
    hr_buf_free(&link);
    wk_task_free(task);
}

static void test_uid_valid(void **state)
{
    (void)state;
    assert_true(wk_chunk_uid_valid("1"));
    assert_true(wk_chunk_uid_valid("9223372036854775807"));
    assert_false(wk_chunk_uid_valid("9223372036854775808"));
    assert_false(wk_chunk_uid_valid("18446744073709551615"));
    assert_false(wk_chunk_uid_valid("99999999999999999999999"));
    assert_false(wk_chunk_uid_valid("0"));
    assert_false(wk_chunk_uid_valid("-1"));
    assert_false(wk_chunk_uid_valid("+1"));
    assert_false(wk_chunk_uid_valid(" 1"));
    assert_false(wk_chunk_uid_valid("1a"));
    assert_false(wk_chunk_uid_valid(""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_render_escapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_render_fixed_texts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_render_mail_html, setup, teardown),
        cmocka_unit_test_setup_teardown(test_render_mail_tracked, setup, teardown),
        cmocka_unit_test(test_uid_valid),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
