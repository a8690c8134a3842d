/* test_provider: the table-driven check the provider unit tests share: a
 * classify function run over rows of (status, body, Retry-After) and the
 * verdict and reason each must give. */
#ifndef TEST_PROVIDER_H
#define TEST_PROVIDER_H

#include <stddef.h>

#include "wk_provider.h"

typedef struct test_provider_case {
    long status;
    const char *body;
    long retry_after_s;
    wk_verdict want;
    const char *reason;
} test_provider_case;

typedef void (*test_provider_classify_fn)(long status, const char *body, size_t len,
                                          long retry_after_s, wk_provider_result *out);

/* Fails the running cmocka test at the first row CLASSIFY answers otherwise
 * (a SLOWDOWN must also carry the row's Retry-After). */
void test_provider_check(test_provider_classify_fn classify, const test_provider_case *cases,
                         size_t n);

#endif
