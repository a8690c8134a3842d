/* Unit tests of wk_smtp: the MIME message (headers, RFC 2047 words,
 * parts), refused header injection, and SMTP reply classification. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hr_base64.h"
#include "wk_smtp.h"

#define NOW 1795710755 /* Thu, 26 Nov 2026 16:32:35 +0000 */

static const wk_smtp_mail base = {
    .from = "noreply@herald.test",
    .to = "alice@example.org",
    .subject = "Your reminder",
    .text = "Hello Alice",
    .message_id = "t42.u7.a1",
    .now_s = NOW,
};

static char *build(const wk_smtp_mail *m)
{
    char err[256] = "";
    hr_buf b;

    hr_buf_init(&b, 1 << 20);
    if (wk_smtp_message_build(m, &b, err, sizeof err) != 0)
        fail_msg("%s", err);
    return b.data;
}

static void test_plain_text(void **state)
{
    static const char want[] = "From: <noreply@herald.test>\r\n"
                               "To: <alice@example.org>\r\n"
                               "Subject: Your reminder\r\n"
                               "Date: Thu, 26 Nov 2026 16:32:35 +0000\r\n"
                               "Message-ID: <t42.u7.a1@herald.test>\r\n"
                               "MIME-Version: 1.0\r\n"
                               "Content-Type: text/plain; charset=UTF-8\r\n"
                               "Content-Transfer-Encoding: base64\r\n"
                               "\r\n"
                               "SGVsbG8gQWxpY2U=\r\n";
    char *msg = build(&base);

    (void)state;
    assert_string_equal(msg, want);
    free(msg);
}

static void test_utf8_subject_and_name(void **state)
{
    wk_smtp_mail m = base;
    char *msg, *subj, *end;

    (void)state;
    m.from_name = "Héräld";
    /* 40 two-byte characters: 80 bytes, so two words, split between characters. */
    m.subject = "ééééééééééééééééééééééééééééééééééééééé✓";
    msg = build(&m);
    assert_non_null(strstr(msg, "From: =?UTF-8?B?SMOpcsOkbGQ=?= <noreply@herald.test>\r\n"));
    subj = strstr(msg, "Subject: =?UTF-8?B?");
    assert_non_null(subj);
    end = strstr(subj, "\r\nDate:");
    assert_non_null(end);
    /* Folded onto a continuation line; every word at most 75 characters. */
    assert_non_null(strstr(subj, "?=\r\n =?UTF-8?B?"));
    for (char *w = strstr(subj, "=?"); w != NULL && w < end; w = strstr(w + 2, "=?")) {
        char *close = strstr(w + 10, "?=");
        unsigned char dec[64];
        size_t n;
        assert_true(close - w + 2 <= 75);
        assert_int_equal(
            hr_base64_decode(w + 10, (size_t)(close - w - 10), HR_BASE64_STD, dec, sizeof dec, &n),
            0);
        /* Each word decodes to whole characters: never ends in a lead byte. */
        assert_true((dec[n - 1] & 0xc0) == 0x80 || dec[n - 1] < 0x80);
        w = close;
    }
    free(msg);
}

static void test_alternative_and_unsubscribe(void **state)
{
    wk_smtp_mail m = base;
    char *msg;

    (void)state;
    m.from_name = "Herald Team";
    m.html = "<p>Hello <b>Alice</b></p>";
    m.unsubscribe_url = "https://herald.test/u/t42/u7?sig=abc";
    m.unsubscribe_mailto = "unsubscribe@herald.test";
    msg = build(&m);
    assert_non_null(strstr(msg, "From: Herald Team <noreply@herald.test>\r\n"));
    assert_non_null(strstr(msg, "List-Unsubscribe: <mailto:unsubscribe@herald.test>,\r\n "
                                "<https://herald.test/u/t42/u7?sig=abc>\r\n"
                                "List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n"));
    assert_non_null(strstr(msg, "Content-Type: multipart/alternative; boundary=\"=_herald_alt\""
                                "\r\n\r\n--=_herald_alt\r\nContent-Type: text/plain;"));
    assert_non_null(strstr(msg, "--=_herald_alt\r\nContent-Type: text/html; charset=UTF-8\r\n"
                                "Content-Transfer-Encoding: base64\r\n\r\n"
                                "PHA+SGVsbG8gPGI+QWxpY2U8L2I+PC9wPg==\r\n--=_herald_alt--\r\n"));
    free(msg);
    /* mailto alone: no one-click header (RFC 8058 needs an https URI). */
    m.unsubscribe_url = NULL;
    msg = build(&m);
    assert_non_null(strstr(msg, "List-Unsubscribe: <mailto:unsubscribe@herald.test>\r\n"));
    assert_null(strstr(msg, "List-Unsubscribe-Post"));
    free(msg);
}

