/* fuzz_config: hr_config_load_buffer on arbitrary bytes.  Besides what the
 * sanitizers catch, it checks the loader's contract: success gives a config
 * with at least one channel, and failure gives a message that names the
 * file ("fuzz.yaml:line:col: ...") or the environment override at fault. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hr_config *cfg = NULL;
    char err[512];
    int rc;

    rc = hr_config_load_buffer("fuzz.yaml", (const char *)data, size, &cfg, err, sizeof err);
    if (rc == 0) {
        if (cfg == NULL || cfg->nchannels == 0 || cfg->channels == NULL) {
            fprintf(stderr, "fuzz_config: success without channels\n");
            abort();
        }
    } else if (rc != -1 || cfg != NULL ||
               (strncmp(err, "fuzz.yaml:", 10) != 0 && strncmp(err, "HERALD_", 7) != 0)) {
        fprintf(stderr, "fuzz_config: rc=%d cfg=%p unexpected error \"%s\"\n", rc, (void *)cfg,
                err);
        abort();
    }
    hr_config_free(cfg);
    return 0;
}
