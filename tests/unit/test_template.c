/* Unit tests for common/hr_template.c: compile errors with offsets, every
 * variable kind, JSON escaping, hr_buf caps and rollback. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hr_template.h"

/* Lookup over a fixed table: uid, title, body, task.*, payload.*, user.*. */
typedef struct tvals {
    int calls;
} tvals;

static const char *tvals_lookup(void *ctx, hr_tvar_kind kind, const char *name, size_t *len)
{
    static const struct {
        hr_tvar_kind kind;
        const char *name, *value;
    } table[] = {
        {HR_TVAR_UID, "", "u42"},
        {HR_TVAR_TITLE, "", "Hello"},
        {HR_TVAR_BODY, "", "Body text"},
        {HR_TVAR_TASK, "id", "7"},
        {HR_TVAR_TASK, "name", "daily"},
        {HR_TVAR_PAYLOAD, "a.b-c_d", "deep"},
        {HR_TVAR_PAYLOAD, "quote", "say \"hi\"\\"},
        {HR_TVAR_PAYLOAD, "ctl",
         "a\nb\tc\x01"
         "d\re"},
        {HR_TVAR_PAYLOAD, "utf8", "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"},
        {HR_TVAR_PAYLOAD, "bad",
         "a\xFF"
         "b\xC3"
         "c\xED\xA0\x80"},
        {HR_TVAR_USER, "lang", "fr"},
        /* A user whose name is a link: phishing in a raw HTML mail. */
        {HR_TVAR_USER, "name",
         "<a href=\"https://evil.example/login\">Your account is locked</a> & 'more'"},
    };
    ((tvals *)ctx)->calls++;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (table[i].kind == kind && strcmp(table[i].name, name) == 0) {
            *len = strlen(table[i].value);
            return table[i].value;
        }
    }
    return NULL;
}

static hr_template *compile_ok(const char *src, bool escape)
{
    hr_template *t = NULL;
    char err[256] = "";
    int rc = hr_template_compile(src, strlen(src), escape, &t, err, sizeof err);
    if (rc != 0)
        fail_msg("compile of '%s' failed: %s", src, err);
    assert_non_null(t);
    return t;
}

/* Renders SRC and compares with WANT; returns the missing count. */
static size_t render_expect(const char *src, bool escape, const char *want)
{
    hr_template *t = compile_ok(src, escape);
    hr_buf b;
    hr_buf_init(&b, 4096);
    tvals v = {0};
    size_t missing = 0;
    assert_int_equal(hr_template_render(t, tvals_lookup, &v, &b, &missing), 0);
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.data, want, b.len);
    hr_buf_free(&b);
    hr_template_free(t);
    return missing;
}

static void compile_err(const char *src, size_t len, const char *want_substr)
{
    hr_template *t = (hr_template *)1;
    char err[256] = "";
    assert_int_equal(hr_template_compile(src, len, true, &t, err, sizeof err), -1);
    assert_null(t);
    if (strstr(err, want_substr) == NULL)
        fail_msg("error '%s' lacks '%s'", err, want_substr);
}

static void test_literal_only(void **state)
{
    (void)state;
    assert_int_equal(render_expect("plain text, no vars } {", true, "plain text, no vars } {"), 0);
    assert_int_equal(render_expect("", true, ""), 0);
}

static void test_stray_close_is_literal(void **state)
{
    (void)state;
    render_expect("a }} b {{uid}} }}", false, "a }} b u42 }}");
}

static void test_each_kind(void **state)
{
    (void)state;
    size_t missing = render_expect(
        "{{uid}}|{{title}}|{{body}}|{{task.id}}|{{task.name}}|{{payload.a.b-c_d}}|{{user.lang}}",
        true, "u42|Hello|Body text|7|daily|deep|fr");
    assert_int_equal(missing, 0);
}

static void test_spaces_in_braces(void **state)
{
    (void)state;
    render_expect("[{{ uid }}][{{\tuser.lang  }}][{{uid  }}]", true, "[u42][fr][u42]");
}

