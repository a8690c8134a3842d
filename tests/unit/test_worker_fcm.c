/* Unit tests of wk_fcm: service account, token assertion (verified with the
 * account's public key), token lifetime, message JSON and the answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <cmocka.h>

#include "hr_seams.h"
#include "key_fixtures.h"
#include "test_provider.h"
#include "hr_seams.h"
#include "wk_fcm.h"

#define NOW 1700000000

static wk_fcm_account *load_account(void)
{
    size_t len;
    char *json = key_fixtures_read("service_account.json", &len), err[256] = "";
    wk_fcm_account *a = NULL;

    assert_non_null(json);
    if (wk_fcm_account_parse(json, len, &a, err, sizeof err) != 0)
        fail_msg("%s", err);
    free(json);
    return a;
}

static void test_account(void **state)
{
    wk_fcm_account *a = load_account();
    hr_buf b;

    (void)state;
    assert_string_equal(a->project_id, "herald-test");
    assert_string_equal(a->client_email, "herald@herald-test.iam.gserviceaccount.com");
    assert_string_equal(a->token_uri, "https://oauth2.googleapis.com/token");
    hr_buf_init(&b, 256);
    assert_int_equal(wk_fcm_send_url(a, WK_FCM_BASE_URL, &b), 0);
    assert_string_equal(b.data, "https://fcm.googleapis.com/v1/projects/herald-test/messages:send");
    hr_buf_free(&b);
    wk_fcm_account_free(a);
}

static void test_account_rejects(void **state)
{
    char err[256], *ec = key_fixtures_read("ec.p8", NULL), *json, *rsa;
    wk_fcm_account *a = (wk_fcm_account *)1;
    cJSON *o;

    (void)state;
    assert_int_equal(wk_fcm_account_parse("[]", 2, &a, err, sizeof err), -1);
    assert_null(a);
    json = "{\"project_id\":\"p\",\"client_email\":\"e\",\"token_uri\":\"https://t\"}";
    assert_int_equal(wk_fcm_account_parse(json, strlen(json), &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "\"private_key\""));
    /* An EC key is no service-account key. */
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "project_id", "p");
    cJSON_AddStringToObject(o, "client_email", "e");
    cJSON_AddStringToObject(o, "token_uri", "https://t");
    cJSON_AddStringToObject(o, "private_key", ec);
    json = cJSON_PrintUnformatted(o);
    assert_int_equal(wk_fcm_account_parse(json, strlen(json), &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "not an RSA key"));
    free(json);
    cJSON_ReplaceItemInObject(o, "token_uri", cJSON_CreateString("file:///etc/passwd"));
    json = cJSON_PrintUnformatted(o);
    assert_int_equal(wk_fcm_account_parse(json, strlen(json), &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "token_uri"));
    free(json);
    /* http:// sends the signed assertion in clear text: only a build with
     * test seams takes it (for the stand-ins). */
    rsa = key_fixtures_read("rsa.pem", NULL);
    cJSON_ReplaceItemInObject(o, "private_key", cJSON_CreateString(rsa));
    cJSON_ReplaceItemInObject(o, "token_uri", cJSON_CreateString("http://127.0.0.1:1/token"));
    json = cJSON_PrintUnformatted(o);
    assert_int_equal(wk_fcm_account_parse(json, strlen(json), &a, err, sizeof err),
                     HR_SEAMS_ON ? 0 : -1);
    if (!HR_SEAMS_ON)
        assert_non_null(strstr(err, "https://"));
    wk_fcm_account_free(a);
    a = NULL;
    free(json);
    free(rsa);
    cJSON_Delete(o);
    free(ec);
}

