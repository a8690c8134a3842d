/* dsp_api_routes: the API's route table, one static const table: what the
 * server serves and `herald-dispatcher --print-routes` prints. */
#ifndef DSP_API_ROUTES_H
#define DSP_API_ROUTES_H

#include <stdio.h>

#include "dsp.h"
#include "dsp_api.h"

/* Serves the table (dsp_api_start).  0, or -1 (ERRSTR). */
int dsp_api_routes_start(dsp *d, char *errstr, size_t errlen);
/* Prints the table, "METHOD PATTERN ROLE" a line (ROLE the least role that
 * may call it, or "open"; the probes' server's routes last), on OUT: what
 * --print-routes shows, and what the OpenAPI test compares with
 * schemas/openapi.yaml and the role test calls with a token of each role. */
void dsp_api_routes_print(FILE *out);
/* The table and its length into *N (for the unit test of its roles). */
const dsp_api_route *dsp_api_routes_table(size_t *n);

#endif
