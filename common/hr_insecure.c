/* hr_insecure: the configuration's insecure settings (see hr_insecure.h):
 * one walk over the configuration, shared by the warnings and the gauge. */
#include "hr_insecure.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum {
    HR_INSECURE_API,
    HR_INSECURE_TLS_VERIFY,
    HR_INSECURE_STARTTLS,
    HR_INSECURE_HTTP_PROVIDER,
    HR_INSECURE_MYSQL_TLS_VERIFY,
    HR_INSECURE_KAFKA_TLS_VERIFY,
    HR_INSECURE_SECRET_FILE,
    HR_INSECURE__SETTINGS
};

static const char *const hr_insecure_names[HR_INSECURE__SETTINGS] = {
    [HR_INSECURE_API] = "api_insecure",
    [HR_INSECURE_TLS_VERIFY] = "tls_verify",
    [HR_INSECURE_STARTTLS] = "require_starttls",
    [HR_INSECURE_HTTP_PROVIDER] = "http_provider",
    [HR_INSECURE_MYSQL_TLS_VERIFY] = "mysql_tls_verify",
    [HR_INSECURE_KAFKA_TLS_VERIFY] = "kafka_tls_verify",
    [HR_INSECURE_SECRET_FILE] = "secret_file_mode",
};

/* What the walk reports to: the caller's function, and a count per setting. */
typedef struct hr_insecure_walk {
    hr_insecure_fn fn;
    void *ctx;
    size_t counts[HR_INSECURE__SETTINGS];
} hr_insecure_walk;

static void hr_insecure_found(hr_insecure_walk *w, int setting, const char *detail)
{
    w->counts[setting]++;
    if (w->fn != NULL)
        w->fn(w->ctx, hr_insecure_names[setting], detail);
}

static bool hr_insecure_http(const char *url)
{
    return url != NULL && strncasecmp(url, "http://", 7) == 0;
}

/* A kafka.properties entry that turns a broker's TLS check off. */
static bool hr_insecure_kafka(const hr_kv *kv)
{
    if (strcmp(kv->key, "enable.ssl.certificate.verification") == 0)
        return strcasecmp(kv->value, "false") == 0 || strcmp(kv->value, "0") == 0;
    if (strcmp(kv->key, "ssl.endpoint.identification.algorithm") == 0)
        return strcasecmp(kv->value, "none") == 0 || kv->value[0] == '\0';
    return false;
}

static void hr_insecure_walk_cfg(const hr_config *cfg, hr_insecure_walk *w)
{
    char detail[256];

    if (cfg->dispatcher.api.insecure && cfg->dispatcher.api.ntokens == 0 && !hr_config_jwt_on(cfg))
        hr_insecure_found(w, HR_INSECURE_API, "dispatcher.api.insecure: the API has no tokens");
    for (size_t i = 0; i < cfg->nchannels; i++) {
        const hr_channel *ch = &cfg->channels[i];

        snprintf(detail, sizeof detail, "channels.%s", ch->name);
        if (!ch->tls_verify)
            hr_insecure_found(w, HR_INSECURE_TLS_VERIFY, detail);
        if (ch->type == HR_CHANNEL_SMTP && !ch->smtp.require_starttls && ch->url != NULL &&
            strncasecmp(ch->url, "smtp://", 7) == 0)
            hr_insecure_found(w, HR_INSECURE_STARTTLS, detail);
        if ((ch->type == HR_CHANNEL_FCM || ch->type == HR_CHANNEL_APNS) &&
            (hr_insecure_http(ch->url) || hr_insecure_http(ch->fcm.token_uri)))
            hr_insecure_found(w, HR_INSECURE_HTTP_PROVIDER, detail);
    }
    if (cfg->mysql.tls.enabled && !cfg->mysql.tls.verify)
        hr_insecure_found(w, HR_INSECURE_MYSQL_TLS_VERIFY, "mysql.tls.verify: false");
    for (size_t i = 0; i < cfg->kafka.nproperties; i++)
        if (hr_insecure_kafka(&cfg->kafka.properties[i])) {
            snprintf(detail, sizeof detail, "kafka.properties.%s", cfg->kafka.properties[i].key);
            hr_insecure_found(w, HR_INSECURE_KAFKA_TLS_VERIFY, detail);
        }
    for (size_t i = 0; i < cfg->nexposed_files; i++) {
        snprintf(detail, sizeof detail, "%s: its group or others may read it (chmod 0400)",
                 cfg->exposed_files[i]);
        hr_insecure_found(w, HR_INSECURE_SECRET_FILE, detail);
    }
}

size_t hr_insecure_each(const hr_config *cfg, hr_insecure_fn fn, void *ctx)
{
    hr_insecure_walk w = {.fn = fn, .ctx = ctx};
    size_t n = 0;

    hr_insecure_walk_cfg(cfg, &w);
    for (int i = 0; i < HR_INSECURE__SETTINGS; i++)
        n += w.counts[i];
    return n;
}

int hr_insecure_gauge(const hr_config *cfg, hr_metrics *reg, char *errstr, size_t errlen)
{
    hr_metrics_family *fam = NULL;
    const hr_metrics_spec spec = {&fam,
                                  "herald_insecure_settings",
                                  "Settings of the configuration that weaken security, by setting "
                                  "(hr_insecure.h); 0 when none",
                                  HR_METRICS_GAUGE,
                                  "setting",
                                  NULL,
                                  0};
    hr_insecure_walk w = {0};

    if (hr_metrics_register(reg, &spec, 1, errstr, errlen) != 0)
        return -1;
    hr_insecure_walk_cfg(cfg, &w);
    for (int i = 0; i < HR_INSECURE__SETTINGS; i++)
        hr_metrics_set(hr_metrics_labels(fam, hr_insecure_names[i]), (double)w.counts[i]);
    return 0;
}
