/* schedule.h — the scheduler (schedule.c): when the loop has work to do —
 * debounce, the mixed hold, retries with backoff, drift repair. Pure (the
 * clock is passed in: a fake clock in tests). */
#ifndef AIQOS_AGENT_SCHEDULE_H
#define AIQOS_AGENT_SCHEDULE_H

#include <stdint.h>

#define AGENT_RETRY_MIN_MS 1000
#define AGENT_RETRY_MAX_MS 300000 /* 5 min */

enum {
	SCHED_PASS = 1 << 0,  /* debounced pod/node work */
	SCHED_HOLD = 1 << 1,  /* the mixed hold may have ended: node pass */
	SCHED_RETRY = 1 << 2, /* a failed re-tune is due again */
	SCHED_DRIFT = 1 << 3, /* periodic drift repair */
};

struct agent_sched {
	uint32_t debounce_ms;
	uint32_t drift_ms;    /* 0 = off */
	int64_t pass_due_ms;  /* -1 = nothing pending */
	int64_t hold_due_ms;  /* -1 = none */
	int64_t retry_due_ms; /* -1 = none */
	int64_t drift_due_ms; /* -1 = off */
};

/* The earlier of two deadlines where -1 means none. */
static inline int64_t sched_earliest(int64_t a, int64_t b)
{
	if (a < 0)
		return b;
	if (b < 0)
		return a;
	return a < b ? a : b;
}

void sched_init(struct agent_sched *s, uint32_t debounce_ms, uint32_t drift_s, int64_t now_ms);
/* Something changed: run a pass debounce_ms after the first event of a
 * burst (later events of the burst do not push it back, so churn cannot
 * starve the pass). now = at once (debounce 0 or urgent). */
void sched_kick(struct agent_sched *s, int64_t now_ms);
void sched_kick_now(struct agent_sched *s, int64_t now_ms);
void sched_set_hold(struct agent_sched *s, int64_t due_ms); /* -1 = none */
void sched_set_retry(struct agent_sched *s, int64_t due_ms);
/* New debounce/drift settings (config reload). */
void sched_configure(struct agent_sched *s, uint32_t debounce_ms, uint32_t drift_s, int64_t now_ms);
/* The earliest deadline, -1 when idle. */
int64_t sched_next(const struct agent_sched *s);
/* What is due at now (SCHED_* bits); clears those deadlines (drift is
 * re-armed one period later). */
unsigned sched_take_due(struct agent_sched *s, int64_t now_ms);
/* Exponential backoff for the n-th consecutive failure (1-based):
 * AGENT_RETRY_MIN_MS * 2^(n-1), at most AGENT_RETRY_MAX_MS, jitter_pm
 * (0..1000) of up to +25 % added. */
int64_t sched_backoff_ms(unsigned n, unsigned jitter_pm);

#endif
