/* fuzz_chunkmsg: hr_chunkmsg_decode on arbitrary bytes.  A message that
 * decodes must survive a round trip: encoding it and decoding the result
 * gives the same fields, and its key encodes too.  A rejected message must
 * come with a reason. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_chunkmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hr_chunkmsg msg, again;
    char buf[HR_CHUNKMSG_MAX_BYTES], key[64], err[256] = "";
    int n;

    if (hr_chunkmsg_decode(data, size, &msg, err, sizeof err) < 0) {
        if (err[0] == '\0') {
            fprintf(stderr, "fuzz_chunkmsg: rejected without a reason\n");
            abort();
        }
        return 0;
    }
    n = hr_chunkmsg_encode(&msg, buf, sizeof buf);
    if (n < 0 || hr_chunkmsg_decode(buf, (size_t)n, &again, err, sizeof err) < 0) {
        fprintf(stderr, "fuzz_chunkmsg: re-encoding failed (n=%d): %s\n", n, err);
        abort();
    }
    if (memcmp(&msg, &again, sizeof msg) != 0) {
        fprintf(stderr, "fuzz_chunkmsg: round trip changed the message: %.*s\n", n, buf);
        abort();
    }
    if (hr_chunkmsg_key(&msg, false, key, sizeof key) < 0 ||
        hr_chunkmsg_key(&msg, true, key, sizeof key) < 0) {
        fprintf(stderr, "fuzz_chunkmsg: key does not fit in %zu bytes\n", sizeof key);
        abort();
    }
    return 0;
}
