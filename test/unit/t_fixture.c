/* t_fixture.c — what the unit tests share besides the runner (t.h): a
 * scratch directory per binary, the path of a built program, whole-file
 * reads, golden files, shell commands, JSON and directory listings. Linked
 * into every unit test binary. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "file.h"
#include "t.h"

#define T_READ_MAX (16u << 20)

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

char *t_program(char *buf, size_t size, const char *env, const char *name)
{
	const char *v = getenv(env);
	char self[512];
	ssize_t n;

	if (v && v[0]) {
		snprintf(buf, size, "%s", v);
		return buf;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		snprintf(buf, size, "build/bin/%s", name);
		return buf;
	}
	self[n] = '\0';
	/* dirname() cuts in place: twice gives the build directory */
	snprintf(buf, size, "%s/bin/%s", dirname(dirname(self)), name);
	return buf;
}

char *t_read_file(const char *path)
{
	char *buf = NULL;
	int r = file_read_bounded(path, T_READ_MAX, 0, &buf, NULL, NULL, NULL);

	if (r < 0) {
		errno = -r;
		return NULL;
	}
	return buf;
}

/* Say where want and got first differ, line by line. */
static void t_show_first_difference(const char *path, const char *want, const char *got)
{
	const char *w = want, *g = got;
	unsigned line = 1;

	while (*w && *w == *g) {
		if (*w == '\n')
			line++;
		w++;
		g++;
	}
	while (w > want && w[-1] != '\n')
		w--, g--;
	fprintf(stderr,
	        "  %s differs at line %u (AIQOS_UPDATE_GOLDEN=1 rewrites it):\n    want: %.*s\n    got:  %.*s\n", path,
	        line, (int)strcspn(w, "\n"), w, (int)strcspn(g, "\n"), g);
}

void t_golden_check(const char *name, const char *got)
{
	const char *env = getenv("AIQOS_GOLDEN_DIR");
	const char *dir = env && env[0] ? env : "test/unit/golden";
	const char *update = getenv("AIQOS_UPDATE_GOLDEN");
	char path[512];
	struct stat st;
	char *want;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "  golden directory %s not found: run the tests from the repository root\n", dir);
		t_failed_now = 1;
		return;
	}
	if (update && strcmp(update, "1") == 0) {
		FILE *f = fopen(path, "we");

		if (!f || fputs(got, f) < 0) {
			fprintf(stderr, "  cannot write %s: %s\n", path, strerror(errno));
			t_failed_now = 1;
		} else {
			fprintf(stderr, "  updated %s\n", path);
		}
		if (f)
			fclose(f);
		return;
	}
	want = t_read_file(path);
	if (!want) {
		fprintf(stderr, "  %s: %s (AIQOS_UPDATE_GOLDEN=1 creates it)\n", path, strerror(errno));
		t_failed_now = 1;
		return;
	}
	if (strcmp(want, got) != 0) {
		t_show_first_difference(path, want, got);
		t_failed_now = 1;
	}
	free(want);
}

int t_sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

cJSON *t_json(const char *text)
{
	cJSON *j = cJSON_Parse(text);

	if (!j)
		fprintf(stderr, "  bad test JSON: %s\n", text);
	return j;
}

unsigned t_count_files(const char *dir, const char *part)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (strstr(de->d_name, part))
			n++;
	closedir(d);
	return n;
}
