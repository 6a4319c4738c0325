/* netns.c — entering network namespaces (setns per thread) and reading or
 * writing the per-netns sysctls under /proc/sys of the calling thread's netns.
 * Mechanism only: callers decide what a missing key or a refused value means. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "netns.h"

int netns_open(const char *path, int *ret_fd, struct error *err)
{
	int fd;

	if (!path || !*path)
		return error_set(err, EINVAL, "netns path is empty");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return error_set(err, errno, "open netns '%s': %s", path, strerror(errno));
	*ret_fd = fd;
	return 0;
}

int netns_enter(int nsfd, int *ret_saved, struct error *err)
{
	_cleanup_close_ int saved = -1;

	if (nsfd < 0)
		return error_set(err, EBADF, "enter netns: no netns file descriptor");
	saved = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (saved < 0)
		return error_set(err, errno, "open /proc/self/ns/net: %s", strerror(errno));
	if (setns(nsfd, CLONE_NEWNET) < 0)
		return error_set(err, errno, "enter netns (fd %d): %s", nsfd, strerror(errno));
	*ret_saved = TAKE_FD(saved);
	return 0;
}

int netns_leave(int saved, struct error *err)
{
	int r = 0;

	if (saved < 0)
		return error_set(err, EBADF, "leave netns: no saved netns");
	if (setns(saved, CLONE_NEWNET) < 0)
		r = error_set(err, errno, "return to the original netns: %s", strerror(errno));
	close(saved);
	return r;
}

/* The directory sysctl keys resolve below (sysctl_set_root), with a trailing
 * '/'. One per process: the plugin and the agent set it once at start. */
static char sysctl_root[SYSCTL_ROOT_MAX + 1] = "/proc/sys/";

int sysctl_set_root(const char *dir, struct error *err)
{
	struct stat st;
	size_t n;

	if (!dir || dir[0] != '/')
		return error_set(err, EINVAL, "sysctl root '%s' is not an absolute path", dir ? dir : "");
	n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n >= SYSCTL_ROOT_MAX)
		return error_set(err, ENAMETOOLONG, "sysctl root '%s' is longer than %d bytes", dir,
		                 SYSCTL_ROOT_MAX - 1);
	if (strstr(dir, "/../") || (n >= 3 && memcmp(dir + n - 3, "/..", 3) == 0))
		return error_set(err, EINVAL, "sysctl root '%s' contains '..'", dir);
	if (stat(dir, &st) < 0)
		return error_set(err, errno, "sysctl root '%s': %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return error_set(err, ENOTDIR, "sysctl root '%s' is not a directory", dir);
	memcpy(sysctl_root, dir, n);
	if (n == 1)
		n = 0; /* "/" */
	sysctl_root[n] = '/';
	sysctl_root[n + 1] = '\0';
	return 0;
}

const char *sysctl_get_root(void)
{
	return sysctl_root;
}

/* "net.ipv4.tcp_ecn" or "net/ipv4/tcp_ecn" -> "/proc/sys/net/ipv4/tcp_ecn"
 * (below sysctl_root). As in sysctl(8), a key that contains '/' keeps its dots (so
 * "net/ipv4/conf/eth0.100/rp_filter" works). Refuses empty keys, absolute keys, ".." components and characters that
 * have no business in a sysctl name. */
static int sysctl_path(const char *key, char *buf, size_t size, struct error *err)
{
	const char *prefix = sysctl_root;
	size_t n, i, plen = strlen(sysctl_root);
	bool slashes;

	if (!key || !*key)
		return error_set(err, EINVAL, "sysctl key is empty");
	n = strlen(key);
	if (key[0] == '/' || key[0] == '.' || strstr(key, "..") || key[n - 1] == '/' || key[n - 1] == '.')
		return error_set(err, EINVAL, "invalid sysctl key '%s'", key);
	if (plen + n + 1 > size)
		return error_set(err, ENAMETOOLONG, "sysctl key '%s' is too long", key);
	slashes = strchr(key, '/') != NULL;
	memcpy(buf, prefix, plen);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)key[i];
		if (c == '.' && !slashes)
			c = '/';
		else if (!isalnum(c) && c != '_' && c != '-' && c != '/' && c != '.')
			return error_set(err, EINVAL, "invalid sysctl key '%s'", key);
		if (c == '/' && (key[i + 1] == '/' || key[i + 1] == '.'))
			return error_set(err, EINVAL, "invalid sysctl key '%s'", key);
		buf[plen + i] = (char)c;
	}
	buf[plen + n] = '\0';
	return 0;
}

/* Read the value of an open sysctl file (from its start) into buf. */
static int sysctl_fd_read(int fd, const char *key, char *buf, size_t size, struct error *err)
{
	size_t len = 0;

	for (;;) {
		ssize_t k;
		if (len + 1 >= size)
			return error_set(err, EOVERFLOW, "read sysctl '%s': value longer than %zu bytes", key,
			                 size - 1);
		k = read(fd, buf + len, size - 1 - len);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return error_set(err, errno, "read sysctl '%s': %s", key, strerror(errno));
		}
		if (k == 0)
			break;
		len += (size_t)k;
	}
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		len--;
	buf[len] = '\0';
	return 0;
}

