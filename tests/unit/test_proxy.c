/* Unit tests of hr_proxy: the proxy variables read once by libcurl 7.88's
 * rules (lower case first, never HTTP_PROXY, all_proxy last, "" = unset),
 * and the scheme of a channel's URL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hr_proxy.h"

static const char *const t_vars[] = {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                                     "smtp_proxy", "SMTP_PROXY", "all_proxy",   "ALL_PROXY",
                                     "no_proxy",   "NO_PROXY"};

static int t_clean(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof t_vars / sizeof t_vars[0]; i++)
        unsetenv(t_vars[i]);
    return 0;
}

/* The proxy and no-proxy list read for SCHEME, compared with WANT and
 * WANT_NO. */
static void t_expect(const char *scheme, const char *want, const char *want_no)
{
    hr_proxy px = {0};
    char errstr[64];

    assert_int_equal(hr_proxy_read(&px, scheme, strlen(scheme), errstr, sizeof errstr), 0);
    assert_string_equal(px.proxy, want);
    assert_string_equal(px.noproxy, want_no);
    hr_proxy_clear(&px);
}

static void test_none(void **state)
{
    (void)state;
    t_expect("http", "", "");
    t_expect("https", "", "");
}

static void test_scheme_variable(void **state)
{
    (void)state;
    setenv("http_proxy", "http://p1:3128", 1);
    setenv("https_proxy", "http://p2:3128", 1);
    t_expect("http", "http://p1:3128", "");
    t_expect("HTTP", "http://p1:3128", "");
    t_expect("https", "http://p2:3128", "");
    t_expect("smtp", "", "");
}

/* HTTP_PROXY is never read (libcurl's rule); the other upper-case names
 * are, after the lower-case one. */
static void test_upper_case(void **state)
{
    (void)state;
    setenv("HTTP_PROXY", "http://upper:1", 1);
    setenv("HTTPS_PROXY", "http://upper:2", 1);
    t_expect("http", "", "");
    t_expect("https", "http://upper:2", "");
    setenv("https_proxy", "http://lower:2", 1);
    t_expect("https", "http://lower:2", "");
    setenv("SMTP_PROXY", "http://upper:3", 1);
    t_expect("smtps", "", "");
    t_expect("smtp", "http://upper:3", "");
}

static void test_all_proxy(void **state)
{
    (void)state;
    setenv("ALL_PROXY", "http://all:2", 1);
    t_expect("http", "http://all:2", "");
    setenv("all_proxy", "http://all:1", 1);
    t_expect("http", "http://all:1", "");
    t_expect("smtp", "http://all:1", "");
    /* The scheme's own variable comes first, and HTTP_PROXY does not. */
    setenv("HTTP_PROXY", "http://upper:1", 1);
    t_expect("http", "http://all:1", "");
    setenv("http_proxy", "http://p1:3128", 1);
    t_expect("http", "http://p1:3128", "");
}

/* An empty variable counts as unset: the next one is read. */
static void test_empty_is_unset(void **state)
{
    (void)state;
    setenv("https_proxy", "", 1);
    setenv("HTTPS_PROXY", "http://upper:2", 1);
    t_expect("https", "http://upper:2", "");
    setenv("no_proxy", "", 1);
    setenv("NO_PROXY", "localhost,.internal", 1);
    t_expect("http", "", "localhost,.internal");
}

static void test_no_proxy(void **state)
{
    (void)state;
    setenv("http_proxy", "http://p1:3128", 1);
    setenv("NO_PROXY", "upper.example", 1);
    t_expect("http", "http://p1:3128", "upper.example");
    setenv("no_proxy", "127.0.0.1,*.lower", 1);
    t_expect("http", "http://p1:3128", "127.0.0.1,*.lower");
}

/* Read once: a later change of the environment does not reach a read
 * value. */
static void test_read_once(void **state)
{
    hr_proxy px = {0};
    char errstr[64];

    (void)state;
    setenv("http_proxy", "http://p1:3128", 1);
    assert_int_equal(hr_proxy_read(&px, "http", 4, errstr, sizeof errstr), 0);
    setenv("http_proxy", "http://p9:3128", 1);
    assert_string_equal(px.proxy, "http://p1:3128");
    hr_proxy_clear(&px);
    assert_null(px.proxy);
    hr_proxy_clear(&px);
    hr_proxy_clear(NULL);
}

static void test_scheme(void **state)
{
    size_t len;
    const char *s;

    (void)state;
    s = hr_proxy_scheme("https://api.example/push/{{uid}}", &len);
    assert_int_equal(len, 5);
    assert_memory_equal(s, "https", 5);
    s = hr_proxy_scheme("HTTP://127.0.0.1:8080/", &len);
    assert_int_equal(len, 4);
    assert_memory_equal(s, "HTTP", 4);
    s = hr_proxy_scheme("smtps://mail.example:465", &len);
    assert_int_equal(len, 5);
    assert_memory_equal(s, "smtps", 5);
    /* A web push channel has no URL: its endpoints are https://. */
    s = hr_proxy_scheme(NULL, &len);
    assert_int_equal(len, 5);
    assert_memory_equal(s, "https", 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_none, t_clean),
        cmocka_unit_test_setup(test_scheme_variable, t_clean),
        cmocka_unit_test_setup(test_upper_case, t_clean),
        cmocka_unit_test_setup(test_all_proxy, t_clean),
        cmocka_unit_test_setup(test_empty_is_unset, t_clean),
        cmocka_unit_test_setup(test_no_proxy, t_clean),
        cmocka_unit_test_setup(test_read_once, t_clean),
        cmocka_unit_test_setup(test_scheme, t_clean),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
