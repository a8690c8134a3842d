/* hr_insecure: the settings that weaken herald's security, found in a
 * loaded configuration, for the daemons to warn about at startup (one
 * `insecure_setting` line each) and to count in the gauge
 * herald_insecure_settings{setting} (docs/reliability.md "Bad input and
 * security"), which an alert can watch.  Each setting is allowed (a
 * developer's machine, a test, a relay inside a trusted network), never
 * silent.
 *
 *   api_insecure      dispatcher.api.insecure with no tokens and no JWT
 *   tls_verify        a channel with tls_verify: false
 *   require_starttls  an smtp:// channel with require_starttls: false
 *   http_provider     an fcm or apns url or token_uri over http:// (a build
 *                     with test seams only; others refuse it at load)
 *   mysql_tls_verify  mysql.tls.enabled with verify: false
 *   kafka_tls_verify  kafka.properties turning off the broker's
 *                     certificate or host name check
 *   secret_file_mode  a secret file its group or others may read
 *
 * Nothing here logs: the caller is given each finding. */
#ifndef HR_INSECURE_H
#define HR_INSECURE_H

#include <stddef.h>

#include "hr_config.h"
#include "hr_metrics.h"

/* Called once per finding: SETTING one of the names above, DETAIL where
 * (a channel, a file, a key; never a secret). */
typedef void (*hr_insecure_fn)(void *ctx, const char *setting, const char *detail);

/* Calls FN for every insecure setting of CFG; returns how many. */
size_t hr_insecure_each(const hr_config *cfg, hr_insecure_fn fn, void *ctx);

/* Registers herald_insecure_settings{setting} on REG with every setting's
 * count in CFG (0 for those absent, so an alert's query has a series).  0,
 * or -1 with ERRSTR. */
int hr_insecure_gauge(const hr_config *cfg, hr_metrics *reg, char *errstr, size_t errlen);

#endif
