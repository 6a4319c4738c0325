/* reconcile.h — the agent's re-tuning (reconcile/): one pass for what the
 * scheduler says is due, per pod (pod.c: re-plan, apply, remove what the
 * old plan had, rewrite the record) and per node (node.c: mode, uplink plan
 * delta, adoption and drift repair); reconcile.c holds the pass, the
 * agent's state and its Events. */
#ifndef AIQOS_AGENT_RECONCILE_H
#define AIQOS_AGENT_RECONCILE_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

struct agent;
struct agent_pod;
struct error;

/* Initialise/free the agent's state (not the loop). */
void agent_init(struct agent *ag);
void agent_done(struct agent *ag);
/* One pass for what is due (SCHED_* bits): PASS re-tunes dirty pods and the
 * node (mode, uplink plan delta), HOLD the node, RETRY the failed re-tunes
 * that are due, DRIFT reads the kernel (uplink adoption/repair, pods whose
 * kernel state differs from their record). Re-arms the retry deadline.
 * Never fails: problems are logged, counted, surfaced and retried. */
void agent_pass(struct agent *ag, int64_t now_ms, unsigned due);
/* Whether the uplink's received packets reach the download classifier
 * (node/reach.h), every DOWN_REACH_INTERVAL_MS while it is attached: the
 * turn to "bypassed" is logged and posted as an Event (DownloadBypassed)
 * naming the programs on the hook before it, and back. */
void agent_down_reach_tick(struct agent *ag, int64_t now_ms);
/* Drift repair of the pods' attachments: re-apply those whose kernel state
 * differs from their record. */
void agent_repair_pods(struct agent *ag);
/* Load or re-load one attachment record and join it (the plugin said
 * "attached", or the state dir changed). */
int agent_attach_load(struct agent *ag, const char *container_id, const char *ifname, struct error *err);
/* Re-read the whole state dir. */
void agent_attach_rescan(struct agent *ag);
/* The rtnetlink monitor saw a tc message (RTM_NEW/DEL QDISC/TFILTER) of
 * another socket than the agent's own (pid: the sender's netlink port, 0 =
 * the kernel). On the uplink or aiqos's ifbs: one of aiqos's objects
 * deleted is counted (metrics), logged and posted as an Event naming the
 * process where its port is a pid, said in status, and repaired by a pass
 * that reads the kernel; another tool's filter added makes that pass too. */
void agent_tc_event(struct agent *ag, int type, int ifindex, uint32_t parent, uint32_t handle, uint16_t prio,
                    const char *kind, uint32_t pid);
/* --cleanup: restore the uplink's recorded qdisc. 0, or negative errno. */
int agent_cleanup_uplink(struct agent *ag, struct error *err);
/* Post a Kubernetes Event on a pod (no-op without an API client) and log it
 * (msg from event_log_msg, pod=ns/name, level from event_log_level). */
void agent_pod_event(struct agent *ag, const struct agent_pod *p, bool warning, const char *reason, const char *fmt,
                     ...) _printf_(5, 6);
/* The log line's msg for an Event reason ("pod tuned with fallbacks"). */
const char *event_log_msg(const char *reason);
/* The log level of an Event: info, or warn for a warning, debug for the
 * same warning on the same pod within AGENT_EVENT_REPEAT_MS (remembered). */
int event_log_level(struct agent *ag, const struct agent_pod *p, bool warning, const char *reason, const char *msg);
void agent_count_retune(struct agent *ag, int scope, int result, double seconds);

#endif
