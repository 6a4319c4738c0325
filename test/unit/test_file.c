/* test_file.c — the bounded file reader (shared/file.c): whole files up to
 * the limit, refusals (too large, not regular, FIFO without blocking,
 * symlink with FILE_READ_NOFOLLOW, absent) with their messages, /proc
 * files (fstat says 0 bytes); a stream (a pipe) read to its end. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "file.h"
#include "t.h"

static char dir[] = "/tmp/aiqos-test-file.XXXXXX";

static const char *tmp(const char *name);

static void rm_dir(void)
{
	static const char *const names[] = {"f", "fifo", "target", "link"};

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		unlink(tmp(names[i]));
	rmdir(tmp("d"));
	rmdir(dir);
}

static const char *tmp(const char *name)
{
	static char path[256];
	static bool made; /* not strchr(dir, 'X'): the random suffix may hold an X */

	if (!made) {
		made = true;
		if (!mkdtemp(dir))
			abort();
		atexit(rm_dir);
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

static const char *put(const char *name, const char *data, size_t len)
{
	const char *path = tmp(name);
	FILE *f = fopen(path, "we");

	if (!f)
		abort();
	fwrite(data, 1, len, f);
	fclose(f);
	return path;
}

TEST(file_reads_whole_files_up_to_the_limit)
{
	static const struct {
		size_t len, max;
		int r;
	} cases[] = {
	        {0, 10, 0},           {1, 10, 0},       {10, 10, 0},       {11, 10, -EFBIG},  {4096, 4096, 0},
	        {4097, 4096, -EFBIG}, {5000, 65536, 0}, {10000, 65536, 0}, {65536, 65536, 0}, {65537, 65536, -EFBIG},
	};
	static char data[70000];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)('a' + i % 26);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		for (unsigned secret = 0; secret < 2; secret++) {
			const char *path = put("f", data, cases[i].len);
			struct error e = {0};
			struct stat st;
			char *buf = NULL, want[64];
			size_t len = 99;
			int r = file_read_bounded(path, cases[i].max, secret ? FILE_READ_SECRET : 0, &buf, &len, &st,
			                          &e);

			if (r != cases[i].r)
				fprintf(stderr, "  len %zu max %zu secret %u: %d (%s)\n", cases[i].len, cases[i].max,
				        secret, r, e.msg);
			CHECK_INT(r, cases[i].r);
			if (r == 0) {
				CHECK_INT(len, cases[i].len);
				CHECK_INT(st.st_size, cases[i].len);
				CHECK(buf != NULL && buf[len] == '\0' && memcmp(buf, data, len) == 0);
			} else {
				snprintf(want, sizeof(want), "larger than %zu bytes", cases[i].max);
				CHECK_STR(e.msg, want);
				CHECK_INT(e.errnum, EFBIG);
			}
			free(buf);
		}
	}
}

TEST(file_refusals_name_the_reason)
{
	struct error e = {0};
	char *buf = NULL, path[300];
	int r;

	/* absent: strerror, errno kept */
	r = file_read_bounded(tmp("absent"), 100, 0, &buf, NULL, NULL, &e);
	CHECK_INT(r, -ENOENT);
	CHECK_STR(e.msg, "No such file or directory");
	CHECK(buf == NULL);

	/* a directory */
	snprintf(path, sizeof(path), "%s", tmp("d"));
	CHECK_INT(mkdir(path, 0700), 0);
	CHECK_INT(file_read_bounded(path, 100, 0, &buf, NULL, NULL, &e), -EINVAL);
	CHECK_STR(e.msg, "not a regular file");

	/* a FIFO with no writer: refused at once, not waited on */
	snprintf(path, sizeof(path), "%s", tmp("fifo"));
	CHECK_INT(mkfifo(path, 0600), 0);
	CHECK_INT(file_read_bounded(path, 100, 0, &buf, NULL, NULL, &e), -EINVAL);
	CHECK_STR(e.msg, "not a regular file");

	/* a symlink: followed by default, refused with FILE_READ_NOFOLLOW */
	put("target", "x", 1);
	snprintf(path, sizeof(path), "%s", tmp("link"));
	CHECK_INT(symlink("target", path), 0);
	CHECK_INT(file_read_bounded(path, 100, 0, &buf, NULL, NULL, &e), 0);
	CHECK_STR(buf, "x");
	free(buf);
	buf = NULL;
	CHECK_INT(file_read_bounded(path, 100, FILE_READ_NOFOLLOW, &buf, NULL, NULL, &e), -ELOOP);
	CHECK(buf == NULL);

	/* a path through a regular file */
	snprintf(path, sizeof(path), "%s/x", tmp("target"));
	CHECK_INT(file_read_bounded(path, 100, 0, &buf, NULL, NULL, &e), -ENOTDIR);
	CHECK_STR(e.msg, "Not a directory");

	/* err may be NULL */
	CHECK_INT(file_read_bounded(tmp("absent"), 100, 0, &buf, NULL, NULL, NULL), -ENOENT);
}

