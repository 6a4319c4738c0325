/* process_metrics.c — process_* metrics from /proc/self/stat (fields 14/15
 * utime/stime, 22 starttime in clock ticks, 23 vsize, 24 rss in pages; the
 * comm field may hold spaces and parentheses, so parsing starts after the
 * last ')'), /proc/stat's btime, the entries of /proc/self/fd and
 * RLIMIT_NOFILE. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "metrics/metrics.h"
#include "metrics/process_metrics.h"
#include "util.h"

#define PROC_STAT_MAX 4096

static int read_small(const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	while (len + 1 < size && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	return (int)len;
}

static int boot_time(const char *stat_path, double *ret)
{
	char buf[PROC_STAT_MAX * 4] = "";
	const char *p;
	int r = read_small(stat_path, buf, sizeof(buf));

	if (r < 0)
		return r;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, "btime ", 6) == 0) {
			*ret = strtod(p + 6, NULL);
			return 0;
		}
	return -ENOENT;
}

static unsigned count_fds(const char *proc_dir)
{
	char path[256];
	DIR *d;
	struct dirent *e;
	unsigned n = 0;

	snprintf(path, sizeof(path), "%s/fd", proc_dir);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	/* the directory stream's own fd is listed when it is our own table */
	return n > 0 && streq(proc_dir, "/proc/self") ? n - 1 : n;
}

int process_stats_read(const char *proc_dir, const char *stat_path, struct process_stats *ret)
{
	char path[256], buf[PROC_STAT_MAX];
	unsigned long long utime, stime, start, vsize;
	long long rss;
	long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	double btime = 0;
	struct rlimit rl;
	const char *p;
	int r;

	memset(ret, 0, sizeof(*ret));
	snprintf(path, sizeof(path), "%s/stat", proc_dir);
	r = read_small(path, buf, sizeof(buf));
	if (r < 0)
		return r;
	p = strrchr(buf, ')');
	if (!p || tick <= 0 || page <= 0)
		return -EINVAL;
	/* after ") ": 3 state, 4 ppid ... 14 utime 15 stime ... 22 starttime 23 vsize 24 rss */
	// NOLINTNEXTLINE(cert-err34-c): the kernel's /proc/<pid>/stat; the count of conversions is checked
	if (sscanf(p + 2,
	           "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %llu %lld",
	           &utime, &stime, &start, &vsize, &rss) != 5)
		return -EINVAL;
	ret->cpu_seconds = (double)(utime + stime) / (double)tick;
	ret->vsize_bytes = vsize;
	ret->rss_bytes = rss > 0 ? (uint64_t)rss * (uint64_t)page : 0;
	if (boot_time(stat_path, &btime) == 0)
		ret->start_time_unix = btime + (double)start / (double)tick;
	ret->open_fds = count_fds(proc_dir);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		ret->max_fds = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
	return 0;
}

void process_metrics_write(struct metrics_writer *w)
{
	struct process_stats st;

	if (process_stats_read("/proc/self", "/proc/stat", &st) < 0)
		return;
	metrics_write(w, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter",
	              st.cpu_seconds, (char *)NULL);
	metrics_write(w, "process_resident_memory_bytes", "Resident memory size in bytes.", "gauge",
	              (double)st.rss_bytes, (char *)NULL);
	metrics_write(w, "process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge",
	              (double)st.vsize_bytes, (char *)NULL);
	if (st.start_time_unix > 0)
		metrics_write(w, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
		              "gauge", st.start_time_unix, (char *)NULL);
	metrics_write(w, "process_open_fds", "Number of open file descriptors.", "gauge", (double)st.open_fds,
	              (char *)NULL);
	metrics_write(w, "process_max_fds", "Maximum number of open file descriptors.", "gauge", (double)st.max_fds,
	              (char *)NULL);
}
