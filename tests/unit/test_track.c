/* Unit tests of hr_track: the signed links round-trip, a link whose URL,
 * uid, task or signature was altered is refused, a non-http target is
 * refused, and the rewrite turns each http(s) href into its click link
 * (entities decoded, herald's own links and mailto: left alone) and puts
 * the pixel before </body>. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hr_track.h"

#define KEY "0123456789abcdef0123456789abcdef"
#define BASE "https://h.test"

static void test_click_round_trip(void **state)
{
    const char *url = "https://example.com/a?b=1&c=2";
    int64_t task;
    uint64_t uid;
    char err[128], token[128];
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 256);
    assert_int_equal(hr_track_token(KEY, HR_TRACK_CLICKED, 42, 1007, url, &b), 0);
    snprintf(token, sizeof token, "%s", b.data);
    assert_int_equal(
        hr_track_verify(KEY, HR_TRACK_CLICKED, token, url, &task, &uid, err, sizeof err), 0);
    assert_int_equal(task, 42);
    assert_int_equal(uid, 1007);
    /* Another URL, another key, an open's check of a click token. */
    assert_int_equal(hr_track_verify(KEY, HR_TRACK_CLICKED, token, "https://evil.test/", &task,
                                     &uid, err, sizeof err),
                     -1);
    assert_int_equal(hr_track_verify("another-key-of-thirty-two-bytes!!", HR_TRACK_CLICKED, token,
                                     url, &task, &uid, err, sizeof err),
                     -1);
    assert_int_equal(
        hr_track_verify(KEY, HR_TRACK_OPENED, token, NULL, &task, &uid, err, sizeof err), -1);
    /* Another uid or task under the same signature. */
    token[3] = token[3] == '8' ? '9' : '8';
    assert_int_equal(
        hr_track_verify(KEY, HR_TRACK_CLICKED, token, url, &task, &uid, err, sizeof err), -1);
    hr_buf_free(&b);
}

static void test_refusals(void **state)
{
    int64_t task;
    uint64_t uid;
    char err[128];
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 256);
    assert_int_equal(hr_track_token(KEY, HR_TRACK_CLICKED, 1, 2, "javascript:alert(1)", &b), 0);
    assert_int_equal(hr_track_verify(KEY, HR_TRACK_CLICKED, b.data, "javascript:alert(1)", &task,
                                     &uid, err, sizeof err),
                     -1);
    assert_int_equal(
        hr_track_verify(KEY, HR_TRACK_CLICKED, b.data, NULL, &task, &uid, err, sizeof err), -1);
    assert_int_equal(
        hr_track_verify(KEY, HR_TRACK_OPENED, "1.2", NULL, &task, &uid, err, sizeof err), -1);
    assert_int_equal(hr_track_verify(KEY, HR_TRACK_OPENED, "x.2.AAAAAAAAAAAAAAAAAAAAAA", NULL,
                                     &task, &uid, err, sizeof err),
                     -1);
    assert_int_equal(hr_track_verify(KEY, HR_TRACK_OPENED, "0.2.AAAAAAAAAAAAAAAAAAAAAA", NULL,
                                     &task, &uid, err, sizeof err),
                     -1);
    hr_buf_reset(&b);
    assert_int_equal(hr_track_token(KEY, HR_TRACK_OPENED, 5, 6, NULL, &b), 0);
    assert_int_equal(
        hr_track_verify(KEY, HR_TRACK_OPENED, b.data, NULL, &task, &uid, err, sizeof err), 0);
    hr_buf_free(&b);
}

/* The click link the rewrite should write for URL. */
static void click_link(const char *url, const char *escaped, char *out, size_t len)
{
    hr_buf b;

    hr_buf_init(&b, 256);
    assert_int_equal(hr_track_token(KEY, HR_TRACK_CLICKED, 9, 77, url, &b), 0);
    snprintf(out, len, BASE "/t/c/%s?u=%s", b.data, escaped);
    hr_buf_free(&b);
}

static void test_rewrite(void **state)
{
    const char *html = "<html><body><p><a href=\"https://example.com/a?x=1&amp;y=2\">one</a> "
                       "<a class=\"b\" HREF='http://other.test/'>two</a> "
                       "<a href=\"mailto:x@y.z\">mail</a> <a href=\"" BASE "/u/abc\">unsub</a> "
                       "<a data-href=\"https://no.test/\">no</a></p></BODY></html>";
    char one[512], two[512], pixel[256], want[4096];
    hr_buf b, tok;

    (void)state;
    click_link("https://example.com/a?x=1&y=2", "https%3A%2F%2Fexample.com%2Fa%3Fx%3D1%26y%3D2",
               one, sizeof one);
    click_link("http://other.test/", "http%3A%2F%2Fother.test%2F", two, sizeof two);
    hr_buf_init(&tok, 256);
    assert_int_equal(hr_track_token(KEY, HR_TRACK_OPENED, 9, 77, NULL, &tok), 0);
    snprintf(pixel, sizeof pixel,
             "<img src=\"" BASE "/t/o/%s\" width=\"1\" height=\"1\" alt=\"\" "
             "style=\"display:none\">",
             tok.data);
    snprintf(want, sizeof want,
             "<html><body><p><a href=\"%s\">one</a> <a class=\"b\" HREF='%s'>two</a> "
             "<a href=\"mailto:x@y.z\">mail</a> <a href=\"" BASE "/u/abc\">unsub</a> "
             "<a data-href=\"https://no.test/\">no</a></p>%s</BODY></html>",
             one, two, pixel);
    hr_buf_init(&b, 1 << 16);
    assert_int_equal(hr_track_rewrite(BASE "/", KEY, 9, 77, html, strlen(html), &b), 0);
    assert_string_equal(b.data, want);
    /* No </body>: the pixel goes at the end; over the cap: OUT unchanged. */
    hr_buf_reset(&b);
    assert_int_equal(hr_track_rewrite(BASE, KEY, 9, 77, "<p>hi</p>", 9, &b), 0);
    assert_int_equal(strncmp(b.data, "<p>hi</p><img src=", 18), 0);
    hr_buf_free(&b);
    hr_buf_init(&b, 20);
    assert_int_equal(hr_track_rewrite(BASE, KEY, 9, 77, html, strlen(html), &b), -1);
    assert_int_equal(b.len, 0);
    hr_buf_free(&b);
    hr_buf_free(&tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_click_round_trip),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_rewrite),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
