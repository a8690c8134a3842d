/* test_provider: runs a provider's classify function over a table of rows. */
#include "test_provider.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

void test_provider_check(test_provider_classify_fn classify, const test_provider_case *cases,
                         size_t n)
{
    wk_provider_result r;

    for (size_t i = 0; i < n; i++) {
        const test_provider_case *c = &cases[i];
        classify(c->status, c->body, strlen(c->body), c->retry_after_s, &r);
        if (r.verdict != c->want || strcmp(r.reason, c->reason) != 0 ||
            (r.verdict == WK_VERDICT_SLOWDOWN && r.retry_after_s != c->retry_after_s))
            fail_msg("row %zu (HTTP %ld): verdict %d reason \"%s\"", i, c->status, (int)r.verdict,
                     r.reason);
    }
}
