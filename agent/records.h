/* records.h — attachment records the plugin could not write. An ADD that
 * finds the stateDir full or read-only keeps the pod's network (fail-open:
 * our bookkeeping never fails the pod) and hands the record to the agent
 * with its "attached" notification. The agent keeps it in memory and
 * writes it, under the attachment's lock, once the directory takes it
 * (retried with backoff); from then on it is a record like any other (the
 * agent re-tunes the pod from it, CHECK and DEL find it). A record is
 * dropped when DEL says "detached", when one appeared meanwhile (never
 * overwritten), or when the pod's interface is gone. Until written each is
 * shown in status ("unsavedRecords") and counted in metrics. */
#ifndef AIQOS_AGENT_RECORDS_H
#define AIQOS_AGENT_RECORDS_H

#include <stdint.h>

#include "error.h"
#include "state.h"

struct cJSON;

#define AGENT_RECORDS_MAX 1024 /* further offers are refused (and logged) */

struct agent_record {
	struct attach_state *s; /* decoded: identity, netns, interfaces */
	char *text;             /* the record as the plugin made it, written verbatim */
	int64_t since_ms, retry_at_ms;
	unsigned retries;
	char error[ERROR_MSG_MAX]; /* why the last write failed */
};

struct agent_records {
	struct agent_record *v;
	unsigned n, cap;
	uint64_t written, dropped; /* since start */
};

/* Take the record an "attached" notification carried (state_to_json of the
 * attachment cid/ifname: another attachment's is refused). Replaces an
 * earlier offer of the same attachment. Due at once. */
int agent_records_offer(struct agent_records *rs, const struct cJSON *attachment, const char *cid, const char *ifname,
                        int64_t now_ms, struct error *err);
/* DEL came: the attachment is gone. */
void agent_records_forget(struct agent_records *rs, const char *cid, const char *ifname);
/* Write the due ones (lock, no record yet, the pod interface still there,
 * state_save). written(ud, cid, ifname) for each one that is on disk now. */
void agent_records_flush(struct agent_records *rs, const char *state_dir, int64_t now_ms,
                         void (*written)(void *ud, const char *cid, const char *ifname), void *ud);
/* When the next retry is due (-1 = none). */
int64_t agent_records_next_ms(const struct agent_records *rs);
/* [{"containerId","ifname","namespace","name","since","retries","error"}] */
struct cJSON *agent_records_json(const struct agent_records *rs, int64_t now_ms);
void agent_records_free(struct agent_records *rs);

#endif