static void test_token_request_assertion(void **state)
{
    static const char grant[] =
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=";
    wk_fcm_account *a = load_account();
    char err[256], *claims = NULL;
    cJSON *c;
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 8192);
    assert_int_equal(wk_fcm_token_request(a, NOW, &b, err, sizeof err), 0);
    assert_memory_equal(b.data, grant, sizeof grant - 1);
    assert_int_equal(
        key_fixtures_jwt_verify(b.data + sizeof grant - 1, "rsa_pub.pem", NULL, &claims), 0);
    c = cJSON_Parse(claims);
    assert_string_equal(cJSON_GetObjectItem(c, "iss")->valuestring, a->client_email);
    assert_string_equal(cJSON_GetObjectItem(c, "aud")->valuestring, a->token_uri);
    assert_string_equal(cJSON_GetObjectItem(c, "scope")->valuestring, WK_FCM_SCOPE);
    assert_int_equal((int64_t)cJSON_GetObjectItem(c, "iat")->valuedouble, NOW);
    assert_int_equal((int64_t)cJSON_GetObjectItem(c, "exp")->valuedouble, NOW + 3600);
    cJSON_Delete(c);
    free(claims);
    /* Over the cap: an error, OUT unchanged. */
    hr_buf_free(&b);
    hr_buf_init(&b, 100);
    assert_int_equal(wk_fcm_token_request(a, NOW, &b, err, sizeof err), -1);
    assert_int_equal(b.len, 0);
    hr_buf_free(&b);
    wk_fcm_account_free(a);
}

static void test_token_lifetime(void **state)
{
    static const char ok[] =
        "{\"access_token\":\"ya29.abc\",\"expires_in\":3599,\"token_type\":\"Bearer\"}";
    static const char brief[] = "{\"access_token\":\"ya29.def\",\"expires_in\":300}";
    wk_fcm_token t = {0};
    char err[256];

    (void)state;
    assert_true(wk_fcm_token_due(&t, NOW));
    assert_int_equal(wk_fcm_token_parse(200, ok, strlen(ok), NOW, &t, err, sizeof err), 0);
    assert_string_equal(t.access_token, "ya29.abc");
    assert_int_equal(t.expires_at_s, NOW + 3599);
    /* Refreshed five minutes before it lapses. */
    assert_false(wk_fcm_token_due(&t, NOW + 3599 - 301));
    assert_true(wk_fcm_token_due(&t, NOW + 3599 - 300));
    /* A short-lived token is refreshed half-way. */
    assert_int_equal(wk_fcm_token_parse(200, brief, strlen(brief), NOW, &t, err, sizeof err), 0);
    assert_string_equal(t.access_token, "ya29.def");
    assert_false(wk_fcm_token_due(&t, NOW + 149));
    assert_true(wk_fcm_token_due(&t, NOW + 150));
    /* After a 401 the token is dropped. */
    wk_fcm_token_clear(&t);
    assert_true(wk_fcm_token_due(&t, NOW));
    wk_fcm_token_clear(&t);
}

static void test_token_errors(void **state)
{
    static const char grant[] =
        "{\"error\":\"invalid_grant\",\"error_description\":\"Invalid JWT Signature.\"}";
    static const char *bad[] = {
        "{\"expires_in\":3599}",
        "{\"access_token\":\"x\"}",
        "{\"access_token\":\"x\",\"expires_in\":0}",
        "{\"access_token\":\"x\",\"expires_in\":3599,\"token_type\":\"MAC\"}",
        "not json",
    };
    wk_fcm_token t = {0};
    char err[256];

    (void)state;
    assert_int_equal(wk_fcm_token_parse(400, grant, strlen(grant), NOW, &t, err, sizeof err), -1);
    assert_string_equal(err, "token endpoint: HTTP 400 invalid_grant: Invalid JWT Signature.");
    assert_int_equal(wk_fcm_token_parse(503, "", 0, NOW, &t, err, sizeof err), -1);
    assert_string_equal(err, "token endpoint: HTTP 503");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(wk_fcm_token_parse(200, bad[i], strlen(bad[i]), NOW, &t, err, sizeof err),
                         -1);
    assert_null(t.access_token);
}

static cJSON *build(const wk_fcm_message *m)
{
    char err[256] = "";
    cJSON *root;
    hr_buf b;

    hr_buf_init(&b, 65536);
    if (wk_fcm_message_build(m, &b, err, sizeof err) != 0)
        fail_msg("%s", err);
    root = cJSON_Parse(b.data);
    assert_non_null(root);
    hr_buf_free(&b);
    return root;
}

