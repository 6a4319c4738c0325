/* failpoint.c — see failpoint.h. */
#include <signal.h>
#include <time.h>

#include "failpoint.h"

/* The action of name in spec ("a=kill,b=sleep:20"), copied into buf; false
 * when name is not there. */
static bool spec_action(const char *spec, const char *name, char *buf, size_t size)
{
	size_t n = strlen(name);

	for (const char *p = spec; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
		if (strncmp(p, name, n) != 0 || p[n] != '=')
			continue;
		p += n + 1;
		snprintf(buf, size, "%.*s", (int)strcspn(p, ","), p);
		return true;
	}
	return false;
}

bool failpoint_armed(const char *name, char *action, size_t size)
{
	const char *spec = getenv(FAILPOINT_ENV);

	return spec && spec_action(spec, name, action, size);
}

void failpoint_act(const char *action)
{
	char *end;
	unsigned long ms;

	if (streq(action, "kill")) {
		raise(SIGKILL);
	} else if (!strncmp(action, "sleep:", 6)) {
		errno = 0;
		ms = strtoul(action + 6, &end, 10);
		if (!errno && !*end && ms <= 60000) {
			struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
	}
}

void failpoint_quiet(const char *name)
{
	char action[32];

	if (failpoint_armed(name, action, sizeof(action)))
		failpoint_act(action);
}
