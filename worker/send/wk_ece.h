/* wk_ece: RFC 8291 message encryption for web push — the "aes128gcm"
 * content coding of RFC 8188 keyed by an ECDH agreement with the
 * subscription's p256dh key and its auth secret, on OpenSSL 3 EVP only:
 *
 *   as = a new P-256 key pair; ecdh = ECDH(as, ua_public)
 *   ikm   = HKDF(salt = auth, ikm = ecdh,
 *                info = "WebPush: info" 0x00 ua_public as_public, 32)
 *   salt  = 16 random bytes
 *   cek   = HKDF(salt, ikm, "Content-Encoding: aes128gcm" 0x00, 16)
 *   nonce = HKDF(salt, ikm, "Content-Encoding: nonce" 0x00, 12)
 *   body  = salt || rs (4096, 32 bits) || idlen (65) || as_public
 *           || AES-128-GCM(cek, nonce, plaintext || 0x02) || tag
 *
 * One record: a push message fits in it (RFC 8291 section 4 asks push
 * services to take 4096 bytes of body, so the plaintext is at most
 * WK_ECE_PLAIN_MAX).  The key pair and the salt are new for every message
 * (as RFC 8291 has the sender make them); what is kept in a
 * wk_ece between messages is what OpenSSL would otherwise fetch again for
 * each one: the HKDF and AES-128-GCM implementations and the P-256 key
 * generation context.  A wk_ece belongs to one thread (the worker's
 * loop). */
#ifndef WK_ECE_H
#define WK_ECE_H

#include <stddef.h>

#include "hr_buf.h"
#include "hr_wpsub.h"

#define WK_ECE_RS 4096 /* the record size written in the header */
#define WK_ECE_HEADER (16 + 4 + 1 + HR_JWT_P256_POINT)
#define WK_ECE_TAG 16
/* The most a message's plaintext may hold: one record of WK_ECE_RS bytes
 * of body, less the header, the tag and the delimiter. */
#define WK_ECE_PLAIN_MAX (WK_ECE_RS - WK_ECE_HEADER - WK_ECE_TAG - 1)

typedef struct wk_ece wk_ece;

/* The fetched algorithms.  0, or -1 with ERRSTR. */
int wk_ece_new(wk_ece **out, char *errstr, size_t errlen);
void wk_ece_free(wk_ece *e);

/* Appends the aes128gcm body of the N bytes at PLAIN (at most
 * WK_ECE_PLAIN_MAX) encrypted to SUB to OUT.  0, or -1 with ERRSTR (OUT
 * then unchanged). */
int wk_ece_encrypt(wk_ece *e, const hr_wpsub *sub, const void *plain, size_t n, hr_buf *out,
                   char *errstr, size_t errlen);

#endif
