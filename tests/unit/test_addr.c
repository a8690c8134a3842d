/* test_addr: hr_addr's pure parts — the per-platform checks, the Redis
 * member and its parse (round trip, malformed members), platform names,
 * and the list arena keeping strings in place as it grows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hr_addr.h"

#define APNS_TOKEN "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"

/* RFC 8291 Appendix A's user agent keys. */
#define WEBPUSH_SUB                                                                           \
    "https://push.example.net/wpush/v2/abc#"                                                  \
    "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4" \
    ".BTBZMqHH6r4Tts7J_aSIgg"

/* The same x with another y: not on P-256. */
#define WEBPUSH_OFF_CURVE                                                                     \
    "https://push.example.net/wpush/v2/abc#"                                                  \
    "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw8" \
    ".BTBZMqHH6r4Tts7J_aSIgg"

static int check(hr_addr_platform p, const char *app, const char *address)
{
    char err[256];

    return hr_addr_check(p, app, address, err, sizeof err);
}

static void test_check(void **state)
{
    char long_addr[HR_ADDR_ADDRESS_MAX + 2];

    (void)state;
    assert_int_equal(check(HR_ADDR_FCM, "my-proj", "dGVzd:APA91b-x_y.z"), 0);
    assert_int_equal(check(HR_ADDR_FCM, "", "tok"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_FCM, "my proj", "tok"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_FCM, "p", "to ken"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_FCM, "p", ""), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_APNS, "com.example.app", APNS_TOKEN), 0);
    assert_int_equal(check(HR_ADDR_APNS, "com.example.app.voip", APNS_TOKEN), 0);
    assert_int_equal(check(HR_ADDR_APNS, "com.example.app", "abcd"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_APNS, "com.example.app", APNS_TOKEN "0"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_APNS, "", APNS_TOKEN), HR_ADDR_EINVAL);
    /* the alphabets, character by character (a bitmap since issue 33) */
    assert_int_equal(check(HR_ADDR_APNS, "com.example.app",
                           "g40f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"),
                     HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_APNS, "com.example_app", APNS_TOKEN), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_FCM, "proj-1", "aZ09_:.-"), 0);
    assert_int_equal(check(HR_ADDR_FCM, "proj-1", "tok/en"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_FCM, "proj-1",
                           "tok\x80"
                           "en"),
                     HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_FCM, "proj.1", "token"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_EMAIL, "", "ann+tag@mail.example.org"), 0);
    assert_int_equal(check(HR_ADDR_EMAIL, "", "a@localhost"), 0);
    assert_int_equal(check(HR_ADDR_EMAIL, "x", "a@b.c"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_EMAIL, "", "no-at.example"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_EMAIL, "", "@example.org"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_EMAIL, "", "a b@example.org"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_EMAIL, "", "a@-bad.org"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_EMAIL, "", "a@bad..org"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_EMAIL, "", "a@b.org."), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_EMAIL, "", "\xc3\xa9@b.org"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_WEBHOOK, "", "https://hooks.example.org/u/7?x=1"), 0);
    assert_int_equal(check(HR_ADDR_WEBHOOK, "", "http://127.0.0.1:8080/"), 0);
    assert_int_equal(check(HR_ADDR_WEBHOOK, "", "ftp://x"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_WEBHOOK, "", "https://"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_WEBHOOK, "", "https://a b"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_WEBHOOK, "app", "https://a"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_WEBPUSH, "", WEBPUSH_SUB), 0);
    assert_int_equal(check(HR_ADDR_WEBPUSH, "x", WEBPUSH_SUB), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_WEBPUSH, "", "https://push.example.net/x"), HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR_WEBPUSH, "", "https://push.example.net/x#AAAA.BBBB"),
                     HR_ADDR_EINVAL);
    assert_int_equal(check(HR_ADDR__COUNT, "", "x"), HR_ADDR_EINVAL);
    memset(long_addr, 'a', sizeof long_addr - 1);
    long_addr[sizeof long_addr - 1] = '\0';
    assert_int_equal(check(HR_ADDR_FCM, "p", long_addr), HR_ADDR_EINVAL);
    long_addr[HR_ADDR_ADDRESS_MAX] = '\0';
    assert_int_equal(check(HR_ADDR_FCM, "p", long_addr), 0);
}

static void test_platform_names(void **state)
{
    hr_addr_platform p;

    (void)state;
    for (int i = 0; i < HR_ADDR__COUNT; i++) {
        assert_int_equal(hr_addr_platform_parse(hr_addr_platform_name(i), &p), 0);
        assert_int_equal(p, i);
    }
    assert_int_equal(hr_addr_platform_parse("FCM", &p), -1);
    assert_int_equal(hr_addr_platform_parse("", &p), -1);
    assert_null(hr_addr_platform_name(HR_ADDR__COUNT));
}

