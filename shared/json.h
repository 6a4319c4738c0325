/* json.h — small cJSON helpers shared by the parsers of the plugin and the
 * agent. */
#ifndef AIQOS_JSON_H
#define AIQOS_JSON_H

#include <cjson/cJSON.h>

/* "a string", "a number", "a boolean", "null", "an array", "an object" (or
 * "invalid") for "expected X, got Y" messages. */
const char *json_type_name(const cJSON *v);

#endif
