/* test_failpoint.c — $AIQOS_TEST_FAILPOINTS parsing (shared/failpoint.c) and
 * the quiet library point: the armed action of a name, exact name matches
 * only, sleeps carried out, nothing done when unset. */
#include <time.h>

#include "failpoint.h"
#include "t.h"

TEST(failpoint_armed_finds_the_action_of_a_name)
{
	static const struct {
		const char *spec, *name, *action; /* action NULL: not armed */
	} cases[] = {
	        {"a=kill", "a", "kill"},
	        {"a=kill,b=sleep:20", "b", "sleep:20"},
	        {"a=kill,b=sleep:20", "a", "kill"},
	        {"ab=kill", "a", NULL},
	        {"a=kill", "ab", NULL},
	        {"xa=kill,a=sleep:1", "a", "sleep:1"},
	        {"", "a", NULL},
	        {"a", "a", NULL},
	        {NULL, "a", NULL},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char action[32] = "";
		bool armed;

		if (cases[i].spec)
			setenv(FAILPOINT_ENV, cases[i].spec, 1);
		else
			unsetenv(FAILPOINT_ENV);
		armed = failpoint_armed(cases[i].name, action, sizeof(action));
		if (armed != (cases[i].action != NULL) || (armed && !streq(action, cases[i].action))) {
			fprintf(stderr, "  \"%s\" name %s: armed %d action \"%s\"\n", cases[i].spec ?: "(unset)",
			        cases[i].name, armed, action);
			CHECK(false);
		}
	}
	unsetenv(FAILPOINT_ENV);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

TEST(failpoint_quiet_sleeps_when_armed_only)
{
	double t0;

	setenv(FAILPOINT_ENV, "other=kill,here=sleep:30", 1);
	t0 = now_ms();
	failpoint_quiet("here");
	CHECK(now_ms() - t0 >= 30.0);
	/* another name's action (a kill) is not this one's */
	failpoint_quiet("elsewhere");
	unsetenv(FAILPOINT_ENV);
	t0 = now_ms();
	failpoint_quiet("here");
	CHECK(now_ms() - t0 < 30.0);
	/* an invalid or too long sleep does nothing */
	failpoint_act("sleep:x");
	failpoint_act("sleep:600000");
	failpoint_act("nothing");
}
