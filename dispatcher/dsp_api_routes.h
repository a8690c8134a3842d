/* dsp_api_routes: the API's route table, one static const table: what the
 * server serves and `herald-dispatcher --print-routes` prints. */
#ifndef DSP_API_ROUTES_H
#define DSP_API_ROUTES_H

#include <stdio.h>

#include "dsp.h"

/* Serves the table (dsp_api_start).  0, or -1 (ERRSTR). */
int dsp_api_routes_start(dsp *d, char *errstr, size_t errlen);
/* Prints the table, "METHOD PATTERN" a line (GET routes answer HEAD too),
 * on OUT: what --print-routes shows and the OpenAPI test compares with
 * schemas/openapi.yaml. */
void dsp_api_routes_print(FILE *out);

#endif
