/* fuzz_jwt: the JWK Set parser and the JWT checks of the API's single
 * sign-on (hr_jwks) on arbitrary bytes.  The input is a JWK Set, a NUL
 * byte and a token; without a NUL the whole input is tried as both.  A
 * token is checked against the input's set when it parses, and against a
 * fixed set always, so the token path runs however the set bytes mutate.
 * A refusal must come with a reason and leave no claims; against the fixed
 * set nothing can pass (the fuzzer has no private key of it). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_jwks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The public half of tests/unit/keys/ec.p8, whose private half the fuzzer
 * does not have: no input can carry its signature. */
static const char fixed_jwks[] = "{\"keys\":[{\"kty\":\"EC\",\"kid\":\"ec1\",\"crv\":\"P-256\","
                                 "\"x\":\"SKam2rm1JVLWOhgs2YkMyQxw_iKOyiXxU-ggD5bYGfI\","
                                 "\"y\":\"WryV5XxVk60oc99LVSP1omttr6OHoE1sddvekSi4ffc\"}]}";

/* Checks TOKEN against SET: a refusal must say why; a pass is a crash
 * unless MAY_PASS (a set the input chose). */
static void fuzz_token(const hr_jwks *set, const char *token, bool may_pass)
{
    const hr_jwks_expect x = {.issuer = "https://id.example.org",
                              .audience = "herald",
                              .now_s = 1900000000,
                              .leeway_s = 60};
    char err[256] = "";
    cJSON *claims = NULL;

    if (hr_jwks_verify(set, token, &x, &claims, err, sizeof err) == 0) {
        if (!may_pass || claims == NULL) {
            fprintf(stderr, "fuzz_jwt: a token passed without a signing key's signature\n");
            abort();
        }
        cJSON_Delete(claims);
        return;
    }
    if (claims != NULL || err[0] == '\0') {
        fprintf(stderr, "fuzz_jwt: refused without a reason, or claims left behind\n");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static hr_jwks *fixed;
    const uint8_t *nul = memchr(data, '\0', size);
    size_t setlen = nul != NULL ? (size_t)(nul - data) : size;
    char *token, err[256] = "";
    hr_jwks *set = NULL;

    if (fixed == NULL &&
        hr_jwks_parse(fixed_jwks, sizeof fixed_jwks - 1, &fixed, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_jwt: the fixed set does not parse: %s\n", err);
        abort();
    }
    if (hr_jwks_parse((const char *)data, setlen, &set, err, sizeof err) != 0 &&
        (set != NULL || err[0] == '\0')) {
        fprintf(stderr, "fuzz_jwt: a set refused without a reason\n");
        abort();
    }
    /* The token is NUL-terminated text; bytes after an inner NUL are cut. */
    token = nul != NULL ? strndup((const char *)nul + 1, size - setlen - 1)
                        : strndup((const char *)data, size);
    if (token == NULL)
        abort();
    fuzz_token(fixed, token, false);
    if (set != NULL)
        fuzz_token(set, token, true);
    free(token);
    hr_jwks_free(set);
    return 0;
}