static void test_triple_brace(void **state)
{
    (void)state;
    render_expect("{\"o\":{{{task.id}}}}", false, "{\"o\":{7}}");
}

static void test_missing_counted(void **state)
{
    (void)state;
    hr_template *t = compile_ok("a{{payload.nope}}b{{user.nope}}c{{uid}}", true);
    hr_buf b;
    hr_buf_init(&b, 100);
    tvals v = {0};
    size_t missing = 5; /* render adds to what is there */
    assert_int_equal(hr_template_render(t, tvals_lookup, &v, &b, &missing), 0);
    assert_int_equal(missing, 7);
    assert_int_equal(v.calls, 3);
    assert_string_equal(b.data, "abcu42");
    assert_int_equal(hr_template_render(t, tvals_lookup, &v, &b, NULL), 0);
    assert_string_equal(b.data, "abcu42abcu42");
    hr_buf_free(&b);
    hr_template_free(t);
}

static void test_escape_quotes_backslash(void **state)
{
    (void)state;
    render_expect("{\"m\":\"{{payload.quote}}\"}", true, "{\"m\":\"say \\\"hi\\\"\\\\\"}");
    /* Without escaping the value goes through untouched. */
    render_expect("{{payload.quote}}", false, "say \"hi\"\\");
}

static void test_escape_control(void **state)
{
    (void)state;
    render_expect("{{payload.ctl}}", true, "a\\nb\\tc\\u0001d\\re");
}

