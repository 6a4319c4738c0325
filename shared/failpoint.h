/* failpoint.h — named points where the fault-injection tests crash or stall
 * a process on purpose. $AIQOS_TEST_FAILPOINTS lists "<name>=<action>" pairs
 * separated by commas; an action is "kill" (SIGKILL to itself: a crash at
 * exactly that point) or "sleep:<ms>". Unset — every real deployment — a
 * failpoint costs one getenv(). The names are listed where they are used
 * (grep "failpoint(\""). */
#ifndef AIQOS_FAILPOINT_H
#define AIQOS_FAILPOINT_H

#define FAILPOINT_ENV "AIQOS_TEST_FAILPOINTS"

void failpoint(const char *name);

#endif
