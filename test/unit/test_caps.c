/* test_caps.c — the learned-capabilities file: round trip with the kernel's
 * errnos, invalidation by boot id and by age (and a clock that went back),
 * broken files ignored with a reason, merging of what concurrent plugins
 * learned, atomic writes (no temp file left, a stale one of our pid
 * replaced). No root needed: temp directories only. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "caps.h"
#include "t.h"

#define BOOT_A "0b5e6f52-aaaa-4c3e-9d6a-4f3c2b1a0001"
#define BOOT_B "0b5e6f52-bbbb-4c3e-9d6a-4f3c2b1a0002"
#define T0     ((time_t)1700000000)

/* A fresh, existing directory under t_tmpdir(). */
static void fresh_dir(char *buf, size_t size, const char *name)
{
	t_tmppath(buf, size, name);
	t_rm_rf(buf);
	if (mkdir(buf, 0700) < 0)
		abort();
}

static void write_caps_file(const char *dir, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, CAPS_FILE);
	f = fopen(path, "we");
	if (!f)
		abort();
	fputs(text, f);
	fclose(f);
}

static bool caps_empty(const struct plan_caps *c)
{
	static const struct plan_caps zero;
	return memcmp(c, &zero, sizeof(zero)) == 0;
}

/* What a CI kernel teaches: fq_codel and fq unknown, pedit missing, dctcp. */
static struct plan_caps sample_caps(void)
{
	struct plan_caps c = {0};

	plan_caps_mark_missing(&c, TC_KIND_FQ_CODEL);
	c.missing_errno[TC_KIND_FQ_CODEL] = ENOENT;
	plan_caps_mark_missing(&c, TC_KIND_FQ);
	c.missing_errno[TC_KIND_FQ] = EOPNOTSUPP;
	c.missing_pedit = true;
	c.missing_pedit_errno = EINVAL;
	str_copy(c.cc_missing, sizeof(c.cc_missing), "dctcp bbr2");
	return c;
}

TEST(round_trip_keeps_errnos)
{
	char dir[128], path[256];
	struct plan_caps c = sample_caps(), got;
	struct error e = {0};
	struct stat st;

	fresh_dir(dir, sizeof(dir), "rt");
	CHECK_INT(caps_save_at(dir, BOOT_A, T0, &c, &e), 0);
	snprintf(path, sizeof(path), "%s/%s", dir, CAPS_FILE);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);
	CHECK_INT(t_count_files(dir, ".tmp."), 0);

	CHECK_INT(caps_load_at(dir, BOOT_A, T0 + 10, &got, &e), 1);
	CHECK_INT(got.missing_kinds, c.missing_kinds);
	CHECK(!plan_caps_has(&got, TC_KIND_FQ_CODEL));
	CHECK(!plan_caps_has(&got, TC_KIND_FQ));
	CHECK(plan_caps_has(&got, TC_KIND_HTB));
	CHECK(plan_caps_has(&got, TC_KIND_HTB_CLASS));
	CHECK_INT(got.missing_errno[TC_KIND_FQ_CODEL], ENOENT);
	CHECK_INT(got.missing_errno[TC_KIND_FQ], EOPNOTSUPP);
	CHECK(got.missing_pedit);
	CHECK_INT(got.missing_pedit_errno, EINVAL);
	CHECK_STR(got.cc_missing, "dctcp bbr2");
	CHECK_STR(got.cc_available, ""); /* never persisted */

	/* nothing learned is also a valid file */
	memset(&c, 0, sizeof(c));
	fresh_dir(dir, sizeof(dir), "rt-empty");
	CHECK_INT(caps_save_at(dir, BOOT_A, T0, &c, &e), 0);
	CHECK_INT(caps_load_at(dir, BOOT_A, T0, &got, &e), 1);
	CHECK(caps_empty(&got));
}