static void test_long_body_lines(void **state)
{
    wk_smtp_mail m = base;
    char text[1000], *msg, *body, *line;

    (void)state;
    memset(text, 'a', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    m.text = text;
    msg = build(&m);
    body = strstr(msg, "\r\n\r\n") + 4;
    for (line = body; *line; line = strstr(line, "\r\n") + 2)
        assert_true(strstr(line, "\r\n") - line <= 76);
    free(msg);
}

static void test_canonical_line_ends(void **state)
{
    wk_smtp_mail m = base;
    char *msg;

    (void)state;
    m.text = "a\nb\r\nc\n";
    msg = build(&m);
    /* base64 of "a\r\nb\r\nc\r\n": bare LFs became CRLF, the CRLF kept. */
    assert_non_null(strstr(msg, "\r\n\r\nYQ0KYg0KYw0K\r\n"));
    free(msg);
}

static void test_injection_refused(void **state)
{
    static const char *bad_text[] = {"Hi\r\nBcc: x@evil.test", "Hi\nX: y", "Hi\rX", "\xff\xfe"};
    wk_smtp_mail m;
    char err[256];
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 1 << 20);
    for (size_t i = 0; i < sizeof bad_text / sizeof bad_text[0]; i++) {
        m = base;
        m.subject = bad_text[i];
        assert_int_equal(wk_smtp_message_build(&m, &b, err, sizeof err), -1);
        m = base;
        m.from_name = bad_text[i];
        assert_int_equal(wk_smtp_message_build(&m, &b, err, sizeof err), -1);
    }
    m = base;
    m.to = "alice@example.org>\r\nBcc: <x@evil.test";
    assert_int_equal(wk_smtp_message_build(&m, &b, err, sizeof err), -1);
    m.to = "alice@example.org, bob@example.org";
    assert_int_equal(wk_smtp_message_build(&m, &b, err, sizeof err), -1);
    m.to = "alice";
    assert_int_equal(wk_smtp_message_build(&m, &b, err, sizeof err), -1);
    m = base;
    m.unsubscribe_url = "https://x.test/u>\r\nBcc: y";
    assert_int_equal(wk_smtp_message_build(&m, &b, err, sizeof err), -1);
    m.unsubscribe_url = "http://x.test/u";
    assert_int_equal(wk_smtp_message_build(&m, &b, err, sizeof err), -1);
    m = base;
    m.message_id = "a>\r\nX: y";
    assert_int_equal(wk_smtp_message_build(&m, &b, err, sizeof err), -1);
    m = base;
    m.text = NULL;
    assert_int_equal(wk_smtp_message_build(&m, &b, err, sizeof err), -1);
    assert_int_equal(b.len, 0);
    hr_buf_free(&b);
    /* Over the cap: an error, OUT unchanged. */
    hr_buf_init(&b, 64);
    assert_int_equal(wk_smtp_message_build(&base, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "cap"));
    assert_int_equal(b.len, 0);
    hr_buf_free(&b);
}

static void test_classify(void **state)
{
    static const struct {
        long code;
        const char *reply;
        wk_verdict want;
        const char *reason;
    } cases[] = {
        {250, "250 2.0.0 Ok: queued as ABC", WK_VERDICT_DELIVERED, "250"},
        {550, "550 5.1.1 <bob@example.org>: Recipient address rejected: User unknown",
         WK_VERDICT_UNREGISTERED, "550 5.1.1"},
        {550, "550-5.1.1 The email account that you tried to reach does not exist.",
         WK_VERDICT_UNREGISTERED, "550 5.1.1"},
        {550, "550 5.2.1 The email account that you tried to reach is disabled.",
         WK_VERDICT_UNREGISTERED, "550 5.2.1"},
        {556, "556 5.1.10 Recipient address has null MX", WK_VERDICT_UNREGISTERED, "556 5.1.10"},
        /* Policy rejections are permanent but say nothing about the mailbox. */
        {550, "550 5.7.1 Message rejected as spam", WK_VERDICT_FAILED, "550 5.7.1"},
        {550, "550 Mailbox unavailable", WK_VERDICT_FAILED, "550"},
        {552, "552 5.3.4 Message too big", WK_VERDICT_FAILED, "552 5.3.4"},
        {451, "451 4.7.1 Greylisted, try again later", WK_VERDICT_RETRY, "451 4.7.1"},
        {421, "421 Service not available", WK_VERDICT_RETRY, "421"},
        {0, NULL, WK_VERDICT_RETRY, "0"},
    };
    wk_provider_result r;

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wk_smtp_classify(cases[i].code, cases[i].reply, &r);
        if (r.verdict != cases[i].want || strcmp(r.reason, cases[i].reason) != 0)
            fail_msg("case %zu: verdict %d reason \"%s\"", i, (int)r.verdict, r.reason);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_text),
        cmocka_unit_test(test_utf8_subject_and_name),
        cmocka_unit_test(test_alternative_and_unsubscribe),
        cmocka_unit_test(test_long_body_lines),
        cmocka_unit_test(test_canonical_line_ends),
        cmocka_unit_test(test_injection_refused),
        cmocka_unit_test(test_classify),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
