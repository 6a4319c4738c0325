/* trust.h — may the uplink classify by DSCP (trust.c)? True unless classify
 * "dscp" and some pod's marks cannot be guaranteed: then logged, an Event,
 * and ag->classify_why says why. And the record's/plan's marking in effect. */
#ifndef AIQOS_AGENT_NODE_TRUST_H
#define AIQOS_AGENT_NODE_TRUST_H

#include <stdbool.h>

struct agent;
struct cJSON;
struct plan;

bool agent_dscp_trusted(struct agent *ag);
bool agent_plan_marks(const struct plan *p);
bool agent_choices_mark(const struct cJSON *choices);

#endif
