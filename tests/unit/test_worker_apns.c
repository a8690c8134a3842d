/* Unit tests of wk_apns: provider tokens (verified with the .p8 key's
 * public half, renewed within Apple's 20..60 minute rule), request path,
 * headers and body, and the answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <cmocka.h>

#include "key_fixtures.h"
#include "test_provider.h"
#include "wk_apns.h"

#define NOW 1700000000
#define TOKEN "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"

static wk_apns_signer *new_signer(void)
{
    size_t len;
    char *pem = key_fixtures_read("ec.p8", &len), err[256] = "";
    wk_apns_signer *s = NULL;

    assert_non_null(pem);
    if (wk_apns_signer_new(pem, len, "ABC123DEFG", "TEAM123456", &s, err, sizeof err) != 0)
        fail_msg("%s", err);
    free(pem);
    return s;
}

static void test_signer_rejects(void **state)
{
    size_t len, rlen;
    char *pem = key_fixtures_read("ec.p8", &len), *rsa = key_fixtures_read("rsa.pem", &rlen),
         err[256];
    wk_apns_signer *s = (wk_apns_signer *)1;

    (void)state;
    assert_int_equal(wk_apns_signer_new(pem, len, "SHORT", "TEAM123456", &s, err, sizeof err), -1);
    assert_null(s);
    assert_int_equal(wk_apns_signer_new(pem, len, "ABC123DEFG", "TEAM\"23456", &s, err, sizeof err),
                     -1);
    assert_int_equal(wk_apns_signer_new(rsa, rlen, "ABC123DEFG", "TEAM123456", &s, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "P-256"));
    free(pem);
    free(rsa);
}

static void test_token_verifies(void **state)
{
    wk_apns_signer *s = new_signer();
    char err[256], *hdr = NULL, *claims = NULL;
    const char *tok = wk_apns_signer_token(s, NOW, err, sizeof err);
    cJSON *c;

    (void)state;
    assert_non_null(tok);
    assert_int_equal(key_fixtures_jwt_verify(tok, "ec_pub.pem", &hdr, &claims), 0);
    c = cJSON_Parse(hdr);
    assert_string_equal(cJSON_GetObjectItem(c, "alg")->valuestring, "ES256");
    assert_string_equal(cJSON_GetObjectItem(c, "kid")->valuestring, "ABC123DEFG");
    cJSON_Delete(c);
    c = cJSON_Parse(claims);
    assert_string_equal(cJSON_GetObjectItem(c, "iss")->valuestring, "TEAM123456");
    assert_int_equal((int64_t)cJSON_GetObjectItem(c, "iat")->valuedouble, NOW);
    cJSON_Delete(c);
    free(hdr);
    free(claims);
    wk_apns_signer_free(s);
}

/* The iat claim of the signer's current token. */
static int64_t token_iat(wk_apns_signer *s, int64_t now)
{
    char err[256], *claims = NULL;
    const char *tok = wk_apns_signer_token(s, now, err, sizeof err);
    int64_t iat;
    cJSON *c;

    assert_non_null(tok);
    assert_int_equal(key_fixtures_jwt_verify(tok, "ec_pub.pem", NULL, &claims), 0);
    c = cJSON_Parse(claims);
    iat = (int64_t)cJSON_GetObjectItem(c, "iat")->valuedouble;
    cJSON_Delete(c);
    free(claims);
    return iat;
}

