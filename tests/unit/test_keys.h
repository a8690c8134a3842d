/* test_keys: what the provider unit tests share: reading fixtures from the
 * keys/ directory given on the command line, and checking a JWT's
 * signature with a public key the way a provider would. */
#ifndef TEST_KEYS_H
#define TEST_KEYS_H

#include <stddef.h>

/* The fixture directory; set from argv[1] before the tests run. */
extern const char *test_keys_dir;

/* The whole of keys/NAME, NUL-terminated (malloc'd; the caller frees), and
 * its length in *LEN (may be NULL); NULL when unreadable. */
char *test_keys_read(const char *name, size_t *len);

/* Checks JWT's signature (RS256 or ES256, from its header) with the public
 * key in keys/PUB_NAME.  0 when valid; *HEADER and *CLAIMS (may be NULL)
 * then get the decoded JSON (malloc'd).  -1 otherwise. */
int test_keys_jwt_verify(const char *jwt, const char *pub_name, char **header, char **claims);

#endif
