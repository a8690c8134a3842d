/* hr_slot: Redis Cluster's key -> hash slot function, and the slot of a
 * formatted command.  Pure functions (no connection, no allocation), used
 * by hr_cluster to route and by the unit tests.
 *
 * A key's slot is CRC16-XMODEM(key) mod 16384, where "key" is only the hash
 * tag when the key has one: the bytes between the first '{' and the first
 * '}' after it, when there are any (Redis's rule exactly: "{}" or a '{'
 * without a '}' after it hashes the whole key).  herald's per-task keys
 * carry the tag {t<ID>} and the channel budget's {c:<channel>}, so what one
 * Lua script touches lives in one slot (hr_keys.h).
 *
 * The slot of a command comes from its key, found with a small command
 * table: EVAL/EVALSHA (and _RO): the first key when numkeys > 0;
 * SCAN and KEYS: the pattern's hash tag, when the pattern spells it
 * literally (no glob character or escape before its '}'); commands without
 * a key (PING, TIME, INFO, SCRIPT, CLUSTER, ...): HR_SLOT_ANY; every other
 * command: argv[1].  A multi-key command (DEL k1 k2) is routed by its first
 * key: Redis answers CROSSSLOT when the others are in other slots. */
#ifndef HR_SLOT_H
#define HR_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define HR_SLOT_COUNT 16384
/* hr_slot_of_command(): no key, any master will do. */
#define HR_SLOT_ANY (-1)
/* hr_slot_of_command(): a pattern without a hash tag (SCAN, KEYS), which
 * needs every master. */
#define HR_SLOT_ALL (-2)

/* One argument of a formatted command: bytes inside the command's buffer. */
typedef struct hr_slot_arg {
    const char *p;
    size_t len;
} hr_slot_arg;

/* CRC16-XMODEM (polynomial 0x1021, initial 0) of LEN bytes. */
uint16_t hr_slot_crc16(const char *buf, size_t len);
/* The slot (0..16383) of the key KEY of LEN bytes, hash tag rules applied. */
int hr_slot_of_key(const char *key, size_t len);
/* The slot of the keys a SCAN/KEYS pattern can match: its hash tag's slot
 * when every key it matches has that tag, else HR_SLOT_ALL. */
int hr_slot_of_pattern(const char *pattern, size_t len);
/* Splits the formatted command CMD (RESP multi-bulk, as
 * redisFormatCommand writes it) into its first MAX arguments, pointing into
 * CMD.  The command's number of arguments (which may be more than MAX: only
 * MAX are then filled), or -1 when CMD is not such a command. */
int hr_slot_args(const char *cmd, size_t len, hr_slot_arg *args, int max);
/* The slot of formatted command CMD (see the header), HR_SLOT_ANY or
 * HR_SLOT_ALL.  A buffer that is not a formatted command gets HR_SLOT_ANY:
 * whichever master reads it answers the protocol error. */
int hr_slot_of_command(const char *cmd, size_t len);

#endif