TEST(file_reads_proc_files_of_size_zero)
{
	char *buf = NULL;
	size_t len = 0;
	struct error e = {0};

	/* fstat says 0 bytes; the data is there (and longer than one read) */
	CHECK_INT(file_read_bounded("/proc/self/status", 1 << 20, 0, &buf, &len, NULL, &e), 0);
	CHECK(len > 0 && buf && strstr(buf, "Name:") != NULL);
	CHECK_INT(strlen(buf), len);
	free(buf);
	buf = NULL;
	/* more than the first guess (fstat + 4 KiB): the buffer grows */
	CHECK_INT(file_read_bounded("/proc/self/smaps", 1 << 24, 0, &buf, &len, NULL, &e), 0);
	CHECK(len > 8192 && buf && strlen(buf) == len);
	free(buf);
	buf = NULL;
	CHECK_INT(file_read_bounded("/proc/self/smaps", 1 << 24, FILE_READ_SECRET, &buf, &len, NULL, &e), 0);
	CHECK(len > 8192 && buf && strlen(buf) == len);
	free(buf);
	buf = NULL;
	/* and a limit still holds for them */
	CHECK_INT(file_read_bounded("/proc/self/status", 16, 0, &buf, &len, NULL, &e), -EFBIG);
	CHECK(buf == NULL);
}

TEST(file_read_stream_reads_to_the_end_within_the_limit)
{
	static const struct {
		size_t len, max;
		int r;
	} cases[] = {
	        {0, 10, 0},          {10, 10, 0},          {11, 10, -EFBIG},        {16383, 1 << 20, 0},
	        {16384, 1 << 20, 0}, {100000, 1 << 20, 0}, {100000, 99999, -EFBIG}, {100000, 100000, 0},
	};
	static char data[100000];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)('a' + i % 26);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		/* a pipe: no size known in advance, reads end at EOF */
		int fds[2];
		FILE *in;
		char *buf = NULL;
		size_t len = 99;
		struct error e = {0};
		pid_t pid;
		int r;

		CHECK_INT(pipe(fds), 0);
		pid = fork();
		if (pid == 0) {
			close(fds[0]);
			for (size_t off = 0; off < cases[i].len;) {
				ssize_t n = write(fds[1], data + off, cases[i].len - off);
				if (n <= 0)
					_exit(1);
				off += (size_t)n;
			}
			_exit(0);
		}
		close(fds[1]);
		in = fdopen(fds[0], "r");
		r = file_read_stream(in, cases[i].max, &buf, &len, &e);
		fclose(in);
		waitpid(pid, NULL, 0);
		if (r != cases[i].r)
			fprintf(stderr, "  len %zu max %zu: %d (%s)\n", cases[i].len, cases[i].max, r, e.msg);
		CHECK_INT(r, cases[i].r);
		if (r == 0) {
			CHECK_INT(len, cases[i].len);
			CHECK(buf != NULL && buf[len] == '\0' && memcmp(buf, data, len) == 0);
		} else {
			char want[64];
			snprintf(want, sizeof(want), "larger than %zu bytes", cases[i].max);
			CHECK_STR(e.msg, want);
		}
		free(buf);
	}
}
