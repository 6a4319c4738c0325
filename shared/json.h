/* json.h — small cJSON helpers shared by the parsers of the plugin and the
 * agent. */
#ifndef AIQOS_JSON_H
#define AIQOS_JSON_H

#include <cjson/cJSON.h>

#include "util.h"

/* `_cleanup_json_ cJSON *j = ...;` deletes j when it goes out of scope
 * (cJSON_Delete(NULL) is a no-op). */
static inline void json_deletep(cJSON **j)
{
	cJSON_Delete(*j);
}
#define _cleanup_json_ _cleanup_(json_deletep)

/* "a string", "a number", "a boolean", "null", "an array", "an object" (or
 * "invalid") for "expected X, got Y" messages. */
const char *json_type_name(const cJSON *v);

#endif
