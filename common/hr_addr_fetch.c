/* hr_addr_fetch: the worker's side of the address book: the addresses of
 * the address sets it read (worker/wk_consent.c pipelines the SMEMBERS with
 * the profile hashes), and a dead address pruned from both stores (see
 * hr_addr.h). */
#include "hr_addr_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_pipe.h"

int hr_addr_take(hr_addr_list *out, const redisReply *reply, int64_t uid, size_t idx,
                 hr_addr_platform p, const char *app, size_t *bad)
{
    for (size_t e = 0; reply->type == REDIS_REPLY_ARRAY && e < reply->elements; e++) {
        const redisReply *m = reply->element[e];
        hr_addr a = {.uid = uid, .idx = idx};

        if (m->type != REDIS_REPLY_STRING || hr_addr_parse_member(out, m->str, m->len, &a) != 0) {
            (*bad)++;
            continue;
        }
        if (a.platform == p && (app == NULL || strcmp(a.app, app) == 0) &&
            hr_vec_push(&out->a, a) != 0)
            return -1;
    }
    return 0;
}

int hr_addr_unlist(hr_redis *r, const hr_addr *a, char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX], uid_s[24], member[HR_ADDR_MEMBER_MAX + 1];
    redisReply *reply;

    snprintf(uid_s, sizeof uid_s, "%" PRId64, a->uid);
    if (hr_addr_member(member, sizeof member, a->platform, a->app, a->address, a->supp) == NULL) {
        snprintf(errstr, errlen, "address too long");
        return -1;
    }
    reply = hr_redis_cmdf(r, errstr, errlen, "SREM %s %s",
                          hr_key_addr(hr_redis_prefix(r), key, sizeof key, uid_s), member);
    if (reply == NULL)
        return -1;
    freeReplyObject(reply);
    return 0;
}

int hr_addr_forget(hr_mysql *m, const hr_addr *a, char *errstr, size_t errlen)
{
    const hr_mysql_param pd[] = {HR_ADDR_PARAMS(a->uid, a->platform, a->app, a->address)};
    uint64_t affected = 0;

    if (hr_mysql_exec(m,
                      "DELETE FROM push_address WHERE uid = ? AND platform = ? AND app = ? "
                      "AND address = ?",
                      pd, 4, &affected, NULL, NULL, errstr, errlen) != 0)
        return -1;
    return affected > 0 ? 1 : 0;
}

int hr_addr_prune(hr_mysql *m, hr_redis *r, const hr_addr *a, char *errstr, size_t errlen)
{
    if (hr_addr_unlist(r, a, errstr, errlen) != 0)
        return -1;
    return hr_addr_forget(m, a, errstr, errlen);
}
