/* hr_config_value: the checks and conversions of single configuration
 * values, which the key tables (hr_config_key.h) point at; each takes the
 * text and fills the caller's error buffer, and none knows the tables. */
#ifndef HR_CONFIG_VALUE_H
#define HR_CONFIG_VALUE_H

#include <stdbool.h>
#include <stddef.h>

/* TEXT as a decimal integer in MIN..MAX. */
int cfg_parse_int(const char *text, long long min, long long max, long long *out, char *errstr,
                  size_t errlen);
int cfg_parse_bool(const char *text, bool *out, char *errstr, size_t errlen);
/* The checks of string keys (cfg_key.check / check_kv): 0, or -1 with WHY. */
int cfg_check_listen(const char *text, char *errstr, size_t errlen);
int cfg_check_server(const char *text, char *errstr, size_t errlen);
int cfg_check_prefix(const char *text, char *errstr, size_t errlen);
int cfg_check_instance(const char *text, char *errstr, size_t errlen);
int cfg_check_body(const char *text, char *errstr, size_t errlen);
int cfg_check_url(const char *text, char *errstr, size_t errlen);
int cfg_check_method(const char *text, char *errstr, size_t errlen);
int cfg_check_header(const char *name, const char *value, char *errstr, size_t errlen);
int cfg_check_mail_template(const char *text, char *errstr, size_t errlen);
int cfg_check_secret(const char *text, char *errstr, size_t errlen);
int cfg_check_mailbox(const char *text, char *errstr, size_t errlen);
int cfg_check_apple_id(const char *text, char *errstr, size_t errlen);
int cfg_check_unsubscribe(const char *text, char *errstr, size_t errlen);
int cfg_check_public_url(const char *text, char *errstr, size_t errlen);

/* The index of TEXT among the N NAMES, or -1: what every choice of the
 * tables (cfg_key.choose) maps to its enum or bool. */
int cfg_choice(const char *text, const char *const *names, size_t n);

/* cfg_choice over names written in place, e.g. with designated indexes
 * CFG_CHOICE(text, [HR_APNS_ALERT] = "alert", [HR_APNS_BACKGROUND] = "background"). */
#define CFG_CHOICE(text, ...)                            \
    cfg_choice(text, (const char *const[]){__VA_ARGS__}, \
               sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

#endif
