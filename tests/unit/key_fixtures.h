/* key_fixtures: what the provider unit tests share: reading fixtures from the
 * keys/ directory given on the command line, and checking a JWT's
 * signature with a public key the way a provider would. */
#ifndef KEY_FIXTURES_H
#define KEY_FIXTURES_H

#include <stddef.h>

/* The fixture directory; set from argv[1] before the tests run. */
extern const char *key_fixtures_dir;

/* The whole of keys/NAME, NUL-terminated (malloc'd; the caller frees), and
 * its length in *LEN (may be NULL); NULL when unreadable. */
char *key_fixtures_read(const char *name, size_t *len);

/* Checks JWT's signature (RS256 or ES256, from its header) with the public
 * key in keys/PUB_NAME.  0 when valid; *HEADER and *CLAIMS (may be NULL)
 * then get the decoded JSON (malloc'd).  -1 otherwise. */
int key_fixtures_jwt_verify(const char *jwt, const char *pub_name, char **header, char **claims);

#endif
