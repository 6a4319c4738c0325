/* status.h — what `aiqosctl status` and `explain` show (status.c): the
 * agent's state as the protocol's JSON documents (proto.h). */
#ifndef AIQOS_AGENT_STATUS_H
#define AIQOS_AGENT_STATUS_H

#include <stdbool.h>

struct agent;
struct cJSON;

struct cJSON *agent_status_json(struct agent *ag);
struct cJSON *agent_explain_json(struct agent *ag, const char *ns, const char *name, bool *ret_found);

#endif
