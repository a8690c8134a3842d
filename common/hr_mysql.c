/* hr_mysql: one MariaDB connection, prepared statements, migrations.
 *
 * An hr_mysql owns a MYSQL handle, a copy of the connection settings (so a
 * reconnect does not depend on the caller's hr_config staying alive) and a
 * small cache of prepared statements keyed by their SQL text: the daemons
 * run the same few statements thousands of times, and preparing each time
 * would double the round trips.  The cache holds at most
 * HR_MYSQL_STMT_CACHE statements and evicts the least recently used.
 *
 * Reconnection is done here rather than by libmariadb's MYSQL_OPT_RECONNECT,
 * which silently reconnects without the session settings (time zone, SQL
 * mode).  A statement that fails with "server gone" / "lost connection" is
 * retried once on a fresh connection, but only when the session holds no
 * state that a reconnect would lose: an open transaction or the migration
 * lock.  Inside those the error goes to the caller, who rolls back.
 *
 * Result cells are fetched as strings, a result set whole
 * (hr_mysql_rows.c).
 *
 * With mysql.tls.enabled every connection is TLS or fails.  The server's
 * certificate chain and host name are verified against ca_file (or the
 * system's trust store), and libmariadb then refuses a server that does not
 * offer TLS before authenticating.  With mysql.tls.verify false nothing is
 * verified (ca_file is not given to the library: it would check the chain
 * anyway), and libmariadb 3.3 would go on in clear with a server without
 * TLS, so the session's cipher is checked after the connection and a
 * connection without one is closed and refused.
 *
 * Every network read and write of a connection waits at most
 * mysql.timeout_s (libmariadb's read and write timeouts; the connect has
 * its own connect_timeout_s), so a server that stops answering (a black
 * hole, a stalled primary) costs a call that long and no more: a call the
 * timeout ended is not run again on a new connection here (the caller
 * retries after its own back-off), and the session's row lock waits end
 * first (innodb_lock_wait_timeout below the timeout), so that a lock wait
 * fails as the server's lock-wait error rather than as a dropped
 * connection.  Every call is handed to hr_mysql_watch_note
 * (hr_mysql_watch.c: the metrics and the slow hook); that module never
 * calls back here. */
#include "hr_mysql.h"

#include <errmsg.h>
#include <inttypes.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "hr_civil.h"
#include "hr_clock.h"
#include "hr_mysql_rows.h"
#include "hr_mysql_watch.h"
#include "hr_seams.h"
#include "hr_vec.h"

#define HR_MYSQL_STMT_CACHE 32
/* A statement of more parameters is big: its bindings take about 110 bytes
 * a parameter in hr_mysql and as much again in libmariadb (the delivery
 * log's 1,000-row INSERT: 7,000, about 1.5 MB).  A big one unused for
 * HR_MYSQL_BIG_IDLE_MS is closed, and the bindings' arrays are given back
 * once no big one is left: a backlog's batch sizes (the reporter after a
 * MySQL outage) used to keep their memory for the process's life, +1.3 MB
 * of a worker's 17 MB in the soak. */
#define HR_MYSQL_BIG_PARAMS 1024
#define HR_MYSQL_BIG_IDLE_MS 60000
/* A failed call that took this close to the timeout was ended by it. */
#define HR_MYSQL_TIMEOUT_SLACK_MS 100

/* The session settings; %u: the row lock wait (innodb_lock_wait_timeout)
 * at most, a second under the read timeout. */
static const char hr_mysql_session_fmt[] =
    "SET time_zone = '+00:00', SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,"
    "NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION', "
    "SESSION innodb_lock_wait_timeout = LEAST(@@innodb_lock_wait_timeout, %u)";

typedef struct hr_mysql_cached {
    char *sql;
    MYSQL_STMT *stmt;
    uint64_t used;   /* value of hr_mysql.tick at the last use */
    int64_t used_ms; /* monotonic: the last use */
    unsigned long nparams;
} hr_mysql_cached;

struct hr_mysql {
    MYSQL *conn;
    char *host, *user, *password, *database;
    unsigned port;
    unsigned connect_timeout_s, timeout_s;
    bool tls, tls_verify;
    char *tls_ca, *tls_cert, *tls_key; /* NULL: not given */
    bool in_txn;                       /* between hr_mysql_begin and commit/rollback */
    int depth;                         /* hr_mysql_begin calls not yet ended; > 1: savepoints */
    bool locked;                       /* holds a named lock (hr_mysql_set_locked) */
    unsigned idle_txn_s;               /* hr_mysql_limit_idle_txn: 0, or the server's limit */
    unsigned last_err;                 /* server error of the last statement, 0 if it ran */
    uint64_t tick;
    HR_VEC(MYSQL_BIND) binds;   /* parameter bindings, reused */
    HR_VEC(unsigned long) lens; /* their lengths */
    HR_VEC(MYSQL_TIME) times;   /* the HR_MYSQL_TIME_MS values, by parameter */
    HR_VEC(char) inds;          /* an array binding's NULL indicators, by column */
    hr_mysql_cached cache[HR_MYSQL_STMT_CACHE];
    size_t ncache;
};