static void test_member(void **state)
{
    char buf[HR_ADDR_MEMBER_MAX + 1];
    hr_addr_list l = {0};
    hr_addr a;

    (void)state;
    assert_string_equal(
        hr_addr_member(buf, sizeof buf, HR_ADDR_EMAIL, "", "a@b.c", HR_ADDR_SUPP_NONE),
        "email  a@b.c");
    assert_int_equal(hr_addr_parse_member(&l, buf, strlen(buf), &a), 0);
    assert_int_equal(a.platform, HR_ADDR_EMAIL);
    assert_string_equal(a.app, "");
    assert_string_equal(a.address, "a@b.c");
    assert_string_equal(
        hr_addr_member(buf, sizeof buf, HR_ADDR_APNS, "com.x", APNS_TOKEN, HR_ADDR_SUPP_NONE),
        "apns com.x " APNS_TOKEN);
    assert_int_equal(hr_addr_parse_member(&l, buf, strlen(buf), &a), 0);
    assert_int_equal(a.platform, HR_ADDR_APNS);
    assert_string_equal(a.app, "com.x");
    assert_null(hr_addr_member(buf, 8, HR_ADDR_EMAIL, "", "a@b.c", HR_ADDR_SUPP_NONE));
    /* A suppressed address carries its reason as a fourth field. */
    assert_string_equal(
        hr_addr_member(buf, sizeof buf, HR_ADDR_EMAIL, "", "a@b.c", HR_ADDR_SUPP_BOUNCED),
        "email  a@b.c bounced");
    assert_int_equal(hr_addr_parse_member(&l, buf, strlen(buf), &a), 0);
    assert_int_equal(a.supp, HR_ADDR_SUPP_BOUNCED);
    assert_string_equal(a.address, "a@b.c");
    assert_int_equal(hr_addr_parse_member(&l, "email  a@b.c unsubscribed", 25, &a), 0);
    assert_int_equal(a.supp, HR_ADDR_SUPP_UNSUBSCRIBED);
    /* A webpush member: split without the point's curve check (OpenSSL
     * makes it at encryption), its form checked all the same. */
    assert_int_equal(hr_addr_parse_member(&l, "webpush  " WEBPUSH_SUB, 9 + strlen(WEBPUSH_SUB), &a),
                     0);
    assert_int_equal(a.platform, HR_ADDR_WEBPUSH);
    assert_string_equal(a.address, WEBPUSH_SUB);
    assert_int_equal(check(HR_ADDR_WEBPUSH, "", WEBPUSH_OFF_CURVE), HR_ADDR_EINVAL);
    assert_int_equal(
        hr_addr_parse_member(&l, "webpush  " WEBPUSH_OFF_CURVE, 9 + strlen(WEBPUSH_OFF_CURVE), &a),
        0);
    assert_int_equal(hr_addr_parse_member(&l, "webpush  https://a.example/x#AAAA.BBBB", 38, &a),
                     -1);
    assert_int_equal(hr_addr_parse_member(&l, "email  a@b.c x", 14, &a), -1);
    assert_int_equal(hr_addr_parse_member(&l, "email  a@b.c bounced x", 22, &a), -1);
    /* Malformed members: no separators, unknown platform, invalid fields,
     * an embedded NUL. */
    assert_int_equal(hr_addr_parse_member(&l, "fcm", 3, &a), -1);
    assert_int_equal(hr_addr_parse_member(&l, "sms  123", 8, &a), -1);
    assert_int_equal(hr_addr_parse_member(&l, "fcm  tok", 8, &a), -1);
    assert_int_equal(hr_addr_parse_member(&l, "email  a b@c.d", 14, &a), -1);
    assert_int_equal(hr_addr_parse_member(&l, "email  a@b\0c", 12, &a), -1);
    hr_addr_list_free(&l);
}

static void test_arena(void **state)
{
    hr_addr_list l = {0};
    char address[HR_ADDR_ADDRESS_MAX + 1];

    (void)state;
    memset(address, 'x', HR_ADDR_ADDRESS_MAX);
    address[HR_ADDR_ADDRESS_MAX] = '\0';
    for (int i = 0; i < 1000; i++) {
        hr_addr a = {
            .uid = i, .platform = HR_ADDR_FCM, .app = "p", .address = address, .idx = (size_t)i};

        address[0] = (char)('a' + i % 26);
        assert_int_equal(hr_addr_list_push(&l, &a), 0);
    }
    assert_int_equal(l.a.n, 1000);
    assert_true(l.blocks.n > 1);
    for (size_t i = 0; i < l.a.n; i++) {
        assert_int_equal(l.a.v[i].uid, (int64_t)i);
        assert_int_equal(l.a.v[i].address[0], 'a' + (int)i % 26);
        assert_int_equal(strlen(l.a.v[i].address), HR_ADDR_ADDRESS_MAX);
        assert_string_equal(l.a.v[i].app, "p");
    }
    hr_addr_list_free(&l);
    assert_int_equal(l.a.n, 0);
    assert_null(l.blocks.v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_platform_names),
        cmocka_unit_test(test_member),
        cmocka_unit_test(test_arena),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
