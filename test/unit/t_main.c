/* t_main.c — the runner behind t.h, linked into every unit test binary,
 * and the scratch directory the tests share (t_tmpdir). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

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

static char t_dir[128];
static pid_t t_dir_owner;

void t_rm_rf(const char *path)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "  cleanup of %s failed\n", path);
}

static void t_tmpdir_remove(void)
{
	if (t_dir[0] && getpid() == t_dir_owner)
		t_rm_rf(t_dir);
}

const char *t_tmpdir(void)
{
	if (!t_dir[0]) {
		const char *name = program_invocation_short_name;

		if (strncmp(name, "test_", 5) == 0)
			name += 5;
		snprintf(t_dir, sizeof(t_dir), "/tmp/aqt-%.64s.XXXXXX", name);
		if (!mkdtemp(t_dir)) {
			fprintf(stderr, "  mkdtemp %s: %s\n", t_dir, strerror(errno));
			abort();
		}
		t_dir_owner = getpid();
		atexit(t_tmpdir_remove);
	}
	return t_dir;
}

char *t_tmppath(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", t_tmpdir(), name);
	return buf;
}
