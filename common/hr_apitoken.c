/* hr_apitoken: operators' API tokens (see hr_apitoken.h).  The random
 * bytes are OpenSSL's RAND_bytes, the hash its SHA-256 (EVP_Digest), the
 * encoding hr_base64's URL alphabet. */
#include "hr_apitoken.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_base64.h"
#include "hr_parse.h"
#include "hr_sign.h"

#define HR_APITOKEN_RANDOM 32 /* bytes of a token */
#define HR_APITOKEN_NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.@-"

/* The columns every read selects, in hr_apitoken_row's order. */
#define HR_APITOKEN_COLUMNS                                                                  \
    "id, name, role, token_hash, CAST(ROUND(UNIX_TIMESTAMP(created_at) * 1000) AS SIGNED), " \
    "CAST(ROUND(UNIX_TIMESTAMP(expires_at) * 1000) AS SIGNED), "                             \
    "CAST(ROUND(UNIX_TIMESTAMP(revoked_at) * 1000) AS SIGNED), created_by, revoked_by"

bool hr_apitoken_is(const char *token)
{
    return strncmp(token, HR_APITOKEN_PREFIX, sizeof HR_APITOKEN_PREFIX - 1) == 0;
}

int hr_apitoken_hash(const char *token, char *hex)
{
    return hr_sign_sha256_hex(token, strlen(token), hex);
}

int hr_apitoken_name_ok(const char *name, char *errstr, size_t errlen)
{
    size_t n = name != NULL ? strlen(name) : 0;

    if (n >= 1 && n < HR_APITOKEN_NAME && strspn(name, HR_APITOKEN_NAME_CHARS) == n)
        return 0;
    snprintf(errstr, errlen, "a token's name is 1..%d of A-Z a-z 0-9 _ . @ -",
             HR_APITOKEN_NAME - 1);
    return -1;
}

static int64_t hr_apitoken_ms(const char *cell)
{
    return cell != NULL ? strtoll(cell, NULL, 10) : -1;
}

/* Row R of ROWS (HR_APITOKEN_COLUMNS) into *T. */
static void hr_apitoken_row(const hr_mysql_rows *rows, size_t r, hr_apitoken *t)
{
    const char *by = hr_mysql_cell(rows, r, 8);

    memset(t, 0, sizeof *t);
    t->id = strtoll(hr_mysql_cell(rows, r, 0), NULL, 10);
    snprintf(t->name, sizeof t->name, "%s", hr_mysql_cell(rows, r, 1));
    hr_role_parse(hr_mysql_cell(rows, r, 2), &t->role); /* an ENUM of the three */
    snprintf(t->hash, sizeof t->hash, "%s", hr_mysql_cell(rows, r, 3));
    t->created_ms = hr_apitoken_ms(hr_mysql_cell(rows, r, 4));
    t->expires_ms = hr_apitoken_ms(hr_mysql_cell(rows, r, 5));
    t->revoked_ms = hr_apitoken_ms(hr_mysql_cell(rows, r, 6));
    snprintf(t->created_by, sizeof t->created_by, "%s", hr_mysql_cell(rows, r, 7));
    snprintf(t->revoked_by, sizeof t->revoked_by, "%s", by != NULL ? by : "");
}

/* The rows of SQL (selecting HR_APITOKEN_COLUMNS) into *OUT, *N. */
static int hr_apitoken_select(hr_mysql *m, const char *sql, const hr_mysql_param *p, size_t np,
                              hr_apitoken **out, size_t *n, char *errstr, size_t errlen)
{
    hr_mysql_rows *rows = NULL;

    *out = NULL;
    *n = 0;
    if (hr_mysql_query(m, sql, p, np, &rows, errstr, errlen) != 0)
        return -1;
    if (rows->nrows > 0 && (*out = calloc(rows->nrows, sizeof **out)) == NULL) {
        hr_mysql_rows_free(rows);
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t r = 0; r < rows->nrows; r++)
        hr_apitoken_row(rows, r, &(*out)[r]);
    *n = rows->nrows;
    hr_mysql_rows_free(rows);
    return 0;
}

int hr_apitoken_find(hr_mysql *m, int64_t id, const char *name, hr_apitoken *out, char *errstr,
                     size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id), id == 0 && name != NULL ? HR_P_STR(name) : HR_P_NULL};
    hr_apitoken *found = NULL;
    size_t n = 0;

    if (hr_apitoken_select(m,
                           "SELECT " HR_APITOKEN_COLUMNS " FROM push_api_token "
                           "WHERE id = ? OR name = ?",
                           p, 2, &found, &n, errstr, errlen) != 0)
        return -1;
    if (n == 0) {
        if (id != 0)
            snprintf(errstr, errlen, "no API token %" PRId64, id);
        else
            snprintf(errstr, errlen, "no API token named '%.64s'", name != NULL ? name : "");
        return HR_APITOKEN_REFUSED;
    }
    *out = found[0];
    free(found);
    return 0;
}

