/* failpoint.h — named points where the fault-injection tests crash or stall
 * a process on purpose. $AIQOS_TEST_FAILPOINTS lists "<name>=<action>" pairs
 * separated by commas; an action is "kill" (SIGKILL to itself: a crash at
 * exactly that point) or "sleep:<ms>". Unset — every real deployment — a
 * failpoint costs one getenv(). The names are listed where they are used
 * (grep "failpoint(\"" and "failpoint_quiet(\"").
 *
 * The library never logs: its points (failpoint_quiet) act without a word,
 * and a program says at start which points are armed
 * (log_failpoints_armed()); the programs' own points (failpoint(), in the
 * programs' logging module, log.h) are logged when reached. */
#ifndef AIQOS_FAILPOINT_H
#define AIQOS_FAILPOINT_H

#include "util.h"

#define FAILPOINT_ENV "AIQOS_TEST_FAILPOINTS"

/* The action armed for name, copied into action; false when none is. */
bool failpoint_armed(const char *name, char *action, size_t size);
/* Carry an action out: "kill" (SIGKILL), "sleep:<ms>" (at most 60 s).
 * Points that can fail instead test for their own action ("refuse":
 * agent-classifier-load, the uplink classifier's program not loaded). */
void failpoint_act(const char *action);
/* A point of the library: the armed action, if any, silently. */
void failpoint_quiet(const char *name);

#endif
