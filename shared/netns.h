/* netns.h — entering network namespaces and per-netns sysctls. The plugin and
 * the agent are single-threaded where they call these (setns is per thread). */
#ifndef AIQOS_NETNS_H
#define AIQOS_NETNS_H

#include "error.h"

/* Open a netns path (/var/run/netns/x, /proc/PID/ns/net) O_RDONLY|O_CLOEXEC.
 * -ENOENT if gone (err names the path). */
int netns_open(const char *path, int *ret_fd, struct error *err);
/* Switch the calling thread into nsfd; *ret_saved receives an fd of the
 * previous netns for netns_leave(). */
int netns_enter(int nsfd, int *ret_saved, struct error *err);
/* Return to saved and close it (closed even on failure). Returns an error if
 * setns fails; callers treat a failure to return as fatal for the operation. */
int netns_leave(int saved, struct error *err);

/* Where sysctl keys resolve: "/proc/sys" unless sysctl_set_root() says
 * otherwise, e.g. "/host/proc/sys" in a container whose own /proc/sys is
 * read-only but that has the host's /proc/sys/net bind-mounted there (the
 * kernel resolves net.* in the netns of the thread that opens the file, so
 * after netns_enter() the pod's values are read and written). dir must be an
 * absolute path to a directory, shorter than SYSCTL_ROOT_MAX, without ".."
 * (-EINVAL, -ENAMETOOLONG, -ENOENT, -ENOTDIR; the root is then unchanged).
 * Process-wide; set it once at start. sysctl_get_root() returns it with a
 * trailing '/'. */
#define SYSCTL_ROOT_MAX 128
int sysctl_set_root(const char *dir, struct error *err);
const char *sysctl_get_root(void);

/* Longest value sysctl_write() accepts. */
#define SYSCTL_WRITE_MAX 256

/* Per-netns sysctls of the calling thread's netns. key uses slashes or dots
 * ("net/ipv4/tcp_ecn" or "net.ipv4.tcp_ecn"; as in sysctl(8), a key with '/'
 * keeps its dots, for interface names like "eth0.100"); keys that are empty, absolute,
 * contain ".." or characters outside [A-Za-z0-9_-./] are refused (-EINVAL).
 * sysctl_read trims trailing whitespace/newline; -EOVERFLOW if the value does
 * not fit. sysctl_write writes val + '\n' in one write(). -ENOENT when the key
 * is absent (the kernel lacks it) — but note that the kernel also answers a
 * *write* with ENOENT for some refused values (an unknown congestion control):
 * to tell the two apart, sysctl_read the key. Errors name key and value. */
int sysctl_read(const char *key, char *buf, size_t size, struct error *err);
/* The maximum (third field) of net.ipv4.tcp_rmem here, 0 when it cannot be read. */
uint32_t sysctl_tcp_rmem_max(void);
int sysctl_write(const char *key, const char *val, struct error *err);
/* sysctl_read into prev (its result in *ret_read; prev is only valid when
 * that is 0) followed by sysctl_write of val, through a single open of the
 * file when it can be opened read-write (else exactly the two calls).
 * Returns what sysctl_write would. */
int sysctl_exchange(const char *key, const char *val, char *prev, size_t prev_size, int *ret_read, struct error *err);
/* Compare sysctl values ignoring whitespace differences ("4096 87380" vs "4096\t87380"). */
bool sysctl_value_equal(const char *a, const char *b);

#endif