static void test_escape_unicode_passes(void **state)
{
    (void)state;
    render_expect("{{payload.utf8}}", true, "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
}

static void test_escape_invalid_utf8(void **state)
{
    (void)state;
    /* 0xFF, a truncated C3, and an encoded surrogate (3 bytes) each become
     * U+FFFD per byte. */
    render_expect("{{payload.bad}}", true,
                  "a\xEF\xBF\xBD"
                  "b\xEF\xBF\xBD"
                  "c\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

static void test_escape_literals_untouched(void **state)
{
    (void)state;
    render_expect("\"lit\\\n\"{{uid}}", true, "\"lit\\\n\"u42");
}

static void test_json_escape_append_direct(void **state)
{
    (void)state;
    hr_buf b;
    hr_buf_init(&b, 64);
    const char in[] = {'x', '\0', '\x1f', '\x7f', '"'};
    assert_int_equal(hr_json_escape_append(&b, in, sizeof in), 0);
    assert_int_equal(b.len, strlen("x\\u0000\\u001f\x7f\\\""));
    assert_memory_equal(b.data, "x\\u0000\\u001f\x7f\\\"", b.len);
    /* Past the cap: -1 and nothing appended. */
    char big[40];
    memset(big, '"', sizeof big);
    assert_int_equal(hr_json_escape_append(&b, big, sizeof big), -1);
    assert_int_equal(b.len, strlen("x\\u0000\\u001f\x7f\\\""));
    hr_buf_free(&b);
}

static void test_err_unclosed(void **state)
{
    (void)state;
    compile_err("hello {{uid", 11, "unclosed '{{' at offset 6");
    compile_err("{{uid}} and {{ title", 20, "at offset 12");
}

static void test_err_empty(void **state)
{
    (void)state;
    compile_err("ab{{}}", 6, "empty variable name at offset 2");
    compile_err("abc{{   }}", 10, "empty variable name at offset 3");
}

static void test_err_unknown(void **state)
{
    (void)state;
    compile_err("x{{foo}}", 8, "unknown variable 'foo' at offset 1");
    compile_err("{{uid}}{{task.}}", 16, "at offset 7");
    compile_err("{{payload.a b}}", 15, "at offset 0");
    compile_err("{{user.x/y}}", 12, "at offset 0");
    compile_err("{{UID}}", 7, "unknown variable 'UID'");
    compile_err("{{uidx}}", 8, "unknown variable");
}

static void test_err_too_long(void **state)
{
    (void)state;
    size_t n = 64 * 1024 + 1;
    char *src = malloc(n);
    assert_non_null(src);
    memset(src, 'a', n);
    compile_err(src, n, "offset 65536");
    /* Exactly 64 KiB is allowed. */
    hr_template *t = NULL;
    char err[128];
    assert_int_equal(hr_template_compile(src, n - 1, true, &t, err, sizeof err), 0);
    hr_template_free(t);
    free(src);
}

static void test_append_i64(void **state)
{
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 64);
    assert_int_equal(hr_buf_append_i64(&b, 0), 0);
    assert_int_equal(hr_buf_append(&b, " ", 1), 0);
    assert_int_equal(hr_buf_append_i64(&b, -42), 0);
    assert_int_equal(hr_buf_append(&b, " ", 1), 0);
    assert_int_equal(hr_buf_append_i64(&b, INT64_MAX), 0);
    assert_int_equal(hr_buf_append(&b, " ", 1), 0);
    assert_int_equal(hr_buf_append_i64(&b, INT64_MIN), 0);
    assert_string_equal(b.data, "0 -42 9223372036854775807 -9223372036854775808");
    hr_buf_free(&b);
    /* Every length's edges (the digits are written two at a time from
     * the end of a length counted first), against printf. */
    for (uint64_t p = 1, k = 0; k < 19; k++, p *= 10)
        for (int64_t v = (int64_t)p - 1; v <= (int64_t)p + 1; v++) {
            char want[HR_BUF_I64_MAX], got[HR_BUF_I64_MAX];

            snprintf(want, sizeof want, "%" PRId64, v);
            assert_int_equal(hr_buf_i64(v, got), strlen(want));
            assert_string_equal(got, want);
            snprintf(want, sizeof want, "%" PRId64, -v);
            assert_int_equal(hr_buf_i64(-v, got), strlen(want));
            assert_string_equal(got, want);
        }
    hr_buf_init(&b, 64);
    assert_int_equal(hr_buf_append_u64(&b, UINT64_MAX), 0);
    assert_int_equal(hr_buf_append_u64(&b, 10000000000000000000u), 0);
    assert_string_equal(b.data, "1844674407370955161510000000000000000000");
    hr_buf_free(&b);
    /* Past the cap: nothing appended, not even the sign. */
    hr_buf_init(&b, 4);
    assert_int_equal(hr_buf_append(&b, "ab", 2), 0);
    assert_int_equal(hr_buf_append_i64(&b, -123), -1);
    assert_int_equal(b.len, 2);
    assert_string_equal(b.data, "ab");
    hr_buf_free(&b);
}

static void test_cap_exceeded_unchanged(void **state)
{
    (void)state;
    hr_template *t = compile_ok("0123456789{{body}}", true);
    hr_buf b;
    hr_buf_init(&b, 16);
    assert_int_equal(hr_buf_append(&b, "xy", 2), 0);
    tvals v = {0};
    size_t missing = 0;
    assert_int_equal(hr_template_render(t, tvals_lookup, &v, &b, &missing), -1);
    assert_int_equal(b.len, 2);
    assert_string_equal(b.data, "xy");
    /* A plain append past the cap fails the same way; up to it succeeds. */
    assert_int_equal(hr_buf_append(&b, "0123456789abcdef", 15), -1);
    assert_int_equal(b.len, 2);
    assert_int_equal(hr_buf_append(&b, "0123456789abcd", 14), 0);
    assert_int_equal(b.len, 16);
    hr_buf_reset(&b);
    assert_int_equal(b.len, 0);
    hr_buf_free(&b);
    hr_buf_free(&b); /* a freed buffer can be freed again */
    hr_buf_free(NULL);
    hr_template_free(NULL);
    hr_template_free(t);
}

static void test_uses(void **state)
{
    (void)state;
    hr_template *t = compile_ok("{{uid}} {{payload.x}}", true);
    assert_false(hr_template_uses_user(t));
    assert_true(hr_template_uses(t, HR_TVAR_UID));
    assert_true(hr_template_uses(t, HR_TVAR_PAYLOAD));
    assert_false(hr_template_uses(t, HR_TVAR_TITLE));
    assert_false(hr_template_uses(t, HR_TVAR_TASK));
    hr_template_free(t);

    t = compile_ok("hi {{ user.name }}", false);
    assert_true(hr_template_uses_user(t));
    assert_true(hr_template_uses(t, HR_TVAR_USER));
    assert_false(hr_template_uses(t, HR_TVAR_UID));
    hr_template_free(t);
}

static void test_buffer_grows(void **state)
{
    (void)state;
    hr_template *t = compile_ok("{{body}}-{{uid}};", true);
    hr_buf b;
    hr_buf_init(&b, 1 << 20);
    tvals v = {0};
    for (int i = 0; i < 1000; i++)
        assert_int_equal(hr_template_render(t, tvals_lookup, &v, &b, NULL), 0);
    assert_int_equal(b.len, 1000 * strlen("Body text-u42;"));
    assert_memory_equal(b.data + b.len - 14, "Body text-u42;", 14);
    hr_buf_free(&b);
    hr_template_free(t);
}

/* URL mode: values percent-encoded (unreserved bytes kept), literals as
 * they are, so a payload cannot add a path, a query or a header. */
static void test_utf8_valid(void **state)
{
    (void)state;
    assert_true(hr_utf8_valid("", 0));
    assert_true(hr_utf8_valid("plain ascii", 11));
    assert_true(hr_utf8_valid("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14));
    assert_false(hr_utf8_valid("\xc3\x28", 2));         /* bad continuation */
    assert_false(hr_utf8_valid("\xc3", 1));             /* truncated */
    assert_false(hr_utf8_valid("\xc0\xaf", 2));         /* overlong */
    assert_false(hr_utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    assert_false(hr_utf8_valid("\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
    assert_false(hr_utf8_valid("ok\xff", 3));
}

static void test_url_escape(void **state)
{
    (void)state;
    const char *src =
        "http://h/p/{{uid}}?t={{payload.ctl}}&q={{payload.quote}}&d={{payload.a.b-c_d}}";
    const char *want = "http://h/p/u42?t=a%0Ab%09c%01d%0De&q=say%20%22hi%22%5C&d=deep";
    hr_template *t = NULL;
    char err[256] = "";
    hr_buf b;
    tvals v = {0};

    assert_int_equal(
        hr_template_compile_escape(src, strlen(src), HR_TEMPLATE_URL, &t, err, sizeof err), 0);
    hr_buf_init(&b, 4096);
    assert_int_equal(hr_template_render(t, tvals_lookup, &v, &b, NULL), 0);
    assert_string_equal(b.data, want);
    hr_buf_free(&b);
    hr_template_free(t);
}

/* Renders SRC compiled with ESCAPE into a string compared with WANT. */
static void render_mode(const char *src, hr_template_escape escape, const char *want)
{
    hr_template *t = NULL;
    char err[256] = "";
    hr_buf b;
    tvals v = {0};

    if (hr_template_compile_escape(src, strlen(src), escape, &t, err, sizeof err) != 0)
        fail_msg("compile of '%s' failed: %s", src, err);
    hr_buf_init(&b, 4096);
    assert_int_equal(hr_template_render(t, tvals_lookup, &v, &b, NULL), 0);
    assert_int_equal(hr_buf_append(&b, "", 1), 0);
    assert_string_equal(b.data, want);
    hr_buf_free(&b);
    hr_template_free(t);
}

/* HTML mode: a link-shaped user attribute arrives as text, never as markup;
 * the template's own markup (literals) is untouched. */
static void test_html_escape(void **state)
{
    (void)state;
    render_mode("<p>Hello {{user.name}}, {{title}}</p>", HR_TEMPLATE_HTML,
                "<p>Hello &lt;a href=&quot;https://evil.example/login&quot;&gt;Your account is "
                "locked&lt;/a&gt; &amp; &#39;more&#39;, Hello</p>");
    render_mode("<a title=\"{{payload.quote}}\">x</a>", HR_TEMPLATE_HTML,
                "<a title=\"say &quot;hi&quot;\\\">x</a>");
}

/* {{raw NAME}}: the explicit opt-out, in every mode; "raw" alone is no name. */
static void test_raw(void **state)
{
    (void)state;
    render_mode("<p>{{raw user.name}}|{{ raw\t user.lang }}|{{user.lang}}</p>", HR_TEMPLATE_HTML,
                "<p><a href=\"https://evil.example/login\">Your account is locked</a> & "
                "'more'|fr|fr</p>");
    render_mode("{\"q\":\"{{raw payload.quote}}\",\"e\":\"{{payload.quote}}\"}", HR_TEMPLATE_JSON,
                "{\"q\":\"say \"hi\"\\\",\"e\":\"say \\\"hi\\\"\\\\\"}");
    render_mode("/u/{{raw payload.quote}}", HR_TEMPLATE_URL, "/u/say \"hi\"\\");
    compile_err("{{raw}}", 7, "unknown variable 'raw'");
    compile_err("{{raw  }}", 9, "unknown variable 'raw'");
    compile_err("{{rawuser.lang}}", 16, "unknown variable 'rawuser.lang'");
    compile_err("{{raw raw user.lang}}", 21, "unknown variable 'raw user.lang'");
}

/* hr_html_escape_append: the five characters, and nothing past the cap. */
static void test_html_escape_append(void **state)
{
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 12);
    assert_int_equal(hr_html_escape_append(&b, "a<b", 3), 0);
    assert_string_equal(b.data, "a&lt;b");
    assert_int_equal(hr_html_escape_append(&b, "&&", 2), -1);
    assert_string_equal(b.data, "a&lt;b");
    hr_buf_free(&b);
}

/* hr_url_escape_append: every byte outside A-Z a-z 0-9 - . _ ~ becomes %XX,
 * high bytes included; past the cap the buffer is unchanged. */
static void test_url_escape_append(void **state)
{
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 8);
    assert_int_equal(hr_url_escape_append(&b, "aZ9-._~", 7), 0);
    assert_string_equal(b.data, "aZ9-._~");
    hr_buf_reset(&b);
    assert_int_equal(hr_url_escape_append(&b, "/\xC3", 2), 0);
    assert_string_equal(b.data, "%2F%C3");
    assert_int_equal(hr_url_escape_append(&b, "?", 1), -1);
    assert_string_equal(b.data, "%2F%C3");
    hr_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_literal_only),
        cmocka_unit_test(test_html_escape),
        cmocka_unit_test(test_raw),
        cmocka_unit_test(test_html_escape_append),
        cmocka_unit_test(test_stray_close_is_literal),
        cmocka_unit_test(test_each_kind),
        cmocka_unit_test(test_spaces_in_braces),
        cmocka_unit_test(test_triple_brace),
        cmocka_unit_test(test_missing_counted),
        cmocka_unit_test(test_escape_quotes_backslash),
        cmocka_unit_test(test_escape_control),
        cmocka_unit_test(test_escape_unicode_passes),
        cmocka_unit_test(test_escape_invalid_utf8),
        cmocka_unit_test(test_escape_literals_untouched),
        cmocka_unit_test(test_json_escape_append_direct),
        cmocka_unit_test(test_err_unclosed),
        cmocka_unit_test(test_err_empty),
        cmocka_unit_test(test_err_unknown),
        cmocka_unit_test(test_err_too_long),
        cmocka_unit_test(test_cap_exceeded_unchanged),
        cmocka_unit_test(test_append_i64),
        cmocka_unit_test(test_uses),
        cmocka_unit_test(test_buffer_grows),
        cmocka_unit_test(test_utf8_valid),
        cmocka_unit_test(test_url_escape),
        cmocka_unit_test(test_url_escape_append),
    };
    return cmocka_run_group_tests_name("hr_template", tests, NULL, NULL);
}
