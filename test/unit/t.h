/* t.h — a minimal table-driven unit test harness: TEST(name) defines a case,
 * CHECK*(...) record failures without stopping the case, and the generated
 * main() runs every case and ends with "N passed, N failed". Exit 1 on any
 * failure. One binary per module under test. */
#ifndef AIQOS_T_H
#define AIQOS_T_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

struct t_case {
	const char *name;
	void (*fn)(void);
};

extern struct t_case t_cases[];
extern unsigned t_n_cases;
extern int t_failed_now;

void t_register(const char *name, void (*fn)(void));

#define TEST(name)                                                \
	static void test_##name(void);                            \
	__attribute__((constructor)) static void reg_##name(void) \
	{                                                         \
		t_register(#name, test_##name);                   \
	}                                                         \
	static void test_##name(void)

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
			t_failed_now = 1;                                                          \
		}                                                                                  \
	} while (0)

#define CHECK_INT(a, b)                                                                                               \
	do {                                                                                                          \
		long long _a = (long long)(a), _b = (long long)(b);                                                   \
		if (_a != _b) {                                                                                       \
			fprintf(stderr, "  %s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a, _a, #b, \
			        _b);                                                                                  \
			t_failed_now = 1;                                                                             \
		}                                                                                                     \
	} while (0)

#define CHECK_STR(a, b)                                                                                     \
	do {                                                                                                \
		const char *_a = (a), *_b = (b);                                                            \
		if (!_a || !_b || strcmp(_a, _b) != 0) {                                                    \
			fprintf(stderr, "  %s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a, \
			        _a ? _a : "(null)", _b ? _b : "(null)");                                    \
			t_failed_now = 1;                                                                   \
		}                                                                                           \
	} while (0)

/* Substring check */
#define CHECK_CONTAINS(hay, needle)                                                                      \
	do {                                                                                             \
		const char *_h = (hay), *_n = (needle);                                                  \
		if (!_h || !strstr(_h, _n)) {                                                            \
			fprintf(stderr, "  %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, \
			        _h ? _h : "(null)", _n);                                                 \
			t_failed_now = 1;                                                                \
		}                                                                                        \
	} while (0)

/* ---- fixtures every test shares (t_fixture.c) ---- */

/* The binary's scratch directory, /tmp/aqt-<name>.XXXXXX (<name>: the
 * binary's without "test_"): made on first use, removed whole at exit by
 * the process that made it (not by forked children). Aborts if it cannot be
 * made. */
const char *t_tmpdir(void);
/* "<t_tmpdir()>/<name>" into buf (returned). */
char *t_tmppath(char *buf, size_t size, const char *name);
/* rm -rf path; says so on stderr when that fails. */
void t_rm_rf(const char *path);
/* The path of the built program name into buf (returned): $env when set,
 * else <build>/bin/<name> beside this binary (<build>/test/test_x), else
 * build/bin/<name>. */
char *t_program(char *buf, size_t size, const char *env, const char *name);
/* The whole file at path (at most 16 MiB) in a NUL-terminated heap buffer
 * the caller frees; NULL with errno set when it cannot be read. */
char *t_read_file(const char *path);
/* Compare got with the golden file $AIQOS_GOLDEN_DIR/name (default
 * test/unit/golden, relative to the repository root), failing the case
 * with the first differing line; AIQOS_UPDATE_GOLDEN=1 rewrites the file. */
void t_golden_check(const char *name, const char *got);
/* system() of the formatted command: its exit status, -1 when it did not
 * exit (a signal) or could not run. */
int t_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* cJSON_Parse of text; NULL (saying so on stderr) when it is not JSON. */
struct cJSON;
struct cJSON *t_json(const char *text);
/* How many entries of dir have part in their name (0 when dir cannot be read). */
unsigned t_count_files(const char *dir, const char *part);

#endif