int sysctl_read(const char *key, char *buf, size_t size, struct error *err)
{
	char path[SYSCTL_ROOT_MAX + 256];
	_cleanup_close_ int fd = -1;
	int r;

	if (size == 0)
		return error_set(err, EINVAL, "read sysctl '%s': no buffer", key ? key : "");
	r = sysctl_path(key, path, sizeof(path), err);
	if (r < 0)
		return r;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return error_set(err, errno, "read sysctl '%s': %s", key, strerror(errno));
	return sysctl_fd_read(fd, key, buf, size, err);
}

uint32_t sysctl_tcp_rmem_max(void)
{
	char buf[128], *p = buf, *end;
	unsigned long long v = 0;

	if (sysctl_read("net/ipv4/tcp_rmem", buf, sizeof(buf), NULL) < 0)
		return 0;
	for (int i = 0; i < 3; i++, p = end) { /* min default max */
		errno = 0;
		v = strtoull(p, &end, 10);
		if (end == p || errno)
			return 0;
	}
	return v > UINT32_MAX ? 0 : (uint32_t)v;
}

/* "val\n" into line (SYSCTL_WRITE_MAX + 2 bytes); its length in *ret_len. */
static int sysctl_line(const char *key, const char *val, char *line, size_t *ret_len, struct error *err)
{
	size_t n;

	if (!val)
		return error_set(err, EINVAL, "write sysctl '%s': no value", key);
	n = strlen(val);
	if (n > SYSCTL_WRITE_MAX)
		return error_set(err, EINVAL, "write sysctl '%s': value is too long", key);
	if (strchr(val, '\n'))
		return error_set(err, EINVAL, "write sysctl '%s': value contains a newline", key);
	memcpy(line, val, n);
	line[n] = '\n';
	*ret_len = n + 1;
	return 0;
}

/* Write line at the start of an open sysctl file, in one write. */
static int sysctl_fd_write(int fd, const char *key, const char *val, const char *line, size_t len, struct error *err)
{
	ssize_t k;

	do
		k = pwrite(fd, line, len, 0);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return error_set(err, errno, "write sysctl %s='%s': %s", key, val, strerror(errno));
	if ((size_t)k != len)
		return error_set(err, EIO, "write sysctl %s='%s': short write (%zd of %zu bytes)", key, val, k, len);
	return 0;
}

/* What a write of val to key needs: the key's file, open, and "val\n". */
struct sysctl_put {
	char path[SYSCTL_ROOT_MAX + 256];
	char line[SYSCTL_WRITE_MAX + 2];
	size_t len;
	bool key_ok; /* the key resolved to a path (a later step failed) */
};

/* Resolve key, check val and open the key's file with flags, into *ret_fd. */
static int sysctl_put_open(const char *key, const char *val, int flags, struct sysctl_put *p, int *ret_fd,
                           struct error *err)
{
	int fd, r;

	p->key_ok = false;
	r = sysctl_path(key, p->path, sizeof(p->path), err);
	if (r < 0)
		return r;
	p->key_ok = true;
	r = sysctl_line(key, val, p->line, &p->len, err);
	if (r < 0)
		return r;
	fd = open(p->path, flags | O_CLOEXEC);
	if (fd < 0)
		return error_set(err, errno, "write sysctl '%s': %s", key, strerror(errno));
	*ret_fd = fd;
	return 0;
}

int sysctl_write(const char *key, const char *val, struct error *err)
{
	struct sysctl_put p = {0};
	_cleanup_close_ int fd = -1;
	int r;

	r = sysctl_put_open(key, val, O_WRONLY, &p, &fd, err);
	if (r < 0)
		return r;
	return sysctl_fd_write(fd, key, val, p.line, p.len, err);
}

int sysctl_exchange(const char *key, const char *val, char *prev, size_t prev_size, int *ret_read, struct error *err)
{
	struct sysctl_put p = {0};
	_cleanup_close_ int fd = -1;
	int r;

	r = sysctl_put_open(key, val, O_RDWR, &p, &fd, NULL);
	if (r < 0) {
		/* an invalid key fails both calls with its error; val invalid,
		 * absent or read-only here: the two calls say exactly what they
		 * always said */
		if (!p.key_ok)
			*ret_read = r;
		else
			*ret_read = prev_size ? sysctl_read(key, prev, prev_size, NULL) : -EINVAL;
		return sysctl_write(key, val, err);
	}
	*ret_read = prev_size ? sysctl_fd_read(fd, key, prev, prev_size, NULL) : -EINVAL;
	return sysctl_fd_write(fd, key, val, p.line, p.len, err);
}

bool sysctl_value_equal(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	for (;;) {
		while (isspace((unsigned char)*a))
			a++;
		while (isspace((unsigned char)*b))
			b++;
		if (!*a || !*b)
			return !*a && !*b;
		/* compare one token */
		while (*a && *b && !isspace((unsigned char)*a) && !isspace((unsigned char)*b)) {
			if (*a != *b)
				return false;
			a++;
			b++;
		}
		/* both tokens must end together */
		if ((*a && !isspace((unsigned char)*a)) || (*b && !isspace((unsigned char)*b)))
			return false;
	}
}
