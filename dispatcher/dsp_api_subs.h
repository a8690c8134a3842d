/* dsp_api_subs: the /v1 handlers of subscribers and the pull, and the
 * rendering of a task for one uid that the pull serves (the dry-run render
 * of dsp_api_ops.c shows the same). */
#ifndef DSP_API_SUBS_H
#define DSP_API_SUBS_H

#include <cJSON.h>

#include "dsp_api.h"
#include "hr_variant.h"

/* POST /v1/tasks/{id}/subscribers, DELETE /v1/tasks/{id}/subscribers/{uid} */
void dsp_api_subs_add(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_subs_del(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
/* GET /v1/users/{uid}/reminders (the pull; a client route) */
void dsp_api_subs_reminders(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
/* Adds "title", "body" (rendered for uid UID_S with the attributes of USER,
 * an HGETALL reply or NULL) and "payload" of task T to O, as the pull
 * serves them; with per-locale variants VS (NULL: none) the content the
 * user's locale picks, and "variant" naming it (hr_variant.h).  Returns
 * that name (VS's key, or HR_VARIANT_DEFAULT), NULL without variants.  A
 * uid an A/B winner step holds until its pick (hr_variant_ab_pick): "held"
 * true, "variant", "title", "body" and "payload" null, and NULL. */
const char *dsp_api_subs_rendering(cJSON *o, const hr_task *t, const hr_variant_set *vs,
                                   const char *uid_s, const redisReply *user);
/* HGETALL of the uid's profile hash (herald:user:<uid>), refilled from
 * MySQL first when Redis lost the profile book (no synced mark); NULL with
 * ERRSTR. */
redisReply *dsp_api_subs_user(dsp_api_conn *ac, const hr_config *cfg, const char *uid_s,
                              char *errstr, size_t errlen);

#endif