static const char *path_str(const cJSON *root, const char *a, const char *b, const char *c)
{
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "message"), a);

    if (b != NULL)
        v = cJSON_GetObjectItem(v, b);
    if (c != NULL)
        v = cJSON_GetObjectItem(v, c);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_message_full(void **state)
{
    cJSON *payload = cJSON_Parse("{\"order\":\"A-1\",\"n\":42,\"ok\":true,\"o\":{\"x\":[1]}}");
    wk_fcm_message m = {
        .token = "tok-1",
        .title = "Hi \"you\"",
        .body = "Body ✓",
        .payload = payload,
        .ttl_s = 3600,
        .collapse_key = "news",
        .high_priority = true,
        .now_s = NOW,
    };
    cJSON *root = build(&m);

    (void)state;
    assert_string_equal(path_str(root, "token", NULL, NULL), "tok-1");
    assert_string_equal(path_str(root, "notification", "title", NULL), "Hi \"you\"");
    assert_string_equal(path_str(root, "notification", "body", NULL), "Body ✓");
    assert_string_equal(path_str(root, "data", "order", NULL), "A-1");
    assert_string_equal(path_str(root, "data", "n", NULL), "42");
    assert_string_equal(path_str(root, "data", "ok", NULL), "true");
    assert_string_equal(path_str(root, "data", "o", NULL), "{\"x\":[1]}");
    assert_string_equal(path_str(root, "android", "ttl", NULL), "3600s");
    assert_string_equal(path_str(root, "android", "collapse_key", NULL), "news");
    assert_string_equal(path_str(root, "android", "priority", NULL), "HIGH");
    assert_string_equal(path_str(root, "apns", "headers", "apns-priority"), "10");
    assert_string_equal(path_str(root, "apns", "headers", "apns-expiration"), "1700003600");
    assert_string_equal(path_str(root, "apns", "headers", "apns-collapse-id"), "news");
    cJSON_Delete(root);
    cJSON_Delete(payload);
}

static void test_message_minimal(void **state)
{
    wk_fcm_message m = {.token = "tok-2", .ttl_s = -1, .now_s = NOW};
    cJSON *root = build(&m);

    (void)state;
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "message"), "notification"));
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "message"), "data"));
    assert_null(path_str(root, "android", "ttl", NULL));
    assert_null(path_str(root, "apns", "headers", "apns-expiration"));
    assert_string_equal(path_str(root, "android", "priority", NULL), "NORMAL");
    assert_string_equal(path_str(root, "apns", "headers", "apns-priority"), "5");
    cJSON_Delete(root);
}

static void test_message_rejects(void **state)
{
    cJSON *reserved = cJSON_Parse("{\"google.x\":\"1\"}"), *arr = cJSON_Parse("[1]");
    wk_fcm_message m = {.token = "t", .ttl_s = -1};
    char err[256];
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 65536);
    m.payload = reserved;
    assert_int_equal(wk_fcm_message_build(&m, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "reserved"));
    m.payload = arr;
    assert_int_equal(wk_fcm_message_build(&m, &b, err, sizeof err), -1);
    m.payload = NULL;
    m.ttl_s = WK_FCM_TTL_MAX_S + 1;
    assert_int_equal(wk_fcm_message_build(&m, &b, err, sizeof err), -1);
    m.ttl_s = -1;
    m.collapse_key = "0123456789012345678901234567890123456789012345678901234567890123456789";
    assert_int_equal(wk_fcm_message_build(&m, &b, err, sizeof err), -1);
    m.collapse_key = NULL;
    m.token = "";
    assert_int_equal(wk_fcm_message_build(&m, &b, err, sizeof err), -1);
    assert_int_equal(b.len, 0);
    hr_buf_free(&b);
    cJSON_Delete(reserved);
    cJSON_Delete(arr);
}

