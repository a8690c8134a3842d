/* test_shard: the pure arithmetic of sharded tasks (common/hr_shard.h):
 * CRC-32 against known values (zlib's and MySQL's CRC32() give the same,
 * which the integration test checks against MySQL itself), the spread of
 * uids over shards, chunk numbers striped per shard, S from a task's
 * expected size, and the ordering of a batch by shard. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hr_shard.h"

static void test_crc32(void **state)
{
    static const struct {
        const char *s;
        uint32_t crc;
    } known[] = {
        /* The CRC-32 check value, then zlib.crc32 of decimal uids. */
        {"123456789", 0xcbf43926u},
        {"1", 2212294583u},
        {"7", 1790921346u},
        {"42", 841265288u},
        {"1000000", 469554653u},
        {"", 0u},
        {"9223372036854775807", 1122634462u},
    };

    (void)state;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        assert_int_equal(hr_shard_crc32(known[i].s, strlen(known[i].s)), known[i].crc);
    assert_int_equal(hr_shard_of(42, 7), (int)(841265288u % 7));
    assert_int_equal(hr_shard_of_str("42", 7), hr_shard_of(42, 7));
    assert_int_equal(hr_shard_of(123456789, 1), 0);
    assert_int_equal(hr_shard_of(123456789, 0), 0);
}

/* Each shard gets its share, for sequential uids (what an import of a user
 * table gives) and for scattered ones, within what chance allows: 6
 * standard deviations of a fair draw (n/S each, sd sqrt(n/S)), at least
 * 2 %. */
static void test_spread(void **state)
{
    static const int sizes[] = {2, 3, 7, 16, 64, 256};
    static int64_t count[HR_SHARDS_MAX];

    (void)state;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        for (int pass = 0; pass < 2; pass++) {
            const int n = 1000000, shards = sizes[s];
            uint64_t x = 88172645463325252ull;

            memset(count, 0, sizeof count);
            for (int i = 1; i <= n; i++) {
                uint64_t uid = (uint64_t)i;

                if (pass == 1) { /* xorshift64: scattered uids */
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    uid = x >> 1;
                }
                count[hr_shard_of(uid, shards)]++;
            }
            for (int k = 0; k < shards; k++) {
                double mean = (double)n / shards, share = (double)count[k] / mean;
                double tol = 6.0 / sqrt(mean) > 0.02 ? 6.0 / sqrt(mean) : 0.02;

                if (share < 1.0 - tol || share > 1.0 + tol)
                    fail_msg("shards %d pass %d: shard %d has %.3f of its share", shards, pass, k,
                             share);
            }
        }
    }
}

/* Chunk numbers: unique across shards, the identity for one shard, and
 * back to their shard and count. */
static void test_seq(void **state)
{
    static uint8_t seen[10 * 1000 + 1];

    (void)state;
    for (int shards = 1; shards <= 10; shards++) {
        memset(seen, 0, sizeof seen);
        for (int k = 0; k < shards; k++) {
            for (int64_t n = 1; n <= 1000; n++) {
                int64_t seq = hr_shard_seq(shards, k, n);

                assert_true(seq >= 1 && seq <= 10 * 1000);
                assert_int_equal(seen[seq], 0);
                seen[seq] = 1;
                assert_int_equal(hr_shard_of_seq(shards, seq), k);
                assert_int_equal(hr_shard_count_of_seq(shards, seq), n);
                if (shards == 1)
                    assert_int_equal(seq, n);
            }
        }
    }
    assert_int_equal(hr_shard_count_of_seq(4, 0), 0);
}

static void test_for_size(void **state)
{
    (void)state;
    assert_int_equal(hr_shard_for_size(1), 1);
    assert_int_equal(hr_shard_for_size(HR_SHARD_RECIPIENTS), 1);
    assert_int_equal(hr_shard_for_size(HR_SHARD_RECIPIENTS + 1), 2);
    assert_int_equal(hr_shard_for_size((int64_t)10 * HR_SHARD_RECIPIENTS), 10);
    assert_int_equal(hr_shard_for_size(INT64_MAX / 2), HR_SHARDS_MAX);
    assert_int_equal(hr_shard_row(1, 0), HR_SHARD_NONE);
    assert_int_equal(hr_shard_row(4, 0), 0);
    assert_int_equal(hr_shard_row(4, 3), 3);
}

/* A batch ordered by shard: every uid once, in its shard's range, in
 * input order within it. */
static void test_sort(void **state)
{
    enum { N = 1000, S = 7 };
    static char text[N][24];
    const char *uids[N], *sorted[N];
    size_t bounds[S + 1];

    (void)state;
    for (int i = 0; i < N; i++) {
        snprintf(text[i], sizeof text[i], "%d", 1000 + 37 * i);
        uids[i] = text[i];
    }
    assert_int_equal(hr_shard_sort(uids, N, S, sorted, bounds), 0);
    assert_int_equal(bounds[0], 0);
    assert_int_equal(bounds[S], N);
    for (int k = 0; k < S; k++) {
        const char *last = NULL;

        for (size_t i = bounds[k]; i < bounds[k + 1]; i++) {
            assert_int_equal(hr_shard_of_str(sorted[i], S), k);
            assert_true(last == NULL || last < sorted[i]); /* input order kept */
            last = sorted[i];
        }
    }
    assert_int_equal(hr_shard_sort(uids, N, 1, sorted, bounds), 0);
    assert_int_equal(bounds[1], N);
    assert_ptr_equal(sorted[N - 1], uids[N - 1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32),    cmocka_unit_test(test_spread), cmocka_unit_test(test_seq),
        cmocka_unit_test(test_for_size), cmocka_unit_test(test_sort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