/* A class and a qdisc of the same kernel name ("htb") are kept apart. */
TEST(htb_class_and_qdisc_are_distinct)
{
	char dir[128];
	struct plan_caps c = {0}, got;
	struct error e = {0};

	fresh_dir(dir, sizeof(dir), "htb");
	plan_caps_mark_missing(&c, TC_KIND_HTB_CLASS);
	c.missing_errno[TC_KIND_HTB_CLASS] = ENOENT;
	CHECK_INT(caps_save_at(dir, BOOT_A, T0, &c, &e), 0);
	CHECK_INT(caps_load_at(dir, BOOT_A, T0, &got, &e), 1);
	CHECK(!plan_caps_has(&got, TC_KIND_HTB_CLASS));
	CHECK(plan_caps_has(&got, TC_KIND_HTB));
}

TEST(invalidated_by_boot_age_and_clock)
{
	static const struct {
		const char *boot;
		time_t now;
		int want;
	} cases[] = {
	        {BOOT_A, T0, 1},
	        {BOOT_A, T0 + CAPS_MAX_AGE_S, 1},
	        {BOOT_A, T0 + CAPS_MAX_AGE_S + 1, 0}, /* too old: relearn */
	        {BOOT_A, T0 - 1, 0},                  /* the clock went back */
	        {BOOT_B, T0, 0},                      /* rebooted (maybe into another kernel) */
	        {"", T0, 0},
	};
	char dir[128];
	struct plan_caps c = sample_caps(), got;
	struct error e = {0};

	fresh_dir(dir, sizeof(dir), "inval");
	CHECK_INT(caps_save_at(dir, BOOT_A, T0, &c, &e), 0);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		error_clear(&e);
		memset(&got, 0xa5, sizeof(got));
		CHECK_INT(caps_load_at(dir, cases[i].boot, cases[i].now, &got, &e), cases[i].want);
		if (cases[i].want == 0) {
			CHECK(caps_empty(&got));
			CHECK_STR(e.msg, ""); /* not an error: just not usable */
		} else {
			CHECK_INT(got.missing_kinds, c.missing_kinds);
		}
	}

	/* no file at all: nothing known, nothing to complain about */
	fresh_dir(dir, sizeof(dir), "nofile");
	error_clear(&e);
	CHECK_INT(caps_load_at(dir, BOOT_A, T0, &got, &e), 0);
	CHECK(caps_empty(&got));
	CHECK_STR(e.msg, "");
	CHECK_INT(caps_load_at("/tmp/aiqos-test-caps-no-such-dir", BOOT_A, T0, &got, &e), 0);
	CHECK_STR(e.msg, "");
}

