/* netns.h — entering network namespaces and per-netns sysctls. The plugin and
 * the agent are single-threaded where they call these (setns is per thread). */
#ifndef AIQOS_NETNS_H
#define AIQOS_NETNS_H

#include "error.h"

/* Open a netns path (/var/run/netns/x, /proc/PID/ns/net). -ENOENT if gone. */
int netns_open(const char *path, int *ret_fd, struct error *err);
/* Switch the calling thread into nsfd; *ret_saved receives an fd of the
 * previous netns for netns_leave(). */
int netns_enter(int nsfd, int *ret_saved, struct error *err);
/* Return to saved and close it. Aborts the program? No: returns error; callers
 * treat a failure to return as fatal for the operation. */
int netns_leave(int saved, struct error *err);

/* Per-netns sysctls of the calling thread's netns. key uses slashes or dots
 * ("net/ipv4/tcp_ecn" or "net.ipv4.tcp_ecn"). -ENOENT when the kernel lacks it. */
int sysctl_read(const char *key, char *buf, size_t size, struct error *err);
int sysctl_write(const char *key, const char *val, struct error *err);
/* Compare sysctl values ignoring whitespace differences ("4096 87380" vs "4096\t87380"). */
bool sysctl_value_equal(const char *a, const char *b);

#endif
