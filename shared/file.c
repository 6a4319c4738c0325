/* file.c — see file.h. */
#include <fcntl.h>

#include "file.h"

static void drop(char *buf, size_t size, unsigned flags)
{
	if (buf && (flags & FILE_READ_SECRET))
		explicit_bzero(buf, size);
	free(buf);
}

int file_read_bounded(const char *path, size_t max, unsigned flags, char **ret, size_t *ret_len, struct stat *ret_st,
                      struct error *err)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	char *buf;
	size_t len = 0, cap, cap_max;

	/* O_NONBLOCK: opening a FIFO must not wait for a writer */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (flags & FILE_READ_NOFOLLOW ? O_NOFOLLOW : 0));
	if (fd < 0)
		return error_set(err, errno, "%s", strerror(errno));
	if (fstat(fd, &st) < 0)
		return error_set(err, errno, "%s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return error_set(err, EINVAL, "not a regular file");
	if ((uint64_t)st.st_size > max)
		return error_set(err, EFBIG, "larger than %zu bytes", max);
	/* data up to max + 1 bytes (to see the limit exceeded) and the NUL */
	cap_max = max + 2;
	/* sized by fstat, with room for a file that grows meanwhile; grown
	 * to the limit only if needed (a secret is never copied) */
	cap = flags & FILE_READ_SECRET || (size_t)st.st_size + 4097 > cap_max ? cap_max : (size_t)st.st_size + 4097;
	buf = malloc(cap);
	if (!buf)
		return error_set(err, ENOMEM, "out of memory");
	for (;;) {
		ssize_t n;

		if (len + 1 == cap) {
			char *nbuf = realloc(buf, cap_max);
			if (!nbuf) {
				drop(buf, cap, flags);
				return error_set(err, ENOMEM, "out of memory");
			}
			buf = nbuf;
			cap = cap_max;
		}
		n = read(fd, buf + len, cap - 1 - len);
		if (n < 0) {
			int e = errno;
			if (e == EINTR)
				continue;
			drop(buf, cap, flags);
			return error_set(err, e, "%s", strerror(e));
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max) {
			drop(buf, cap, flags);
			return error_set(err, EFBIG, "larger than %zu bytes", max);
		}
	}
	buf[len] = '\0';
	if (ret_len)
		*ret_len = len;
	if (ret_st)
		*ret_st = st;
	*ret = buf;
	return 0;
}

int file_read_stream(FILE *in, size_t max, char **ret, size_t *ret_len, struct error *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;

	for (;;) {
		size_t want, n;

		if (len + 1 >= cap) {
			/* data up to max + 1 bytes (to see the limit exceeded) and the NUL */
			size_t ncap = cap ? cap * 2 : 16384;
			char *nbuf;

			if (ncap > max + 2)
				ncap = max + 2;
			if (ncap <= len + 1)
				return error_set(err, EFBIG, "larger than %zu bytes", max);
			nbuf = realloc(buf, ncap);
			if (!nbuf)
				return error_set(err, ENOMEM, "out of memory");
			buf = nbuf;
			cap = ncap;
		}
		want = cap - len - 1;
		n = fread(buf + len, 1, want, in);
		len += n;
		if (len > max)
			return error_set(err, EFBIG, "larger than %zu bytes", max);
		if (n < want && feof(in) && !ferror(in))
			break; /* a short read that hit the end: no need to ask again */
		if (n == 0) {
			if (ferror(in)) {
				int e = errno ? errno : EIO;
				return error_set(err, e, "%s", strerror(e));
			}
			break;
		}
	}
	if (!buf) {
		buf = malloc(1);
		if (!buf)
			return error_set(err, ENOMEM, "out of memory");
	}
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	if (ret_len)
		*ret_len = len;
	return 0;
}