TEST(broken_files_ignored_with_a_reason)
{
	static const struct {
		const char *text;
		const char *why;
	} cases[] = {
	        {"", "invalid JSON"},
	        {"not json", "invalid JSON"},
	        {"{\"version\":1,\"bootId\":\"" BOOT_A "\",\"learned\":1700000000", "invalid JSON"},
	        {"[]", "not a JSON object"},
	        {"{}", "version"},
	        {"{\"version\":2,\"bootId\":\"" BOOT_A "\",\"learned\":1700000000}", "version"},
	        {"{\"version\":1,\"bootId\":7,\"learned\":1700000000}", "bootId"},
	        {"{\"version\":1,\"bootId\":\"" BOOT_A "\"}", "learned"},
	        {"{\"version\":1,\"bootId\":\"" BOOT_A "\",\"learned\":\"now\"}", "learned"},
	        {"{\"version\":1,\"bootId\":\"" BOOT_A "\",\"learned\":1700000000,\"missing\":[]}", "missing"},
	        {"{\"version\":1,\"bootId\":\"" BOOT_A "\",\"learned\":1700000000,\"missing\":{\"qdisc/fq\":0}}",
	         "missing.qdisc/fq"},
	        {"{\"version\":1,\"bootId\":\"" BOOT_A "\",\"learned\":1700000000,\"missing\":{\"qdisc/fq\":-2}}",
	         "missing.qdisc/fq"},
	        {"{\"version\":1,\"bootId\":\"" BOOT_A "\",\"learned\":1700000000,\"missing\":{\"qdisc/fq\":2.5}}",
	         "missing.qdisc/fq"},
	        {"{\"version\":1,\"bootId\":\"" BOOT_A "\",\"learned\":1700000000,\"pedit\":\"yes\"}", "pedit"},
	        {"{\"version\":1,\"bootId\":\"" BOOT_A "\",\"learned\":1700000000,\"ccMissing\":\"dctcp\"}",
	         "ccMissing"},
	        {"{\"version\":1,\"bootId\":\"" BOOT_A "\",\"learned\":1700000000,\"ccMissing\":[\"BBR; rm\"]}",
	         "ccMissing"},
	        {"{\"version\":1,\"bootId\":\"" BOOT_A "\",\"learned\":1700000000,\"ccMissing\":[3]}", "ccMissing"},
	};
	char dir[128];
	struct plan_caps got;
	struct error e = {0};

	fresh_dir(dir, sizeof(dir), "broken");
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		write_caps_file(dir, cases[i].text);
		error_clear(&e);
		memset(&got, 0xa5, sizeof(got));
		CHECK_INT(caps_load_at(dir, BOOT_A, T0, &got, &e), 0);
		CHECK(caps_empty(&got));
		CHECK_CONTAINS(e.msg, "ignored");
		CHECK_CONTAINS(e.msg, CAPS_FILE);
		CHECK_CONTAINS(e.msg, cases[i].why);
		if (t_failed_now)
			fprintf(stderr, "  (case %zu: %s)\n", i, cases[i].text);
	}

	/* too large to be ours */
	{
		size_t n = CAPS_FILE_MAX + 10;
		char *big = malloc(n + 1);
		memset(big, ' ', n);
		big[n] = '\0';
		write_caps_file(dir, big);
		free(big);
		error_clear(&e);
		CHECK_INT(caps_load_at(dir, BOOT_A, T0, &got, &e), 0);
		CHECK_CONTAINS(e.msg, "larger than");
	}

	/* a broken file is simply replaced by the next save */
	{
		struct plan_caps c = sample_caps();
		write_caps_file(dir, "garbage");
		CHECK_INT(caps_save_at(dir, BOOT_A, T0, &c, &e), 0);
		CHECK_INT(caps_load_at(dir, BOOT_A, T0, &got, &e), 1);
		CHECK_INT(got.missing_kinds, c.missing_kinds);
	}
}

/* Kinds of a newer aiqos are skipped, the ones this one knows still count. */
TEST(unknown_kinds_ignored)
{
	char dir[128];
	struct plan_caps got;
	struct error e = {0};

	fresh_dir(dir, sizeof(dir), "unknown");
	write_caps_file(dir, "{\"version\":1,\"bootId\":\"" BOOT_A "\",\"learned\":1700000000,"
	                     "\"missing\":{\"qdisc/cake\":2,\"qdisc/fq_codel\":2,\"class/fq\":2},\"future\":true}");
	CHECK_INT(caps_load_at(dir, BOOT_A, T0, &got, &e), 1);
	CHECK_INT(got.missing_kinds, 1u << TC_KIND_FQ_CODEL);
	CHECK_INT(got.missing_errno[TC_KIND_FQ_CODEL], ENOENT);
}