static void test_token_renewal(void **state)
{
    wk_apns_signer *s = new_signer();

    (void)state;
    assert_int_equal(token_iat(s, NOW), NOW);
    /* Kept for 50 minutes, renewed from then on. */
    assert_int_equal(token_iat(s, NOW + WK_APNS_TOKEN_RENEW_S - 1), NOW);
    assert_int_equal(token_iat(s, NOW + WK_APNS_TOKEN_RENEW_S), NOW + WK_APNS_TOKEN_RENEW_S);
    /* ExpiredProviderToken on a 10-minute-old token: no renewal (Apple
     * would answer TooManyProviderTokenUpdates). */
    assert_int_equal(wk_apns_signer_expired(s, NOW + WK_APNS_TOKEN_RENEW_S + 600), -1);
    assert_int_equal(token_iat(s, NOW + WK_APNS_TOKEN_RENEW_S + 600), NOW + WK_APNS_TOKEN_RENEW_S);
    /* On a 20-minute-old one: the next call renews. */
    assert_int_equal(wk_apns_signer_expired(s, NOW + WK_APNS_TOKEN_RENEW_S + 1200), 0);
    assert_int_equal(token_iat(s, NOW + WK_APNS_TOKEN_RENEW_S + 1200),
                     NOW + WK_APNS_TOKEN_RENEW_S + 1200);
    wk_apns_signer_free(s);
}

static void test_request_alert(void **state)
{
    cJSON *payload = cJSON_Parse("{\"order\":\"A-1\",\"n\":42}"), *body, *alert;
    wk_apns_message m = {
        .device_token = TOKEN,
        .topic = "com.example.app",
        .push_type = WK_APNS_ALERT,
        .title = "Hi",
        .body = "There",
        .payload = payload,
        .ttl_s = 3600,
        .collapse_id = "news",
        .apns_id = "123e4567-e89b-12d3-a456-426614174000",
        .high_priority = true,
        .now_s = NOW,
    };
    static const char *want[] = {
        "authorization: bearer a.b.c",
        "apns-topic: com.example.app",
        "apns-push-type: alert",
        "apns-priority: 10",
        "apns-expiration: 1700003600",
        "apns-collapse-id: news",
        "apns-id: 123e4567-e89b-12d3-a456-426614174000",
    };
    wk_apns_request req;
    char err[256];
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 8192);
    assert_int_equal(wk_apns_request_build(&m, "a.b.c", &req, &b, err, sizeof err), 0);
    assert_string_equal(req.path, "/3/device/" TOKEN);
    assert_int_equal(req.nheaders, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < req.nheaders; i++)
        assert_string_equal(req.header[i], want[i]);
    body = cJSON_Parse(b.data);
    alert = cJSON_GetObjectItem(cJSON_GetObjectItem(body, "aps"), "alert");
    assert_string_equal(cJSON_GetObjectItem(alert, "title")->valuestring, "Hi");
    assert_string_equal(cJSON_GetObjectItem(alert, "body")->valuestring, "There");
    assert_string_equal(cJSON_GetObjectItem(body, "order")->valuestring, "A-1");
    assert_int_equal(cJSON_GetObjectItem(body, "n")->valueint, 42);
    cJSON_Delete(body);
    cJSON_Delete(payload);
    hr_buf_free(&b);
}

static void test_request_background(void **state)
{
    wk_apns_message m = {
        .device_token = TOKEN,
        .topic = "com.example.app",
        .push_type = WK_APNS_BACKGROUND,
        .ttl_s = -1,
        .high_priority = true,
        .now_s = NOW,
    };
    wk_apns_request req;
    char err[256];
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 8192);
    assert_int_equal(wk_apns_request_build(&m, "a.b.c", &req, &b, err, sizeof err), 0);
    assert_int_equal(req.nheaders, 4);
    assert_string_equal(req.header[2], "apns-push-type: background");
    /* Apple refuses priority 10 for background pushes. */
    assert_string_equal(req.header[3], "apns-priority: 5");
    assert_string_equal(b.data, "{\"aps\":{\"content-available\":1}}");
    hr_buf_free(&b);
}