int hr_apitoken_create(hr_mysql *m, const char *name, hr_role role, int64_t now_ms,
                       int64_t expires_ms, const char *by, char *token, hr_apitoken *out,
                       char *errstr, size_t errlen)
{
    unsigned char random[HR_APITOKEN_RANDOM];
    char hash[HR_APITOKEN_HASH];
    uint64_t id = 0;
    unsigned sqlerr = 0;
    hr_buf enc;
    int rc = -1;

    if (hr_apitoken_name_ok(name, errstr, errlen) != 0)
        return HR_APITOKEN_REFUSED;
    if (role == HR_ROLE_NONE || expires_ms <= now_ms ||
        expires_ms - now_ms > HR_APITOKEN_TTL_MAX_MS) {
        snprintf(errstr, errlen,
                 "a token needs a role and an expiry after now, at most 366 days ahead");
        return HR_APITOKEN_REFUSED;
    }
    hr_buf_init(&enc, HR_APITOKEN_MAX);
    if (RAND_bytes(random, sizeof random) != 1 ||
        hr_buf_append(&enc, HR_APITOKEN_PREFIX, sizeof HR_APITOKEN_PREFIX - 1) != 0 ||
        hr_base64_append(&enc, random, sizeof random, HR_BASE64_URL) != 0 ||
        hr_apitoken_hash(enc.data, hash) != 0) {
        snprintf(errstr, errlen, "cannot make a token (OpenSSL's random bytes or SHA-256)");
        goto done;
    }
    {
        const hr_mysql_param p[] = {HR_P_STR(name), HR_P_STR(hr_role_name(role)), HR_P_STR(hash),
                                    HR_P_STR(by), HR_P_I64(expires_ms)};

        if (hr_mysql_exec(m,
                          "INSERT INTO push_api_token (name, role, token_hash, created_by, "
                          "expires_at) VALUES (?, ?, ?, ?, FROM_UNIXTIME(? / 1000))",
                          p, 5, NULL, &id, &sqlerr, errstr, errlen) != 0) {
            if (sqlerr == 1062) { /* ER_DUP_ENTRY: the name (a hash clash is 2^-256) */
                snprintf(errstr, errlen,
                         "an API token named '%s' exists (names are never reused, revoked "
                         "or not)",
                         name);
                rc = HR_APITOKEN_REFUSED;
            }
            goto done;
        }
    }
    if ((rc = hr_apitoken_find(m, (int64_t)id, NULL, out, errstr, errlen)) != 0) {
        rc = -1;
        goto done;
    }
    memcpy(token, enc.data, enc.len + 1); /* hr_buf keeps a NUL after its data */
    rc = 0;
done:
    OPENSSL_cleanse(random, sizeof random);
    OPENSSL_cleanse(enc.data, enc.len);
    hr_buf_free(&enc);
    return rc;
}

int hr_apitoken_list(hr_mysql *m, bool all, int64_t now_ms, hr_apitoken **out, size_t *n,
                     char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(all), HR_P_I64(now_ms)};

    return hr_apitoken_select(m,
                              "SELECT " HR_APITOKEN_COLUMNS " FROM push_api_token "
                              "WHERE ? OR (revoked_at IS NULL AND "
                              "expires_at > FROM_UNIXTIME(? / 1000)) ORDER BY id DESC",
                              p, 2, out, n, errstr, errlen);
}

int hr_apitoken_revoke(hr_mysql *m, int64_t id, const char *by, hr_apitoken *out, char *errstr,
                       size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_STR(by), HR_P_I64(id)};
    uint64_t changed = 0;
    int rc = hr_apitoken_find(m, id, NULL, out, errstr, errlen);

    if (rc != 0)
        return rc;
    if (out->revoked_ms >= 0) {
        snprintf(errstr, errlen, "API token %" PRId64 " ('%s') is revoked already", id, out->name);
        return HR_APITOKEN_REFUSED;
    }
    if (hr_mysql_exec(m,
                      "UPDATE push_api_token SET revoked_at = CURRENT_TIMESTAMP(3), "
                      "revoked_by = ? WHERE id = ? AND revoked_at IS NULL",
                      p, 2, &changed, NULL, NULL, errstr, errlen) != 0)
        return -1;
    if (changed == 0) { /* revoked meanwhile by someone else */
        snprintf(errstr, errlen, "API token %" PRId64 " ('%s') is revoked already", id, out->name);
        return HR_APITOKEN_REFUSED;
    }
    return 0;
}

/* MS as a time string member NAME of O, null when negative. */
static void hr_apitoken_add_time(cJSON *o, const char *name, int64_t ms)
{
    char text[HR_PARSE_TIME_LEN];

    if (ms < 0) {
        cJSON_AddNullToObject(o, name);
        return;
    }
    hr_parse_time_format(ms, text, sizeof text);
    cJSON_AddStringToObject(o, name, text);
}

cJSON *hr_apitoken_json(const hr_apitoken *t)
{
    cJSON *o = cJSON_CreateObject();
    char id[24];

    if (o == NULL)
        return NULL;
    snprintf(id, sizeof id, "%" PRId64, t->id);
    cJSON_AddRawToObject(o, "id", id);
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "role", hr_role_name(t->role));
    hr_apitoken_add_time(o, "created_at", t->created_ms);
    cJSON_AddStringToObject(o, "created_by", t->created_by);
    hr_apitoken_add_time(o, "expires_at", t->expires_ms);
    hr_apitoken_add_time(o, "revoked_at", t->revoked_ms);
    if (t->revoked_by[0] != '\0')
        cJSON_AddStringToObject(o, "revoked_by", t->revoked_by);
    else
        cJSON_AddNullToObject(o, "revoked_by");
    return o;
}