static void test_classify(void **state)
{
    static const test_provider_case cases[] = {
        {200, "{\"name\":\"projects/p/messages/1\"}", -1, WK_VERDICT_DELIVERED, "200"},
        {404,
         "{\"error\":{\"code\":404,\"status\":\"NOT_FOUND\",\"details\":[{\"@type\":"
         "\"type.googleapis.com/google.firebase.fcm.v1.FcmError\",\"errorCode\":"
         "\"UNREGISTERED\"}]}}",
         -1, WK_VERDICT_UNREGISTERED, "404 UNREGISTERED"},
        {400,
         "{\"error\":{\"code\":400,\"status\":\"INVALID_ARGUMENT\",\"details\":[{\"@type\":"
         "\"type.googleapis.com/google.firebase.fcm.v1.FcmError\",\"errorCode\":"
         "\"INVALID_ARGUMENT\"},{\"@type\":\"type.googleapis.com/google.rpc.BadRequest\","
         "\"fieldViolations\":[{\"field\":\"message.token\",\"description\":\"bad\"}]}]}}",
         -1, WK_VERDICT_UNREGISTERED, "400 INVALID_ARGUMENT"},
        /* A bad message (not the token) is no reason to drop the address. */
        {400,
         "{\"error\":{\"code\":400,\"status\":\"INVALID_ARGUMENT\",\"details\":[{\"@type\":"
         "\"type.googleapis.com/google.rpc.BadRequest\",\"fieldViolations\":[{\"field\":"
         "\"message.android.ttl\"}]}]}}",
         -1, WK_VERDICT_FAILED, "400 INVALID_ARGUMENT"},
        {401, "{\"error\":{\"code\":401,\"status\":\"UNAUTHENTICATED\"}}", -1, WK_VERDICT_REFRESH,
         "401 UNAUTHENTICATED"},
        {401,
         "{\"error\":{\"status\":\"UNAUTHENTICATED\",\"details\":[{\"errorCode\":"
         "\"THIRD_PARTY_AUTH_ERROR\"}]}}",
         -1, WK_VERDICT_FAILED, "401 THIRD_PARTY_AUTH_ERROR"},
        {429,
         "{\"error\":{\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"errorCode\":"
         "\"QUOTA_EXCEEDED\"}]}}",
         30, WK_VERDICT_SLOWDOWN, "429 QUOTA_EXCEEDED"},
        {503, "{\"error\":{\"status\":\"UNAVAILABLE\"}}", 10, WK_VERDICT_SLOWDOWN,
         "503 UNAVAILABLE"},
        {503, "{\"error\":{\"status\":\"UNAVAILABLE\"}}", -1, WK_VERDICT_RETRY, "503 UNAVAILABLE"},
        {500, "<html>oops</html>", -1, WK_VERDICT_RETRY, "500"},
        {403,
         "{\"error\":{\"status\":\"PERMISSION_DENIED\",\"details\":[{\"errorCode\":"
         "\"SENDER_ID_MISMATCH\"}]}}",
         -1, WK_VERDICT_FAILED, "403 SENDER_ID_MISMATCH"},
        {404, "", -1, WK_VERDICT_UNREGISTERED, "404"},
    };

    (void)state;
    test_provider_check(wk_fcm_classify, cases, sizeof cases / sizeof cases[0]);
}

/* The reasons every provider's verdict carries, written without printf:
 * the prefix, the status, the code after one space, cut to the field. */
static void test_reason(void **state)
{
    wk_provider_result r;
    char code[300];

    (void)state;
    wk_provider_set(&r, WK_VERDICT_FAILED, 404, "UNREGISTERED");
    assert_string_equal(r.reason, "404 UNREGISTERED");
    assert_int_equal(r.retry_after_s, -1);
    wk_provider_set(&r, WK_VERDICT_DELIVERED, 200, "");
    assert_string_equal(r.reason, "200");
    wk_provider_reason(&r, "http ", 0, NULL);
    assert_string_equal(r.reason, "http 0");
    wk_provider_reason(&r, "", -7, "x");
    assert_string_equal(r.reason, "-7 x");
    memset(code, 'c', sizeof code - 1);
    code[sizeof code - 1] = '\0';
    wk_provider_reason(&r, "http ", 503, code);
    assert_int_equal(strlen(r.reason), sizeof r.reason - 1);
    assert_memory_equal(r.reason, "http 503 ccc", 12);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reason),          cmocka_unit_test(test_account),
        cmocka_unit_test(test_account_rejects), cmocka_unit_test(test_token_request_assertion),
        cmocka_unit_test(test_token_lifetime),  cmocka_unit_test(test_token_errors),
        cmocka_unit_test(test_message_full),    cmocka_unit_test(test_message_minimal),
        cmocka_unit_test(test_message_rejects), cmocka_unit_test(test_classify),
    };

    if (argc > 1)
        key_fixtures_dir = argv[1];
    return cmocka_run_group_tests(tests, NULL, NULL);
}
