/* schedule.c — when the agent has work to do: the debounced pass after pod
 * events (a burst of events -> one re-tune, at most debounceMs after its
 * first event), the end of the mixed hold, retries of failed re-tunes with
 * exponential backoff, and periodic drift repair. Pure: the caller passes
 * the monotonic clock and arms one timer at sched_next(). */
#include "agent.h"
#include "schedule.h"

void sched_init(struct agent_sched *s, uint32_t debounce_ms, uint32_t drift_s, int64_t now_ms)
{
	*s = (struct agent_sched){
	        .pass_due_ms = -1,
	        .hold_due_ms = -1,
	        .retry_due_ms = -1,
	        .drift_due_ms = -1,
	};
	sched_configure(s, debounce_ms, drift_s, now_ms);
}

void sched_configure(struct agent_sched *s, uint32_t debounce_ms, uint32_t drift_s, int64_t now_ms)
{
	uint32_t drift_ms = drift_s > UINT32_MAX / 1000 ? UINT32_MAX : drift_s * 1000;

	s->debounce_ms = debounce_ms;
	if (drift_ms != s->drift_ms || (drift_ms && s->drift_due_ms < 0))
		s->drift_due_ms = drift_ms ? now_ms + drift_ms : -1;
	s->drift_ms = drift_ms;
	/* a shorter debounce applies to what is pending */
	if (s->pass_due_ms > now_ms + (int64_t)debounce_ms)
		s->pass_due_ms = now_ms + debounce_ms;
}

void sched_kick(struct agent_sched *s, int64_t now_ms)
{
	if (s->pass_due_ms < 0)
		s->pass_due_ms = now_ms + s->debounce_ms;
}

void sched_kick_now(struct agent_sched *s, int64_t now_ms)
{
	s->pass_due_ms = sched_earliest(s->pass_due_ms, now_ms);
}

void sched_set_hold(struct agent_sched *s, int64_t due_ms)
{
	s->hold_due_ms = due_ms;
}

void sched_set_retry(struct agent_sched *s, int64_t due_ms)
{
	s->retry_due_ms = due_ms;
}

int64_t sched_next(const struct agent_sched *s)
{
	int64_t t = sched_earliest(s->pass_due_ms, s->hold_due_ms);

	t = sched_earliest(t, s->retry_due_ms);
	return sched_earliest(t, s->drift_due_ms);
}

unsigned sched_take_due(struct agent_sched *s, int64_t now_ms)
{
	unsigned due = 0;

	if (s->pass_due_ms >= 0 && s->pass_due_ms <= now_ms) {
		due |= SCHED_PASS;
		s->pass_due_ms = -1;
	}
	if (s->hold_due_ms >= 0 && s->hold_due_ms <= now_ms) {
		due |= SCHED_HOLD;
		s->hold_due_ms = -1;
	}
	if (s->retry_due_ms >= 0 && s->retry_due_ms <= now_ms) {
		due |= SCHED_RETRY;
		s->retry_due_ms = -1;
	}
	if (s->drift_due_ms >= 0 && s->drift_due_ms <= now_ms) {
		due |= SCHED_DRIFT;
		/* one period after now, not after the missed deadline: no catch-up bursts */
		s->drift_due_ms = s->drift_ms ? now_ms + s->drift_ms : -1;
	}
	return due;
}

int64_t sched_backoff_ms(unsigned n, unsigned jitter_pm)
{
	int64_t ms = AGENT_RETRY_MIN_MS;

	for (unsigned i = 1; i < n && ms < AGENT_RETRY_MAX_MS; i++)
		ms *= 2;
	if (ms > AGENT_RETRY_MAX_MS)
		ms = AGENT_RETRY_MAX_MS;
	if (jitter_pm > 1000)
		jitter_pm = 1000;
	return ms + ms / 4 * jitter_pm / 1000;
}