static pthread_once_t hr_mysql_lib_once = PTHREAD_ONCE_INIT;
static int hr_mysql_lib_rc;

/* mysql_init() initializes the library on first use, which is not
 * thread-safe; daemons connect from several threads. */
static void hr_mysql_lib_init(void)
{
    hr_mysql_lib_rc = mysql_library_init(0, NULL, NULL);
}

static void hr_mysql_seterr(char *errstr, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void hr_mysql_seterr(char *errstr, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (!errstr || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(errstr, errlen, fmt, ap);
    va_end(ap);
}

static bool hr_mysql_gone(unsigned err)
{
    return err == CR_SERVER_GONE_ERROR || err == CR_SERVER_LOST;
}

/* Whether a call that failed with ERR after MS was ended by M's timeout. */
static bool hr_mysql_timed_out(const hr_mysql *m, unsigned err, int64_t ms)
{
    return hr_mysql_gone(err) && ms + HR_MYSQL_TIMEOUT_SLACK_MS >= (int64_t)m->timeout_s * 1000;
}

/* A call of M (SQL) that began at START (monotonic ms) and ended with RC
 * and ERR: handed to the watch; a timeout's ERRSTR says so.  Whether the
 * timeout ended it. */
static bool hr_mysql_note(const hr_mysql *m, const char *sql, int64_t start, int rc, unsigned err,
                          char *errstr, size_t errlen)
{
    int64_t ms = hr_clock_mono_ms() - start;
    bool timed_out = rc != 0 && hr_mysql_timed_out(m, err, ms);

    if (timed_out && errstr != NULL && errlen > 0) {
        size_t len = strlen(errstr);

        snprintf(errstr + len, errlen - len, " (no answer within mysql.timeout_s = %u s)",
                 m->timeout_s);
    }
    hr_mysql_watch_note(sql, m->host, m->port, ms, timed_out);
    return timed_out;
}

/* Sets CONN's idle_write_transaction_timeout to S seconds.  0 or nonzero
 * (mysql_error). */
static int hr_mysql_idle_txn_set(MYSQL *conn, unsigned s)
{
    char sql[64];
    int len = snprintf(sql, sizeof sql, "SET SESSION idle_write_transaction_timeout = %u", s);

    return mysql_real_query(conn, sql, (unsigned long)len);
}

/* Opens a new MYSQL handle with herald's options and session settings. */
static MYSQL *hr_mysql_open(const hr_mysql *m, char *errstr, size_t errlen)
{
    unsigned int connect_timeout = m->connect_timeout_s, io_timeout = m->timeout_s;
    my_bool reconnect = 0;
    MYSQL *conn = mysql_init(NULL);
    char session[sizeof hr_mysql_session_fmt + 16];
    int len = snprintf(session, sizeof session, hr_mysql_session_fmt,
                       m->timeout_s > 1 ? m->timeout_s - 1 : 1);

    if (!conn) {
        hr_mysql_seterr(errstr, errlen, "mysql: out of memory");
        return NULL;
    }
    mysql_options(conn, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout);
    mysql_options(conn, MYSQL_OPT_READ_TIMEOUT, &io_timeout);
    mysql_options(conn, MYSQL_OPT_WRITE_TIMEOUT, &io_timeout);
    mysql_options(conn, MYSQL_OPT_RECONNECT, &reconnect);
    mysql_options(conn, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (m->tls) {
        my_bool enforce = 1, verify = m->tls_verify;
        mysql_options(conn, MYSQL_OPT_SSL_ENFORCE, &enforce);
        mysql_options(conn, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
        if (m->tls_ca != NULL && m->tls_verify)
            mysql_options(conn, MYSQL_OPT_SSL_CA, m->tls_ca);
        if (m->tls_cert != NULL) {
            mysql_options(conn, MYSQL_OPT_SSL_CERT, m->tls_cert);
            mysql_options(conn, MYSQL_OPT_SSL_KEY, m->tls_key);
        }
    }
    if (!mysql_real_connect(conn, m->host, m->user, m->password, m->database, m->port, NULL,
                            CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS)) {
        hr_mysql_seterr(errstr, errlen, "mysql %s:%u%s: %s", m->host, m->port,
                        !m->tls         ? ""
                        : m->tls_verify ? " (TLS, verifying the server's certificate)"
                                        : " (TLS, verify off)",
                        mysql_error(conn));
        goto fail;
    }
    if (m->tls && mysql_get_ssl_cipher(conn) == NULL) {
        hr_mysql_seterr(errstr, errlen,
                        "mysql %s:%u: mysql.tls is enabled but the server did not offer TLS",
                        m->host, m->port);
        goto fail;
    }
    if (mysql_real_query(conn, session, (unsigned long)len) != 0) {
        hr_mysql_seterr(errstr, errlen, "mysql %s:%u: session settings: %s", m->host, m->port,
                        mysql_error(conn));
        goto fail;
    }
    if (m->idle_txn_s > 0 && hr_mysql_idle_txn_set(conn, m->idle_txn_s) != 0) {
        hr_mysql_seterr(errstr, errlen, "mysql %s:%u: idle_write_transaction_timeout: %s", m->host,
                        m->port, mysql_error(conn));
        goto fail;
    }
    return conn;

fail:
    mysql_close(conn);
    return NULL;
}

static void hr_mysql_cache_remove(hr_mysql *m, size_t i)
{
    mysql_stmt_close(m->cache[i].stmt);
    free(m->cache[i].sql);
    m->cache[i] = m->cache[--m->ncache];
}

static void hr_mysql_cache_clear(hr_mysql *m)
{
    while (m->ncache > 0)
        hr_mysql_cache_remove(m, m->ncache - 1);
}

/* Drops STMT from the cache after a client-side error left it unusable. */
static void hr_mysql_cache_drop(hr_mysql *m, MYSQL_STMT *stmt)
{
    for (size_t i = 0; i < m->ncache; i++) {
        if (m->cache[i].stmt == stmt) {
            hr_mysql_cache_remove(m, i);
            return;
        }
    }
}

/* Replaces the connection; prepared statements die with the old one.  On
 * failure the old (dead) handle stays so that the next statement fails with
 * "server gone" and tries again. */
static int hr_mysql_reconnect(hr_mysql *m, char *errstr, size_t errlen)
{
    MYSQL *conn = hr_mysql_open(m, errstr, errlen);

    if (!conn)
        return -1;
    hr_mysql_cache_clear(m);
    mysql_close(m->conn);
    m->conn = conn;
    return 0;
}

/* A copy of the file name PATH into *OUT, NULL when none is given. */
static int hr_mysql_dup_file(const char *path, char **out)
{
    *out = path != NULL && path[0] != '\0' ? strdup(path) : NULL;
    return path != NULL && path[0] != '\0' && *out == NULL ? -1 : 0;
}

int hr_mysql_limit_idle_txn(hr_mysql *m, char *errstr, size_t errlen)
{
    /* Half the lock wait the other sessions have (the session settings:
     * a second under timeout_s), so a waiter gets the rows before its own
     * wait ends. */
    unsigned wait_s = m->timeout_s > 1 ? m->timeout_s - 1 : 1;

    m->idle_txn_s = wait_s / 2 > 0 ? wait_s / 2 : 1;
    if (hr_mysql_idle_txn_set(m->conn, m->idle_txn_s) != 0) {
        hr_mysql_seterr(errstr, errlen, "mysql %s:%u: idle_write_transaction_timeout: %s", m->host,
                        m->port, mysql_error(m->conn));
        return -1;
    }
    return 0;
}

int hr_mysql_connect(const hr_config *cfg, hr_mysql **out, char *errstr, size_t errlen)
{
    hr_mysql *m = NULL;

    *out = NULL;
    pthread_once(&hr_mysql_lib_once, hr_mysql_lib_init);
    if (hr_mysql_lib_rc != 0) {
        hr_mysql_seterr(errstr, errlen, "mysql: client library initialization failed");
        return -1;
    }
    m = calloc(1, sizeof *m);
    if (!m)
        goto oom;
    m->host = strdup(cfg->mysql.host ? cfg->mysql.host : "127.0.0.1");
    m->user = strdup(cfg->mysql.user ? cfg->mysql.user : "");
    m->password = strdup(cfg->mysql.password ? cfg->mysql.password : "");
    m->database = strdup(cfg->mysql.database ? cfg->mysql.database : "");
    if (!m->host || !m->user || !m->password || !m->database)
        goto oom;
    m->port = (unsigned)cfg->mysql.port;
    m->connect_timeout_s =
        cfg->mysql.connect_timeout_s > 0 ? (unsigned)cfg->mysql.connect_timeout_s : 5;
    m->timeout_s = cfg->mysql.timeout_s > 0 ? (unsigned)cfg->mysql.timeout_s : 10;
    m->tls = cfg->mysql.tls.enabled;
    m->tls_verify = cfg->mysql.tls.verify;
    if (hr_mysql_dup_file(cfg->mysql.tls.ca_file, &m->tls_ca) != 0 ||
        hr_mysql_dup_file(cfg->mysql.tls.cert_file, &m->tls_cert) != 0 ||
        hr_mysql_dup_file(cfg->mysql.tls.key_file, &m->tls_key) != 0)
        goto oom;
    m->conn = hr_mysql_open(m, errstr, errlen);
    if (!m->conn)
        goto fail;
    *out = m;
    return 0;

oom:
    hr_mysql_seterr(errstr, errlen, "mysql: out of memory");
fail:
    hr_mysql_free(m);
    return -1;
}

void hr_mysql_free(hr_mysql *m)
{
    if (!m)
        return;
    hr_mysql_cache_clear(m);
    if (m->conn)
        mysql_close(m->conn);
    free(m->host);
    free(m->user);
    free(m->password);
    free(m->database);
    free(m->tls_ca);
    free(m->tls_cert);
    free(m->tls_key);
    hr_vec_free(&m->binds);
    hr_vec_free(&m->lens);
    hr_vec_free(&m->times);
    hr_vec_free(&m->inds);
    free(m);
}

/* Closes the big cached statements (HR_MYSQL_BIG_PARAMS) idle for
 * HR_MYSQL_BIG_IDLE_MS at NOW, but KEEP, then frees the bindings' arrays
 * when no big one is left (the next statement's bind grows them again). */
static void hr_mysql_cache_trim(hr_mysql *m, const MYSQL_STMT *keep, int64_t now)
{
    bool big = false;

    for (size_t i = 0; i < m->ncache;) {
        const hr_mysql_cached *c = &m->cache[i];

        if (c->nparams <= HR_MYSQL_BIG_PARAMS) {
            i++;
        } else if (c->stmt != keep && now - c->used_ms > HR_MYSQL_BIG_IDLE_MS) {
            hr_mysql_cache_remove(m, i); /* the last one moved to I */
        } else {
            big = true;
            i++;
        }
    }
    if (!big && m->binds.cap > HR_MYSQL_BIG_PARAMS) {
        hr_vec_free(&m->binds);
        hr_vec_free(&m->lens);
        hr_vec_free(&m->times);
    }
}

/* The cached statement for SQL, prepared now if it is not cached. */
static MYSQL_STMT *hr_mysql_prepare(hr_mysql *m, const char *sql, unsigned *err, char *errstr,
                                    size_t errlen)
{
    MYSQL_STMT *stmt;
    int64_t now = hr_clock_mono_ms();
    char *key;
    size_t slot;

    for (size_t i = 0; i < m->ncache; i++) {
        if (strcmp(m->cache[i].sql, sql) == 0) {
            m->cache[i].used = ++m->tick;
            m->cache[i].used_ms = now;
            stmt = m->cache[i].stmt;
            hr_mysql_cache_trim(m, stmt, now);
            return stmt;
        }
    }
    stmt = mysql_stmt_init(m->conn);
    if (!stmt) {
        *err = mysql_errno(m->conn);
        hr_mysql_seterr(errstr, errlen, "%s", mysql_error(m->conn));
        return NULL;
    }
    if (mysql_stmt_prepare(stmt, sql, strlen(sql)) != 0) {
        *err = mysql_stmt_errno(stmt);
        hr_mysql_seterr(errstr, errlen, "%s", mysql_stmt_error(stmt));
        mysql_stmt_close(stmt);
        return NULL;
    }
    key = strdup(sql);
    if (!key) {
        hr_mysql_seterr(errstr, errlen, "mysql: out of memory");
        mysql_stmt_close(stmt);
        return NULL;
    }
    if (m->ncache == HR_MYSQL_STMT_CACHE) {
        size_t lru = 0;
        for (size_t i = 1; i < m->ncache; i++)
            if (m->cache[i].used < m->cache[lru].used)
                lru = i;
        hr_mysql_cache_remove(m, lru);
    }
    slot = m->ncache++;
    m->cache[slot] = (hr_mysql_cached){.sql = key,
                                       .stmt = stmt,
                                       .used = ++m->tick,
                                       .used_ms = now,
                                       .nparams = mysql_stmt_param_count(stmt)};
    hr_mysql_cache_trim(m, stmt, now);
    return stmt;
}

/* UTC ms since the epoch MS as a DATETIME into *T. */
static void hr_mysql_time_ms(int64_t ms, MYSQL_TIME *t)
{
    int64_t days = hr_civil_floordiv(ms, 86400000), in_day = ms - days * 86400000;
    int y, mo, d;

    hr_civil_date(days, &y, &mo, &d);
    *t = (MYSQL_TIME){.year = (unsigned)y,
                      .month = (unsigned)mo,
                      .day = (unsigned)d,
                      .hour = (unsigned)(in_day / 3600000),
                      .minute = (unsigned)(in_day / 60000 % 60),
                      .second = (unsigned)(in_day / 1000 % 60),
                      .second_part = (unsigned long)(in_day % 1000) * 1000,
                      .time_type = MYSQL_TIMESTAMP_DATETIME};
}

/* Binds PARAMS to STMT.  libmariadb keeps pointers into the MYSQL_BIND
 * array (lengths) until the execute, so the arrays belong to M and are
 * reused by every statement. */
static int hr_mysql_bind_params(hr_mysql *m, MYSQL_STMT *stmt, const hr_mysql_param *params,
                                size_t nparams, char *errstr, size_t errlen)
{
    if (mysql_stmt_param_count(stmt) != nparams) {
        hr_mysql_seterr(errstr, errlen, "statement takes %lu parameters, %zu given",
                        mysql_stmt_param_count(stmt), nparams);
        return -1;
    }
    if (nparams == 0)
        return 0;
    if (hr_vec_reserve(&m->binds, nparams) != 0 || hr_vec_reserve(&m->lens, nparams) != 0) {
        hr_mysql_seterr(errstr, errlen, "mysql: out of memory");
        return -1;
    }
    memset(m->binds.v, 0, nparams * sizeof *m->binds.v);
    for (size_t i = 0; i < nparams; i++) {
        MYSQL_BIND *b = &m->binds.v[i];
        /* libmariadb only reads input buffers; MYSQL_BIND is not const. */
        switch (params[i].type) {
        case HR_MYSQL_NULL:
            b->buffer_type = MYSQL_TYPE_NULL;
            break;
        case HR_MYSQL_I64:
            b->buffer_type = MYSQL_TYPE_LONGLONG;
            b->buffer = (void *)&params[i].i64;
            break;
        case HR_MYSQL_DOUBLE:
            b->buffer_type = MYSQL_TYPE_DOUBLE;
            b->buffer = (void *)&params[i].dbl;
            break;
        case HR_MYSQL_TIME_MS:
            if (hr_vec_reserve(&m->times, nparams) != 0) {
                hr_mysql_seterr(errstr, errlen, "mysql: out of memory");
                return -1;
            }
            hr_mysql_time_ms(params[i].i64, &m->times.v[i]);
            b->buffer_type = MYSQL_TYPE_DATETIME;
            b->buffer = &m->times.v[i];
            break;
        case HR_MYSQL_STR:
            b->buffer_type = MYSQL_TYPE_STRING;
            b->buffer = (void *)(params[i].str ? params[i].str : "");
            m->lens.v[i] = params[i].str ? (unsigned long)params[i].len : 0;
            b->buffer_length = m->lens.v[i];
            b->length = &m->lens.v[i];
            break;
        default:
            hr_mysql_seterr(errstr, errlen, "parameter %zu has an unknown type %d", i + 1,
                            (int)params[i].type);
            return -1;
        }
    }
    if (mysql_stmt_bind_param(stmt, m->binds.v) != 0) {
        hr_mysql_seterr(errstr, errlen, "%s", mysql_stmt_error(stmt));
        return -1;
    }
    return 0;
}

/* Whether M's server takes MariaDB's array binding (libmariadb's
 * MARIADB_STMT_BULK_SUPPORTED, from the public capability getters).  A
 * build with test seams takes HERALD_TEST_MYSQL_NO_BULK for a server
 * without it (test_mysql's one-by-one path). */
static bool hr_mysql_bulk_supported(hr_mysql *m)
{
    unsigned long caps = 0, ext = 0;

    if ((HR_SEAMS_ON && getenv("HERALD_TEST_MYSQL_NO_BULK") != NULL) ||
        mariadb_get_infov(m->conn, MARIADB_CONNECTION_SERVER_CAPABILITIES, &caps) != 0 ||
        mariadb_get_infov(m->conn, MARIADB_CONNECTION_EXTENDED_SERVER_CAPABILITIES, &ext) != 0)
        return false;
    return !(caps & CLIENT_MYSQL) && (ext & (MARIADB_CLIENT_STMT_BULK_OPERATIONS >> 32)) != 0;
}

/* STMT back to one row an execute (the cache hands it to hr_mysql_exec). */
static void hr_mysql_unbind_rows(MYSQL_STMT *stmt)
{
    unsigned int one = 0;

    mysql_stmt_attr_set(stmt, STMT_ATTR_ARRAY_SIZE, &one);
    mysql_stmt_attr_set(stmt, STMT_ATTR_CB_PARAM, NULL);
    mysql_stmt_attr_set(stmt, STMT_ATTR_CB_USER_DATA, NULL);
}

/* The rows of an array binding (hr_mysql_exec_rows), as its callback
 * reads them. */
typedef struct hr_mysql_bulk {
    hr_mysql *m;
    const hr_mysql_param *params; /* nrows x ncols, row after row */
    size_t ncols;
} hr_mysql_bulk;

/* libmariadb's callback before it sends row ROW of an array binding: points
 * BINDS (its copy of the MYSQL_BINDs, whose length and indicator point
 * into M's arrays) at the row's values. */
static my_bool hr_mysql_bulk_row(void *data, MYSQL_BIND *binds, unsigned int row)
{
    const hr_mysql_bulk *bulk = data;
    const hr_mysql_param *p = bulk->params + (size_t)row * bulk->ncols;

    for (size_t i = 0; i < bulk->ncols; i++) {
        MYSQL_BIND *b = &binds[i];

        *b->u.indicator = p[i].type == HR_MYSQL_NULL ? STMT_INDICATOR_NULL : STMT_INDICATOR_NONE;
        switch (p[i].type) {
        case HR_MYSQL_NULL:
            break;
        case HR_MYSQL_I64:
            b->buffer = (void *)&p[i].i64;
            break;
        case HR_MYSQL_DOUBLE:
            b->buffer = (void *)&p[i].dbl;
            break;
        case HR_MYSQL_TIME_MS:
            hr_mysql_time_ms(p[i].i64, b->buffer);
            break;
        case HR_MYSQL_STR:
            b->buffer = (void *)(p[i].str ? p[i].str : "");
            *b->length = p[i].str ? (unsigned long)p[i].len : 0;
            break;
        }
    }
    return 0;
}

/* Binds the rows of BULK (NROWS of them) to STMT for one execute: a
 * column's type is that of its first value that is not NULL, and every
 * other value of it must have that type or be NULL. */
static int hr_mysql_bind_rows(hr_mysql_bulk *bulk, MYSQL_STMT *stmt, size_t nrows, char *errstr,
                              size_t errlen)
{
    static const enum enum_field_types types[] = {
        [HR_MYSQL_NULL] = MYSQL_TYPE_NULL,        [HR_MYSQL_I64] = MYSQL_TYPE_LONGLONG,
        [HR_MYSQL_STR] = MYSQL_TYPE_STRING,       [HR_MYSQL_DOUBLE] = MYSQL_TYPE_DOUBLE,
        [HR_MYSQL_TIME_MS] = MYSQL_TYPE_DATETIME,
    };
    hr_mysql *m = bulk->m;
    size_t ncols = bulk->ncols;
    unsigned int size = (unsigned int)nrows;

    if (mysql_stmt_param_count(stmt) != ncols) {
        hr_mysql_seterr(errstr, errlen, "statement takes %lu parameters, %zu given a row",
                        mysql_stmt_param_count(stmt), ncols);
        return -1;
    }
    if (hr_vec_reserve(&m->binds, ncols) != 0 || hr_vec_reserve(&m->lens, ncols) != 0 ||
        hr_vec_reserve(&m->times, ncols) != 0 || hr_vec_reserve(&m->inds, ncols) != 0) {
        hr_mysql_seterr(errstr, errlen, "mysql: out of memory");
        return -1;
    }
    memset(m->binds.v, 0, ncols * sizeof *m->binds.v);
    for (size_t i = 0; i < ncols; i++) {
        hr_mysql_type type = HR_MYSQL_NULL;
        MYSQL_BIND *b = &m->binds.v[i];

        for (size_t r = 0; r < nrows; r++) {
            hr_mysql_type t = bulk->params[r * ncols + i].type;

            if (t == HR_MYSQL_NULL || t == type)
                continue;
            if (type != HR_MYSQL_NULL || (unsigned)t >= sizeof types / sizeof types[0]) {
                hr_mysql_seterr(errstr, errlen, "parameter %zu has types %d and %d in one batch",
                                i + 1, (int)type, (int)t);
                return -1;
            }
            type = t;
        }
        b->buffer_type = types[type];
        b->buffer = type == HR_MYSQL_TIME_MS ? (void *)&m->times.v[i] : NULL;
        b->length = &m->lens.v[i];
        b->u.indicator = &m->inds.v[i];
    }
    if (mysql_stmt_attr_set(stmt, STMT_ATTR_ARRAY_SIZE, &size) != 0 ||
        mysql_stmt_attr_set(stmt, STMT_ATTR_CB_USER_DATA, bulk) != 0 ||
        mysql_stmt_attr_set(stmt, STMT_ATTR_CB_PARAM, (const void *)hr_mysql_bulk_row) != 0 ||
        mysql_stmt_bind_param(stmt, m->binds.v) != 0) {
        hr_mysql_seterr(errstr, errlen, "%s", mysql_stmt_error(stmt));
        hr_mysql_unbind_rows(stmt);
        return -1;
    }
    return 0;
}

/* One attempt at a prepared statement.  With ROWS the result set is
 * fetched, otherwise any result set is discarded. */
static int hr_mysql_stmt_once(hr_mysql *m, const char *sql, const hr_mysql_param *params,
                              size_t nparams, size_t nrows, hr_mysql_rows **rows,
                              uint64_t *affected, uint64_t *insert_id, unsigned *err, char *errstr,
                              size_t errlen)
{
    MYSQL_STMT *stmt = hr_mysql_prepare(m, sql, err, errstr, errlen);
    hr_mysql_bulk bulk = {m, params, nparams};
    int rc;

    if (!stmt)
        return -1;
    if (nrows > 1 && !hr_mysql_bulk_supported(m)) {
        /* A server (or a proxy) without MariaDB's array binding: a row an
         * execute, the same rows written at a round trip each. */
        uint64_t sum = 0, one = 0;

        for (size_t r = 0; r < nrows; r++) {
            if (hr_mysql_stmt_once(m, sql, params + r * nparams, nparams, 1, NULL, &one, NULL, err,
                                   errstr, errlen) != 0)
                return -1;
            sum += one;
        }
        if (affected)
            *affected = sum;
        return 0;
    }
    if (nrows > 1 ? hr_mysql_bind_rows(&bulk, stmt, nrows, errstr, errlen) != 0
                  : hr_mysql_bind_params(m, stmt, params, nparams, errstr, errlen) != 0)
        return -1;
    rc = mysql_stmt_execute(stmt);
    if (nrows > 1)
        hr_mysql_unbind_rows(stmt);
    if (rc != 0) {
        *err = mysql_stmt_errno(stmt);
        hr_mysql_seterr(errstr, errlen, "%s", mysql_stmt_error(stmt));
        /* Server errors (a SIGNAL, a duplicate key) leave the statement
         * usable; client errors (CR_*, 2000..2999) may not, and a statement
         * the server could not re-prepare after DDL must be prepared anew. */
        if ((*err >= 2000 && *err < 3000) || *err == ER_NEED_REPREPARE)
            hr_mysql_cache_drop(m, stmt);
        return -1;
    }
    if (rows)
        return hr_mysql_rows_fetch(stmt, rows, err, errstr, errlen);
    if (affected)
        *affected = (uint64_t)mysql_stmt_affected_rows(stmt);
    if (insert_id)
        *insert_id = (uint64_t)mysql_stmt_insert_id(stmt);
    if (mysql_stmt_field_count(stmt) > 0) {
        /* Unread rows would block the connection; read and drop them. */
        mysql_stmt_store_result(stmt);
        mysql_stmt_free_result(stmt);
    }
    return 0;
}

/* hr_mysql_stmt_once, timed (hr_mysql_note); *TIMED_OUT (may be NULL)
 * says whether the timeout ended it. */
static int hr_mysql_stmt_timed(hr_mysql *m, const char *sql, const hr_mysql_param *params,
                               size_t nparams, size_t nrows, hr_mysql_rows **rows,
                               uint64_t *affected, uint64_t *insert_id, unsigned *err,
                               bool *timed_out, char *errstr, size_t errlen)
{
    int64_t start = hr_clock_mono_ms();
    int rc = hr_mysql_stmt_once(m, sql, params, nparams, nrows, rows, affected, insert_id, err,
                                errstr, errlen);

    bool ended = hr_mysql_note(m, sql, start, rc, *err, errstr, errlen);

    if (timed_out != NULL)
        *timed_out = ended;
    return rc;
}

static int hr_mysql_stmt(hr_mysql *m, const char *sql, const hr_mysql_param *params, size_t nparams,
                         size_t nrows, hr_mysql_rows **rows, uint64_t *affected,
                         uint64_t *insert_id, unsigned *errno_out, char *errstr, size_t errlen)
{
    unsigned err = 0;
    bool timed_out = false;
    int rc = hr_mysql_stmt_timed(m, sql, params, nparams, nrows, rows, affected, insert_id, &err,
                                 &timed_out, errstr, errlen);

    /* ER_NEED_REPREPARE: the statement did not run, so even inside a
     * transaction it is safe to prepare it again and repeat it.  A
     * statement the timeout ended is not repeated: the server did not
     * answer for mysql.timeout_s, and a second wait would double the
     * stall (the caller retries after its back-off). */
    if ((rc != 0 && err == ER_NEED_REPREPARE) ||
        (rc != 0 && hr_mysql_gone(err) && !timed_out && !m->in_txn && !m->locked &&
         hr_mysql_reconnect(m, errstr, errlen) == 0)) {
        err = 0;
        rc = hr_mysql_stmt_timed(m, sql, params, nparams, nrows, rows, affected, insert_id, &err,
                                 NULL, errstr, errlen);
    }
    /* A deadlock rolled the statement back whole; outside a transaction
     * nothing else was undone, so running it again is running it once.
     * (Statements that lock several rows, in an order another party's
     * transaction need not share, meet this under load.) */
    for (int n = 0;
         rc != 0 && err == ER_LOCK_DEADLOCK && !m->in_txn && n < HR_MYSQL_DEADLOCK_RETRIES; n++) {
        err = 0;
        rc = hr_mysql_stmt_timed(m, sql, params, nparams, nrows, rows, affected, insert_id, &err,
                                 NULL, errstr, errlen);
    }
    m->last_err = rc == 0 ? 0 : err;
    if (errno_out)
        *errno_out = m->last_err;
    return rc;
}

bool hr_mysql_deadlocked(const hr_mysql *m)
{
    return m->last_err == ER_LOCK_DEADLOCK;
}

int hr_mysql_exec(hr_mysql *m, const char *sql, const hr_mysql_param *params, size_t nparams,
                  uint64_t *affected, uint64_t *insert_id, unsigned *errno_out, char *errstr,
                  size_t errlen)
{
    return hr_mysql_stmt(m, sql, params, nparams, 1, NULL, affected, insert_id, errno_out, errstr,
                         errlen);
}

int hr_mysql_exec_rows(hr_mysql *m, const char *sql, const hr_mysql_param *params, size_t ncols,
                       size_t nrows, uint64_t *affected, unsigned *errno_out, char *errstr,
                       size_t errlen)
{
    return hr_mysql_stmt(m, sql, params, ncols, nrows, NULL, affected, NULL, errno_out, errstr,
                         errlen);
}

int hr_mysql_query(hr_mysql *m, const char *sql, const hr_mysql_param *params, size_t nparams,
                   hr_mysql_rows **out, char *errstr, size_t errlen)
{
    *out = NULL;
    return hr_mysql_stmt(m, sql, params, nparams, 1, out, NULL, NULL, NULL, errstr, errlen);
}

/* One attempt at a text-protocol script, timed (hr_mysql_note).  *NTH gets
 * the 1-based number of the statement that failed, *TIMED_OUT whether the
 * timeout ended it. */
static int hr_mysql_script_once(hr_mysql *m, const char *sql, unsigned *err, int *nth,
                                bool *timed_out, char *errstr, size_t errlen)
{
    int64_t start = hr_clock_mono_ms();
    int status = mysql_real_query(m->conn, sql, strlen(sql));

    for (*nth = 1;; ++*nth) {
        MYSQL_RES *res;

        if (status != 0)
            break;
        res = mysql_store_result(m->conn);
        if (res)
            mysql_free_result(res);
        else if (mysql_field_count(m->conn) != 0)
            break;
        status = mysql_next_result(m->conn);
        if (status == -1) {
            hr_mysql_note(m, sql, start, 0, 0, errstr, errlen);
            return 0;
        }
    }
    *err = mysql_errno(m->conn);
    hr_mysql_seterr(errstr, errlen, "statement %d: %s", *nth, mysql_error(m->conn));
    *timed_out = hr_mysql_note(m, sql, start, -1, *err, errstr, errlen);
    return -1;
}

/* A script, retried on a new connection only when the server was gone
 * before its first statement ran. */
static int hr_mysql_script_retry(hr_mysql *m, const char *sql, bool may_retry, char *errstr,
                                 size_t errlen)
{
    unsigned err = 0;
    int nth = 0;
    bool timed_out = false;
    int rc = hr_mysql_script_once(m, sql, &err, &nth, &timed_out, errstr, errlen);

    /* Not after a timeout (hr_mysql_stmt says why). */
    if (rc != 0 && may_retry && nth == 1 && hr_mysql_gone(err) && !timed_out && !m->in_txn &&
        !m->locked && hr_mysql_reconnect(m, errstr, errlen) == 0)
        rc = hr_mysql_script_once(m, sql, &err, &nth, &timed_out, errstr, errlen);
    return rc;
}

int hr_mysql_script(hr_mysql *m, const char *sql, char *errstr, size_t errlen)
{
    return hr_mysql_script_retry(m, sql, true, errstr, errlen);
}

/* A transaction begun inside another is a savepoint of it (hr_mysql.h):
 * START TRANSACTION would commit the outer one.  Savepoints are named by
 * depth, so the innermost is always the one released or rolled back to. */
static int hr_mysql_savepoint(hr_mysql *m, const char *verb, int depth, char *errstr, size_t errlen)
{
    char sql[64];

    snprintf(sql, sizeof sql, "%s hr_sp%d", verb, depth);
    return hr_mysql_script_retry(m, sql, false, errstr, errlen);
}

int hr_mysql_begin(hr_mysql *m, char *errstr, size_t errlen)
{
    if (m->depth > 0) {
        if (hr_mysql_savepoint(m, "SAVEPOINT", m->depth + 1, errstr, errlen) != 0)
            return -1;
        m->depth++;
        return 0;
    }
    if (hr_mysql_script_retry(m, "START TRANSACTION", true, errstr, errlen) != 0)
        return -1;
    m->in_txn = true;
    m->depth = 1;
    return 0;
}

int hr_mysql_commit(hr_mysql *m, char *errstr, size_t errlen)
{
    if (m->depth > 1) {
        m->depth--;
        return hr_mysql_savepoint(m, "RELEASE SAVEPOINT", m->depth + 1, errstr, errlen);
    }
    /* A failed COMMIT has rolled back (or lost) the transaction too. */
    m->in_txn = false;
    m->depth = 0;
    return hr_mysql_script_retry(m, "COMMIT", false, errstr, errlen);
}

int hr_mysql_rollback(hr_mysql *m)
{
    char errstr[256];

    if (!m)
        return -1;
    if (m->depth > 1) {
        m->depth--;
        return hr_mysql_savepoint(m, "ROLLBACK TO SAVEPOINT", m->depth + 1, errstr, sizeof errstr);
    }
    m->in_txn = false;
    m->depth = 0;
    return hr_mysql_script_retry(m, "ROLLBACK", false, errstr, sizeof errstr);
}

void hr_mysql_set_locked(hr_mysql *m, bool locked)
{
    m->locked = locked;
}
