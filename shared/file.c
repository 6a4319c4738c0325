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
		return error_set(err, CNI_ERR_NONE, errno, "%s", strerror(errno));
	if (fstat(fd, &st) < 0)
		return error_set(err, CNI_ERR_NONE, errno, "%s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return error_set(err, CNI_ERR_NONE, EINVAL, "not a regular file");
	if ((uint64_t)st.st_size > max)
		return error_set(err, CNI_ERR_NONE, EFBIG, "larger than %zu bytes", max);
	/* data up to max + 1 bytes (to see the limit exceeded) and the NUL */
	cap_max = max + 2;
	/* sized by fstat, with room for a file that grows meanwhile; grown
	 * to the limit only if needed (a secret is never copied) */
	cap = flags & FILE_READ_SECRET || (size_t)st.st_size + 4097 > cap_max ? cap_max : (size_t)st.st_size + 4097;
	buf = malloc(cap);
	if (!buf)
		return error_set(err, CNI_ERR_NONE, ENOMEM, "out of memory");
	for (;;) {
		ssize_t n;

		if (len + 1 == cap) {
			char *nbuf = realloc(buf, cap_max);
			if (!nbuf) {
				drop(buf, cap, flags);
				return error_set(err, CNI_ERR_NONE, ENOMEM, "out of memory");
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
			return error_set(err, CNI_ERR_NONE, e, "%s", strerror(e));
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max) {
			drop(buf, cap, flags);
			return error_set(err, CNI_ERR_NONE, EFBIG, "larger than %zu bytes", max);
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
