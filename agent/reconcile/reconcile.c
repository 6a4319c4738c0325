/* reconcile.c — the agent's pass (reconcile.h): what the scheduler says is
 * due runs the pod half (pod.c) and the node half (node.c), then failed
 * re-tunes re-arm the retry timer. Also the agent's state (init/done), its
 * clocks, its counters and the Events it posts on pods. Problems are logged,
 * counted, surfaced as Events and retried with backoff; nothing here
 * exits. */
#include <stdarg.h>
#include <time.h>

#include "agent.h"
#include "nl.h"
#include "reconcile/internal.h"
#include "reconcile/reconcile.h"

int64_t agent_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t agent_now_unix(void)
{
	return (int64_t)time(NULL);
}

void agent_count_retune(struct agent *ag, int scope, int result, double seconds)
{
	ag->ctr.retunes[scope][result]++;
	metrics_histogram_observe(&ag->ctr.retune_seconds[scope], &metrics_buckets_retune, seconds);
}

/* The log line's msg for an Event's reason: what happened, not "event". */
const char *event_log_msg(const char *reason)
{
	static const struct {
		const char *reason, *msg;
	} map[] = {
	        {"Tuned", "pod tuned"},
	        {"TuneDegraded", "pod tuned with fallbacks"},
	        {"TuneFailed", "pod tuning failed"},
	        {"NetnsUnreachable", "pod network namespace unreachable"},
	        {"InvalidWorkload", "pod annotations invalid"},
	        {"DSCPNotTrusted", "pod DSCP marks not trusted"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(map); i++)
		if (streq(reason, map[i].reason))
			return map[i].msg;
	return "uplink condition"; /* the node's conditions, posted on a pod (reconcile/node.c) */
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (h ^ 0xff) * 1099511628211ULL; /* a separator between the parts */
}

/* warn for a warning the first time, and again after AGENT_EVENT_REPEAT_MS;
 * debug for its repeats in between; info for the others. */
int event_log_level(struct agent *ag, const struct agent_pod *p, bool warning, const char *reason, const char *msg)
{
	uint64_t h;
	int64_t now = agent_now_ms();
	size_t slot;

	if (!warning)
		return LOG_LVL_INFO;
	h = fnv1a(fnv1a(fnv1a(fnv1a(14695981039346656037ULL, p->namespace_), p->name), reason), msg);
	h = h ? h : 1;
	slot = (size_t)(h % AGENT_EVENT_SEEN_MAX);
	if (ag->event_seen[slot].hash == h && now - ag->event_seen[slot].at_ms < AGENT_EVENT_REPEAT_MS)
		return LOG_LVL_DEBUG;
	ag->event_seen[slot].hash = h;
	ag->event_seen[slot].at_ms = now;
	return LOG_LVL_WARN;
}

void agent_pod_event(struct agent *ag, const struct agent_pod *p, bool warning, const char *reason, const char *fmt,
                     ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg(event_log_level(ag, p, warning, reason, msg), event_log_msg(reason), "reason", reason, "pod",
	        LOG_FMT("%s/%s", p->namespace_, p->name), "message", msg, (char *)NULL);
	if (!p->in_api || !p->uid[0] || !ag->event_hook)
		return; /* an Event needs the pod object */
	ag->event_hook(ag, p, warning, reason, msg);
	ag->ctr.events_posted++;
}

double seconds_since(int64_t t0_ms)
{
	return (double)(agent_now_ms() - t0_ms) / 1000.0;
}

static void retry_rearm(struct agent *ag)
{
	int64_t next = ag->up_retry_at_ms, rec = agent_records_next_ms(&ag->records);

	if (rec >= 0 && (next < 0 || rec < next))
		next = rec;
	for (unsigned i = 0; i < ag->pods.n; i++) {
		int64_t t = ag->pods.v[i]->retry_at_ms;
		if (t >= 0 && (next < 0 || t < next))
			next = t;
	}
	sched_set_retry(&ag->sched, next);
}

void agent_init(struct agent *ag)
{
	memset(ag, 0, sizeof(*ag));
	agent_config_defaults(&ag->cfg);
	ag->profiles = ag->cfg.profiles;
	pod_cache_init(&ag->pods);
	ag->mode = NODE_MODE_STATE_INIT;
	ag->mode_since_unix = agent_now_unix();
	ag->up_retry_at_ms = -1;
	ag->up_cls_map_fd = -1;
	ag->up_edt_map_fd = -1;
	ag->down_gate_map_fd = -1;
	ag->down_cls_map_fd = -1;
	ag->down_seen_map_fd = -1;
	ag->podside_prog_fd = -1;
	ag->podside_seen_fd = -1;
	ag->up_gate_map_fd = -1;
	ag->tcx_cls_link_fd = -1;
	sched_init(&ag->sched, ag->cfg.node.debounce_ms, ag->cfg.drift_repair_s, agent_now_ms());
}

void agent_done(struct agent *ag)
{
	agent_records_free(&ag->records);
	pod_cache_done(&ag->pods);
	plan_free(&ag->in_force);
	classifier_forget(ag);
	gate_forget(ag);
	agent_config_done(&ag->cfg);
	if (ag->sk)
		nl_close(ag->sk);
	ag->sk = NULL;
}

static void record_written(void *ud, const char *cid, const char *ifname)
{
	struct agent *ag = ud;
	struct error e = {0};

	log_msg(LOG_LVL_INFO, "attachment record written for the plugin", "container", cid, "ifname", ifname,
	        (char *)NULL);
	if (agent_attach_load(ag, cid, ifname, &e) < 0)
		log_msg(LOG_LVL_WARN, "attachment record unreadable", "container", cid, "ifname", ifname, "error",
		        e.msg, (char *)NULL);
}

void agent_pass(struct agent *ag, int64_t now_ms, unsigned due)
{
	bool up_retry = (due & SCHED_RETRY) && ag->up_retry_at_ms >= 0 && ag->up_retry_at_ms <= now_ms;

	/* records the plugin could not write: once on disk, like any other */
	agent_records_flush(&ag->records, ag->state_dir, now_ms, record_written, ag);
	if (due & (SCHED_PASS | SCHED_RETRY))
		pods_reconcile(ag, now_ms, due & SCHED_RETRY);
	if (due & SCHED_DRIFT)
		agent_repair_pods(ag);
	if ((due & (SCHED_PASS | SCHED_HOLD | SCHED_DRIFT)) || up_retry) {
		if (up_retry)
			ag->up_retry_at_ms = -1;
		node_reconcile(ag, now_ms, due & SCHED_DRIFT);
	}
	pod_cache_gc(&ag->pods);
	retry_rearm(ag);
}
