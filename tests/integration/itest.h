/* itest: shared helpers for herald's integration tests.
 *
 * Every integration test runs against the servers of the local stack named
 * by $HERALD_TEST_CONFIG (a herald.yaml) next to other tests, so it isolates
 * itself: itest_config() returns that config with a Redis key prefix
 * "hrtest:<pid>:<rand>:", a Kafka topic "herald.test.<pid>.<rand>" and a
 * consumer group "herald-test-<pid>-<rand>" of its own (the same three
 * values for every call within one process).
 *
 * Typical test:
 *
 *     hr_config *cfg = itest_config();            // exits 77 when unset
 *     assert_int_equal(itest_create_topic(cfg), 0);
 *     ... hr_redis_connect(cfg, ...), hr_kafka_conf_new(cfg, ...) ...
 *     itest_redis_cleanup(cfg);
 *     hr_config_free(cfg);
 *
 * Tests that run the daemons change fields of their config (itest_set_str
 * for strings), write it with itest_write_config() and start the binary
 * with itest_spawn(); they stop it with itest_kill() + itest_wait_exit().
 * Every wait here is bounded. */
#ifndef ITEST_H
#define ITEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <librdkafka/rdkafka.h>

#include "hr_config.h"
#include "hr_mysql.h"
#include "hr_redis.h"

/* $HERALD_TEST_CONFIG made unique for this process; the caller owns it
 * (hr_config_free).  Exits 77 (skipped) when the variable is unset and 1
 * when the file does not load, printing why on stderr. */
hr_config *itest_config(void);
/* The same file as it is, unchanged (the real topic, group and prefix). */
hr_config *itest_config_shared(void);

/* Replaces the malloc'ed string *FIELD of a config with a copy of VALUE. */
void itest_set_str(char **field, const char *value);

/* Wall clock in milliseconds since the epoch. */
int64_t itest_now_ms(void);

/* N distinct loopback TCP ports free now into PORTS, for servers a test
 * spawns, from `python3 tests/lib/herald_test/procs.py N`: the kernel picks
 * them (bind to port 0), and the registry all test processes share keeps
 * any other test from being handed one of them for a few minutes.  Exits 1
 * after printing when the helper fails. */
void itest_free_ports(int *ports, size_t n);

/* Calls FN(CTX) every 20 ms until it returns true (→ true) or TIMEOUT_MS
 * passed (→ false). */
bool itest_wait_until(bool (*fn)(void *ctx), void *ctx, int timeout_ms);

/* Creates cfg->kafka.topic with 12 partitions (exists = fine), waiting at
 * most 30 s.  0, or -1 after printing the reason. */
int itest_create_topic(const hr_config *cfg);

/* A consumer of cfg's group subscribed to cfg->kafka.topic, returned once
 * the group assigned it partitions (at most TIMEOUT_MS; the messages its
 * polls met meanwhile are dropped).  NULL after printing the reason. */
rd_kafka_t *itest_consumer_join(const hr_config *cfg, int timeout_ms);

/* Marks the recipients' profile book as synced in R's prefix (the mark a
 * dispatcher's sync sets; docs/recipients.md): a test that runs workers
 * without a dispatcher pushes with an empty book instead of waiting for a
 * sync that never comes.  0, or -1 after printing the reason. */
int itest_profiles_synced(hr_redis *r);
/* Deletes every Redis key under cfg->redis.prefix (SCAN + DEL, at most
 * 10,000 SCAN rounds).  Returns the number deleted or -1 after printing. */
long itest_redis_cleanup(const hr_config *cfg);

/* The cmocka setup and teardown of a test that needs one Redis connection
 * under its own prefix: *CFG = itest_config(), *RD connected (setup returns
 * -1 after printing when it cannot connect); teardown frees both and
 * deletes the prefix's keys. */
int itest_redis_setup(hr_config **cfg, hr_redis **rd);
void itest_redis_teardown(hr_config *cfg, hr_redis *rd);

/* itest_redis_setup, then *DB connected to the stack's MariaDB with the
 * migrations applied (the shared database's schema, idempotently): the
 * setup of a test of both stores.  0, or -1 after printing. */
int itest_stores_setup(hr_config **cfg, hr_redis **rd, hr_mysql **db);
/* Deletes DB's rows of TABLE whose uid is in FIRST..LAST (a test's range),
 * frees DB and tears the Redis side down (itest_redis_teardown). */
void itest_stores_teardown(hr_config *cfg, hr_redis *rd, hr_mysql *db, const char *table,
                           int64_t first, int64_t last);
/* Column COL of the first row of SQL's answer on DB, as an integer; -1
 * after printing when the query fails or answers no such cell. */
int64_t itest_sql_i64(hr_mysql *db, const char *sql, size_t col);
/* Runs the statement SQL with its N parameters P on DB.  0, or -1 after
 * printing. */
int itest_sql_exec(hr_mysql *db, const char *sql, const hr_mysql_param *p, size_t n);

/* Writes CFG as a complete herald.yaml into a new temporary file whose
 * path goes to PATH (the caller unlinks it).  0, or -1 after printing.
 * String values are emitted double-quoted; a value holding "${" would be
 * expanded again by the loader, so tests must not use one. */
int itest_write_config(const hr_config *cfg, char *path, size_t len);

/* Starts ARGV[0] (searched in PATH) with ARGV, stdout and stderr appended
 * to LOGFILE (NULL = inherited).  The child's pid, or -1. */
pid_t itest_spawn(char *const argv[], const char *logfile);
/* kill(PID, SIG); 0 or -1. */
int itest_kill(pid_t pid, int sig);
/* Waits at most TIMEOUT_MS for PID to exit; 0 with its wait status in
 * *STATUS (may be NULL), or -1 when it is still running. */
int itest_wait_exit(pid_t pid, int timeout_ms, int *status);

#endif