TEST(save_merges_with_the_same_boot_and_keeps_the_first_time)
{
	char dir[128];
	struct plan_caps a = {0}, b = {0}, got;
	struct error e = {0};

	fresh_dir(dir, sizeof(dir), "merge");
	plan_caps_mark_missing(&a, TC_KIND_FQ_CODEL);
	a.missing_errno[TC_KIND_FQ_CODEL] = ENOENT;
	str_copy(a.cc_missing, sizeof(a.cc_missing), "dctcp");
	b.missing_pedit = true;
	b.missing_pedit_errno = ENOENT;
	str_copy(b.cc_missing, sizeof(b.cc_missing), "bbr2 dctcp");

	CHECK_INT(caps_save_at(dir, BOOT_A, T0, &a, &e), 0);
	CHECK_INT(caps_save_at(dir, BOOT_A, T0 + 100, &b, &e), 0); /* another plugin, knowing only b */
	CHECK_INT(caps_load_at(dir, BOOT_A, T0 + 100, &got, &e), 1);
	CHECK(!plan_caps_has(&got, TC_KIND_FQ_CODEL));
	CHECK_INT(got.missing_errno[TC_KIND_FQ_CODEL], ENOENT);
	CHECK(got.missing_pedit);
	CHECK_CONTAINS(got.cc_missing, "dctcp");
	CHECK_CONTAINS(got.cc_missing, "bbr2");
	CHECK_INT(strlen(got.cc_missing), strlen("bbr2 dctcp"));
	/* merging does not make facts live longer than from their first learning */
	CHECK_INT(caps_load_at(dir, BOOT_A, T0 + CAPS_MAX_AGE_S + 1, &got, &e), 0);

	/* a file of another boot is not merged: replaced, with a fresh time */
	CHECK_INT(caps_save_at(dir, BOOT_B, T0 + 200, &b, &e), 0);
	CHECK_INT(caps_load_at(dir, BOOT_B, T0 + 200, &got, &e), 1);
	CHECK(plan_caps_has(&got, TC_KIND_FQ_CODEL));
	CHECK(got.missing_pedit);
	CHECK_INT(caps_load_at(dir, BOOT_B, T0 + 200 + CAPS_MAX_AGE_S, &got, &e), 1);
	/* nor one that expired */
	CHECK_INT(caps_save_at(dir, BOOT_B, T0 + 200 + CAPS_MAX_AGE_S + 1, &a, &e), 0);
	CHECK_INT(caps_load_at(dir, BOOT_B, T0 + 200 + CAPS_MAX_AGE_S + 1, &got, &e), 1);
	CHECK(!got.missing_pedit);
	CHECK(!plan_caps_has(&got, TC_KIND_FQ_CODEL));
}

TEST(learned_more_table)
{
	struct plan_caps none = {0}, fqc = {0}, fqc_fq = {0}, pedit = {0}, cc1 = {0}, cc2 = {0}, cc_rev = {0};

	plan_caps_mark_missing(&fqc, TC_KIND_FQ_CODEL);
	fqc_fq = fqc;
	plan_caps_mark_missing(&fqc_fq, TC_KIND_FQ);
	pedit.missing_pedit = true;
	str_copy(cc1.cc_missing, sizeof(cc1.cc_missing), "dctcp");
	str_copy(cc2.cc_missing, sizeof(cc2.cc_missing), "dctcp bbr2");
	str_copy(cc_rev.cc_missing, sizeof(cc_rev.cc_missing), "bbr2 dctcp");

	static const struct {
		int a, b;
		bool more;
	} cases[] = {
	        {0, 0, false}, {0, 1, true}, {1, 0, false}, {1, 2, true},  {2, 1, false}, {0, 3, true}, {3, 3, false},
	        {0, 4, true},  {4, 5, true}, {5, 4, false}, {5, 6, false}, {6, 5, false}, {1, 4, true}, {4, 1, true},
	};
	const struct plan_caps *v[] = {&none, &fqc, &fqc_fq, &pedit, &cc1, &cc2, &cc_rev};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		CHECK_INT(caps_learned_more(v[cases[i].a], v[cases[i].b]), cases[i].more);
		if (t_failed_now)
			fprintf(stderr, "  (case %zu)\n", i);
	}
}

/* Plugins run concurrently: every save is atomic (the file always parses),
 * no temp file is left, and what each one learned survives unless another
 * rename raced it (then it is simply learned again). */
