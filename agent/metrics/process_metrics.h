/* process_metrics.h — the standard process_* families of Prometheus client
 * libraries (resident memory, CPU seconds, open and max fds, start time,
 * virtual memory), read from /proc/self, so the agent's 16 MiB budget can be
 * watched and alerted on like any other exporter's. */
#ifndef AIQOS_AGENT_PROCESS_METRICS_H
#define AIQOS_AGENT_PROCESS_METRICS_H

#include <stdint.h>

struct metrics_writer;

struct process_stats {
	double cpu_seconds;     /* utime + stime */
	uint64_t rss_bytes;     /* resident set */
	uint64_t vsize_bytes;   /* virtual memory */
	double start_time_unix; /* boot time + start ticks */
	unsigned open_fds;
	uint64_t max_fds; /* RLIMIT_NOFILE soft limit */
};

/* Read the stats of a process from proc_dir ("/proc/self", or a test
 * fixture laid out like it: stat, fd/) and the boot time from stat_path
 * ("/proc/stat", its btime line). Negative errno when stat is unreadable or
 * malformed. */
int process_stats_read(const char *proc_dir, const char *stat_path, struct process_stats *ret);

/* Write process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_start_time_seconds,
 * process_open_fds and process_max_fds of this process (nothing if
 * /proc/self cannot be read). */
void process_metrics_write(struct metrics_writer *w);

#endif
