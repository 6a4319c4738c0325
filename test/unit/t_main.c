/* t_main.c — the runner behind t.h, linked into every unit test binary. */
#include <stdlib.h>

#include "t.h"

#define T_MAX_CASES 512

struct t_case t_cases[T_MAX_CASES];
unsigned t_n_cases;
int t_failed_now;

void t_register(const char *name, void (*fn)(void))
{
	if (t_n_cases < T_MAX_CASES)
		t_cases[t_n_cases++] = (struct t_case){name, fn};
}

int main(int argc, char **argv)
{
	unsigned passed = 0, failed = 0;
	const char *only = argc > 1 ? argv[1] : NULL;

	for (unsigned i = 0; i < t_n_cases; i++) {
		if (only && !strstr(t_cases[i].name, only))
			continue;
		t_failed_now = 0;
		t_cases[i].fn();
		printf("%s %s\n", t_failed_now ? "FAIL" : "ok  ", t_cases[i].name);
		if (t_failed_now)
			failed++;
		else
			passed++;
	}
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