TEST(concurrent_saves)
{
	enum { N = 8 };
	char dir[128];
	struct plan_caps got;
	struct error e = {0};
	pid_t pids[N];

	fresh_dir(dir, sizeof(dir), "conc");
	for (int i = 0; i < N; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			struct plan_caps c = {0};
			int bad = 0;
			/* each child knows one kind missing (and the same pedit) */
			plan_caps_mark_missing(&c, (enum tc_kind_id)(i % _TC_KIND_MAX));
			c.missing_errno[i % _TC_KIND_MAX] = ENOENT;
			c.missing_pedit = true;
			c.missing_pedit_errno = ENOENT;
			for (int round = 0; round < 20; round++) {
				struct plan_caps r;
				if (caps_save_at(dir, BOOT_A, T0, &c, NULL) < 0)
					bad = 1;
				/* whatever a reader sees is a whole file */
				if (caps_load_at(dir, BOOT_A, T0, &r, NULL) != 1 || !r.missing_pedit)
					bad = 1;
			}
			_exit(bad);
		}
	}
	for (int i = 0; i < N; i++) {
		int st = 0;
		CHECK(pids[i] > 0 && waitpid(pids[i], &st, 0) == pids[i]);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	CHECK_INT(t_count_files(dir, ".tmp."), 0);
	CHECK_INT(caps_load_at(dir, BOOT_A, T0, &got, &e), 1);
	CHECK(got.missing_pedit);
	CHECK(got.missing_kinds != 0);

	/* once the race is over, a save merges everything into the file */
	for (int i = 0; i < N; i++) {
		struct plan_caps c = {0};
		plan_caps_mark_missing(&c, (enum tc_kind_id)(i % _TC_KIND_MAX));
		CHECK_INT(caps_save_at(dir, BOOT_A, T0, &c, &e), 0);
	}
	CHECK_INT(caps_load_at(dir, BOOT_A, T0, &got, &e), 1);
	for (int i = 0; i < N; i++)
		CHECK(!plan_caps_has(&got, (enum tc_kind_id)(i % _TC_KIND_MAX)));
}

TEST(save_errors_and_leftovers)
{
	char dir[128], tmp[256];
	struct plan_caps c = sample_caps(), got;
	struct error e = {0};

	/* a temp file of a crashed process that had our pid */
	fresh_dir(dir, sizeof(dir), "leftover");
	snprintf(tmp, sizeof(tmp), "%s/%s.tmp.%ld", dir, CAPS_FILE, (long)getpid());
	CHECK(close(open(tmp, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) == 0);
	CHECK_INT(caps_save_at(dir, BOOT_A, T0, &c, &e), 0);
	CHECK_INT(t_count_files(dir, ".tmp."), 0);
	CHECK_INT(caps_load_at(dir, BOOT_A, T0, &got, &e), 1);

	/* the directory must exist (the plugin's state save creates it) */
	snprintf(tmp, sizeof(tmp), "%s/missing-dir", t_tmpdir());
	CHECK_INT(caps_save_at(tmp, BOOT_A, T0, &c, &e), -ENOENT);
	CHECK_CONTAINS(e.msg, tmp);
	CHECK_INT(e.errnum, ENOENT); /* the errno, unclassified: CNI codes are cni/'s */
	CHECK_INT(e.code, 0);
	CHECK_INT(caps_save_at("", BOOT_A, T0, &c, &e), -EINVAL);
}

TEST(boot_id_of_this_kernel)
{
	char id[CAPS_BOOT_ID_MAX];
	struct error e = {0};

	CHECK_INT(caps_boot_id(id, sizeof(id), &e), 0);
	CHECK_INT(strlen(id), 36); /* a UUID */
	CHECK(strchr(id, '\n') == NULL);
	CHECK_INT(caps_boot_id(id, 1, &e), -EINVAL);
}

/* The plugin's calls: this kernel's boot id and the current time. */
TEST(load_and_save_for_this_boot)
{
	char dir[128], id[CAPS_BOOT_ID_MAX];
	struct plan_caps c = sample_caps(), got;
	struct error e = {0};

	fresh_dir(dir, sizeof(dir), "thisboot");
	CHECK_INT(caps_load(dir, &got, &e), 0); /* no file: nothing, no complaint */
	CHECK_STR(e.msg, "");
	CHECK_INT(caps_save(dir, &c, &e), 0);
	CHECK_INT(caps_load(dir, &got, &e), 1);
	CHECK_INT(got.missing_kinds, c.missing_kinds);
	CHECK_STR(got.cc_missing, c.cc_missing);
	/* bound to this boot */
	CHECK_INT(caps_boot_id(id, sizeof(id), &e), 0);
	CHECK_INT(caps_load_at(dir, id, time(NULL), &got, &e), 1);
	CHECK_INT(caps_load_at(dir, BOOT_B, time(NULL), &got, &e), 0);
	/* a broken file is reported, not used */
	write_caps_file(dir, "{");
	CHECK_INT(caps_load(dir, &got, &e), 0);
	CHECK_CONTAINS(e.msg, "ignored");
	CHECK(caps_empty(&got));
}
