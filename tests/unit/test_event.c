/* Unit tests of hr_event: the events topic's value as schemas/kafka/
 * event.v1.json describes it (exact bytes for a sent and a clicked event),
 * the id, the type table, the address hash (a python3 hashlib vector).
 * With --print it writes one event of every type, a line each, for
 * tests/unit/test_event_schema.py to validate against the schema. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hr_event.h"

/* sha256("u1@example.org") */
#define HASH_HEX "13f892f137ab674ff6b23203739fa91a48ac57b8b02636d7cfdfead9b454c01c"

static void hex(const unsigned char *h, char *out)
{
    for (int i = 0; i < HR_EVENT_HASH_LEN; i++)
        sprintf(out + 2 * i, "%02x", h[i]);
}

static void test_encode_sent(void **state)
{
    hr_event ev = {.type = HR_EVENT_SENT,
                   .task = 42,
                   .uid = 1007,
                   .channel = "mail",
                   .provider_status = 250,
                   .attempt = 1,
                   .at_ms = 1767225601234,
                   .due_ms = 1767225600000};
    hr_buf b;

    (void)state;
    hr_event_hash("u1@example.org", 14, ev.address_hash);
    ev.has_hash = true;
    hr_buf_init(&b, HR_EVENT_MAX_BYTES);
    assert_int_equal(hr_event_encode(&ev, &b), 0);
    assert_string_equal(b.data,
                        "{\"v\":1,\"id\":\"42-1007-sent\",\"type\":\"sent\",\"kind\":\"outcome\","
                        "\"task\":42,\"series\":null,\"uid\":1007,\"channel\":\"mail\","
                        "\"address_hash\":\"" HASH_HEX "\",\"provider_status\":250,"
                        "\"attempt\":1,\"at_ms\":1767225601234,\"due_ms\":1767225600000,"
                        "\"url\":null}");
    hr_buf_free(&b);
}

static void test_encode_clicked(void **state)
{
    hr_event ev = {.type = HR_EVENT_CLICKED,
                   .task = 7,
                   .series = 3,
                   .uid = 9,
                   .channel = "m\"x",
                   .at_ms = 5,
                   .url = "https://e.com/?a=\"b\""};
    hr_buf b;

    (void)state;
    hr_buf_init(&b, HR_EVENT_MAX_BYTES);
    assert_int_equal(hr_event_encode(&ev, &b), 0);
    assert_string_equal(b.data, "{\"v\":1,\"id\":\"7-9-clicked\",\"type\":\"clicked\","
                                "\"kind\":\"engagement\",\"task\":7,\"series\":3,\"uid\":9,"
                                "\"channel\":\"m\\\"x\",\"address_hash\":null,"
                                "\"provider_status\":null,\"attempt\":0,\"at_ms\":5,"
                                "\"due_ms\":null,\"url\":\"https://e.com/?a=\\\"b\\\"\"}");
    hr_buf_free(&b);
}

static void test_encode_cap(void **state)
{
    hr_event ev = {.type = HR_EVENT_SENT, .task = 1, .uid = 1, .channel = "c"};
    hr_buf b;

    (void)state;
    hr_buf_init(&b, 40);
    assert_int_equal(hr_buf_append(&b, "x", 1), 0);
    assert_int_equal(hr_event_encode(&ev, &b), -1);
    assert_int_equal(b.len, 1); /* unchanged */
    ev.type = HR_EVENT__TYPES;
    assert_int_equal(hr_event_encode(&ev, &b), -1);
    hr_buf_free(&b);
}

static void test_types(void **state)
{
    hr_event_type t;

    (void)state;
    for (int i = 0; i < HR_EVENT__TYPES; i++) {
        const char *name = hr_event_type_name((hr_event_type)i);

        assert_non_null(name);
        assert_int_equal(hr_event_type_parse(name, strlen(name), &t), 0);
        assert_int_equal(t, i);
    }
    assert_int_equal(hr_event_type_parse("opted_outx", 10, &t), -1);
    assert_int_equal(hr_event_type_parse("opted_out", 9, &t), 0);
    assert_int_equal(t, HR_EVENT_OPTED_OUT);
    assert_int_equal(hr_event_type_kind(HR_EVENT_SUPPRESSED), HR_EVENT_OUTCOME);
    assert_int_equal(hr_event_type_parse("sentx", 4, &t), 0); /* the length counts */
    assert_int_equal(t, HR_EVENT_SENT);
    assert_null(hr_event_type_name(HR_EVENT__TYPES));
    assert_int_equal(hr_event_type_kind(HR_EVENT_OPENED), HR_EVENT_ENGAGEMENT);
    assert_int_equal(hr_event_type_kind(HR_EVENT_PULLED), HR_EVENT_OUTCOME);
}

static void test_hash(void **state)
{
    unsigned char h[HR_EVENT_HASH_LEN];
    char text[2 * HR_EVENT_HASH_LEN + 1];

    (void)state;
    hr_event_hash("u1@example.org", 14, h);
    hex(h, text);
    assert_string_equal(text, HASH_HEX);
}

/* One event of every type, a line each (for the schema test). */
static int print_all(void)
{
    for (int i = 0; i < HR_EVENT__TYPES; i++) {
        hr_event ev = {.type = (hr_event_type)i,
                       .task = 100 + i,
                       .uid = 9000000000000000000ULL + (uint64_t)i,
                       .channel = "webhook",
                       .provider_status = i % 2 ? 0 : 200,
                       .attempt = i,
                       .at_ms = 1767225600000 + i,
                       .due_ms = i % 3 ? 1767225600000 : 0,
                       .url = i == HR_EVENT_CLICKED ? "https://example.com/x" : NULL};
        hr_buf b;

        ev.has_hash = i % 2 == 0;
        hr_event_hash("token", 5, ev.address_hash);
        hr_buf_init(&b, HR_EVENT_MAX_BYTES);
        if (hr_event_encode(&ev, &b) != 0)
            return 1;
        printf("%s\n", b.data);
        hr_buf_free(&b);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_sent), cmocka_unit_test(test_encode_clicked),
        cmocka_unit_test(test_encode_cap),  cmocka_unit_test(test_types),
        cmocka_unit_test(test_hash),
    };

    if (argc == 2 && strcmp(argv[1], "--print") == 0)
        return print_all();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