static void test_request_rejects(void **state)
{
    cJSON *aps = cJSON_Parse("{\"aps\":{}}"), *big = cJSON_CreateObject();
    wk_apns_message ok = {.device_token = TOKEN, .topic = "com.example.app", .ttl_s = -1};
    wk_apns_message m;
    wk_apns_request req;
    char err[256], pad[5000];
    hr_buf b;

    (void)state;
    memset(pad, 'x', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    cJSON_AddStringToObject(big, "pad", pad);
    hr_buf_init(&b, 65536);
    m = ok;
    m.device_token = "0a1b";
    assert_int_equal(wk_apns_request_build(&m, "a.b.c", &req, &b, err, sizeof err), -1);
    m.device_token = TOKEN "/../x";
    assert_int_equal(wk_apns_request_build(&m, "a.b.c", &req, &b, err, sizeof err), -1);
    m = ok;
    m.topic = "com.example\r\nx-evil: 1";
    assert_int_equal(wk_apns_request_build(&m, "a.b.c", &req, &b, err, sizeof err), -1);
    m = ok;
    m.collapse_id = "a\nb";
    assert_int_equal(wk_apns_request_build(&m, "a.b.c", &req, &b, err, sizeof err), -1);
    m = ok;
    m.apns_id = "not-a-uuid";
    assert_int_equal(wk_apns_request_build(&m, "a.b.c", &req, &b, err, sizeof err), -1);
    m = ok;
    m.payload = aps;
    assert_int_equal(wk_apns_request_build(&m, "a.b.c", &req, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "\"aps\""));
    m.payload = big;
    assert_int_equal(wk_apns_request_build(&m, "a.b.c", &req, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "4096"));
    assert_int_equal(wk_apns_request_build(&ok, "a.b\r\nc", &req, &b, err, sizeof err), -1);
    assert_int_equal(b.len, 0);
    hr_buf_free(&b);
    cJSON_Delete(aps);
    cJSON_Delete(big);
}

static void test_classify(void **state)
{
    static const test_provider_case cases[] = {
        {200, "", -1, WK_VERDICT_DELIVERED, "200"},
        {410, "{\"reason\":\"Unregistered\",\"timestamp\":1700000000000}", -1,
         WK_VERDICT_UNREGISTERED, "410 Unregistered"},
        {400, "{\"reason\":\"BadDeviceToken\"}", -1, WK_VERDICT_UNREGISTERED, "400 BadDeviceToken"},
        {400, "{\"reason\":\"PayloadTooLarge\"}", -1, WK_VERDICT_FAILED, "400 PayloadTooLarge"},
        {403, "{\"reason\":\"ExpiredProviderToken\"}", -1, WK_VERDICT_REFRESH,
         "403 ExpiredProviderToken"},
        {403, "{\"reason\":\"InvalidProviderToken\"}", -1, WK_VERDICT_FAILED,
         "403 InvalidProviderToken"},
        {429, "{\"reason\":\"TooManyRequests\"}", -1, WK_VERDICT_SLOWDOWN, "429 TooManyRequests"},
        {500, "{\"reason\":\"InternalServerError\"}", -1, WK_VERDICT_RETRY,
         "500 InternalServerError"},
        {503, "{\"reason\":\"ServiceUnavailable\"}", -1, WK_VERDICT_RETRY,
         "503 ServiceUnavailable"},
        {503, "{\"reason\":\"ServiceUnavailable\"}", 5, WK_VERDICT_SLOWDOWN,
         "503 ServiceUnavailable"},
        {400, "{\"reason\":\"DeviceTokenNotForTopic\"}", -1, WK_VERDICT_FAILED,
         "400 DeviceTokenNotForTopic"},
    };

    (void)state;
    test_provider_check(wk_apns_classify, cases, sizeof cases / sizeof cases[0]);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signer_rejects),     cmocka_unit_test(test_token_verifies),
        cmocka_unit_test(test_token_renewal),      cmocka_unit_test(test_request_alert),
        cmocka_unit_test(test_request_background), cmocka_unit_test(test_request_rejects),
        cmocka_unit_test(test_classify),
    };

    if (argc > 1)
        key_fixtures_dir = argv[1];
    return cmocka_run_group_tests(tests, NULL, NULL);
}
