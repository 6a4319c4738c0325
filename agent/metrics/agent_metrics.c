/* agent_metrics.c — the agent's Prometheus families (docs/reference/metrics.md lists
 * them): build and process info, the node mode, pods by class and tuning
 * status, re-tunes (histogram of durations), the API client (watch, request
 * durations), the plugin socket (server.c), the shaped rates and class
 * guarantees of each direction of the uplink, and the queue statistics of
 * the uplink's classes and of each pod's interfaces. Conventions: one label
 * set per family, base units (bytes, seconds), pod labels named
 * pod_namespace/pod_name (the Prometheus Operator's target labels are
 * namespace/pod). Runs on the loop thread. */
#include <curl/curl.h>
#include <microhttpd.h>

#include "agent.h"
#include "kube/kube.h"
#include "metrics/metrics.h"
#include "netns.h"
#include "nl.h"
#include "metrics/process_metrics.h"
#include "server.h"
#include "metrics/agent_metrics.h"

#define G "gauge"
#define C "counter"

/* direction label values: the uplink's egress tree now; the download tree
 * (an ifb holding the uplink's ingress, config `downlinkRate`) is "ingress" */
#define DIR_EGRESS  "egress"
#define DIR_INGRESS "ingress"

static const char *class_name(enum workload_class c)
{
	return workload_class_name(c) ?: "default";
}

static const char *compiler_name(void)
{
#if defined(__clang__)
	return "clang " __clang_version__;
#elif defined(__GNUC__)
	return "gcc " __VERSION__;
#else
	return "unknown";
#endif
}

static void build_info_write(struct metrics_writer *w)
{
	const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);

	metrics_write(w, "aiqos_build_info", "aiqos-agent build: version, compiler and library versions (always 1)", G,
	              1.0, "version", aiqos_version(), "compiler", compiler_name(), "libcurl",
	              cv && cv->version ? cv->version : "unknown", "libmicrohttpd", MHD_get_version() ?: "unknown",
	              (char *)NULL);
}

/* The pod network (node/datapath.h): what encapsulates pod packets on the
 * way to the uplink, the pod CIDRs, the CNI; each tunnel device; the
 * uplinkOverhead in force. */
static void datapath_write(struct agent *ag, struct metrics_writer *w)
{
	const struct datapath *dp = &ag->dp;
	const struct dp_tunnel *t = NULL;
	char cidrs[DP_CIDRS_MAX * DP_CIDR_LEN] = "", port[12] = "", bytes[12];

	for (unsigned i = 0; i < dp->n_cidrs; i++) {
		size_t n = strlen(cidrs);
		snprintf(cidrs + n, sizeof(cidrs) - n, "%s%s", i ? "," : "", dp->pod_cidrs[i]);
	}
	for (unsigned i = 0; i < dp->n_tunnels; i++)
		if (dp->tunnels[i].via_uplink && dp->tunnels[i].header_bytes == datapath_tunnel_bytes(dp) && !t)
			t = &dp->tunnels[i];
	if (t && t->port)
		snprintf(port, sizeof(port), "%u", t->port);
	snprintf(bytes, sizeof(bytes), "%u", datapath_tunnel_bytes(dp));
	metrics_write(w, "aiqos_datapath_info",
	              "The node's pod network (always 1): the encapsulation pod packets get on the way to the uplink "
	              "(none, vxlan, geneve, ipip, ...), its device, UDP port and header bytes, the pod CIDRs, the "
	              "primary CNI",
	              G, 1.0, "encapsulation", datapath_encap(dp), "tunnel", t ? t->ifname : "", "port", port,
	              "header_bytes", bytes, "pod_cidrs", cidrs, "cni", dp->cni, (char *)NULL);
	metrics_write(w, "aiqos_uplink_overhead_bytes",
	              "Bytes per packet the uplink's shaper counts beyond the packet (uplinkOverhead, or the Ethernet "
	              "framing plus the tunnel header when the config does not set it)",
	              G, (double)datapath_overhead(ag->cfg.overhead_set, ag->cfg.node.overhead_bytes, dp), "from",
	              ag->cfg.overhead_set ? "config" : "auto", (char *)NULL);
}

/* ---- queue statistics ---- */

static const char *class_of_handle(uint32_t h)
{
	switch (TC_H_MIN(h) ? TC_H_MIN(h) : TC_H_MAJ(h) >> 16) {
	case 0x10:
		return "inference";
	case 0x11:
		return "inference-bulk"; /* node.h BANDS */
	case 0x20:
		return "default";
	case 0x30:
		return "training";
	default:
		return NULL;
	}
}

/* The counters of a tc object written as queue families: one family per
 * row, in the order of the rows. */
enum queue_stat { Q_BACKLOG, Q_DROPS, Q_ECN_MARKS, Q_OVERLIMITS, Q_REQUEUES, Q_SENT };

struct queue_family {
	const char *name, *help, *type;
	enum queue_stat stat;
};

static const struct queue_family uplink_queue_families[] = {
        {"aiqos_uplink_queue_backlog_bytes", "Bytes queued in an aiqos-managed uplink queue", G, Q_BACKLOG},
        {"aiqos_uplink_queue_drops_total", "Packets dropped by an aiqos-managed uplink queue", C, Q_DROPS},
        {"aiqos_uplink_queue_ecn_marks_total", "Packets ECN/CE-marked by an aiqos-managed uplink queue", C,
         Q_ECN_MARKS},
        {"aiqos_uplink_queue_overlimits_total", "Overlimit events of an aiqos-managed uplink queue or shaper class", C,
         Q_OVERLIMITS},
        {"aiqos_uplink_queue_requeues_total", "Requeues of an aiqos-managed uplink queue", C, Q_REQUEUES},
        {"aiqos_uplink_queue_sent_bytes_total", "Bytes sent through an aiqos-managed uplink queue", C, Q_SENT},
        {NULL, NULL, NULL, 0},
};

static const struct queue_family pod_queue_families[] = {
        {"aiqos_pod_queue_backlog_bytes", "Bytes queued in the root queue of a pod's interface", G, Q_BACKLOG},
        {"aiqos_pod_queue_drops_total", "Packets dropped by the root queue of a pod's interface", C, Q_DROPS},
        {"aiqos_pod_queue_overlimits_total", "Overlimit events of the root queue or shaper of a pod's interface", C,
         Q_OVERLIMITS},
        {"aiqos_pod_queue_ecn_marks_total", "Packets ECN/CE-marked by the root queue of a pod's interface", C,
         Q_ECN_MARKS},
        {"aiqos_pod_queue_sent_bytes_total",
         "Bytes sent through the root queue of a pod's interface (side pod: the pod's upload)", C, Q_SENT},
        {NULL, NULL, NULL, 0},
};

static double queue_stat_value(const struct tc_obj_stats *st, enum queue_stat s)
{
	switch (s) {
	case Q_BACKLOG:
		return (double)st->backlog_bytes;
	case Q_DROPS:
		return (double)st->drops;
	case Q_ECN_MARKS:
		return (double)st->ecn_marks;
	case Q_OVERLIMITS:
		return (double)st->overlimits;
	case Q_REQUEUES:
		return (double)st->requeues;
	case Q_SENT:
		return (double)st->bytes;
	}
	return 0;
}

/* One sample of st in each family of fams, with the labels that follow
 * (name/value pairs, then NULL). */
__attribute__((sentinel)) static void queue_write(struct metrics_writer *w, const struct queue_family *fams,
                                                  const struct tc_obj_stats *st, ...)
{
	for (const struct queue_family *f = fams; f->name; f++) {
		va_list ap;

		va_start(ap, st);
		metrics_writev(w, f->name, f->help, f->type, queue_stat_value(st, f->stat), ap);
		va_end(ap);
	}
}

struct uplink_stats_ctx {
	struct metrics_writer *w;
	const char *dev;
	const char *direction;
};

static void uplink_queue_write(const struct uplink_stats_ctx *c, const struct tc_obj_stats *st, const char *cls,
                               const char *object)
{
	queue_write(c->w, uplink_queue_families, st, "dev", c->dev, "direction", c->direction, "class", cls, "object",
	            object, (char *)NULL);
}

/* The root (class "all"), the HTB classes 1:10 1:11 1:20 1:30 (object
 * "class": overlimits = shaping) and their leaf queues 10: 11: 20: 30:
 * (object "queue"). */
static int uplink_stats_visit(const struct tc_obj_stats *st, void *ud)
{
	struct uplink_stats_ctx *c = ud;
	const char *cls;

	if (st->type == TC_QDISC && st->parent == TC_H_ROOT) {
		uplink_queue_write(c, st, "all", "root");
		return 0;
	}
	cls = st->type == TC_CLASS ? class_of_handle(st->handle) : class_of_handle(st->handle & 0xffff0000u);
	if (cls)
		uplink_queue_write(c, st, cls, st->type == TC_CLASS ? "class" : "queue");
	return 0;
}

struct pod_stats_ctx {
	struct metrics_writer *w;
	const struct agent_pod *p;
	const struct agent_attach *at;
	const char *side;
};

static int pod_stats_visit(const struct tc_obj_stats *st, void *ud)
{
	struct pod_stats_ctx *c = ud;

	/* the root queue of the interface (the shaper or the AQM) */
	if (st->type != TC_QDISC || st->parent != TC_H_ROOT || streq(st->kind, "noqueue"))
		return 0;
	queue_write(c->w, pod_queue_families, st, "pod_namespace", c->p->namespace_, "pod_name", c->p->name, "class",
	            class_name(c->at->class), "ifname", c->at->ifname, "side", c->side, (char *)NULL);
	return 0;
}

static void pod_stats(struct agent *ag, struct metrics_writer *w, const struct agent_pod *p)
{
	for (unsigned k = 0; k < p->n_att; k++) {
		const struct agent_attach *at = &p->att[k];
		struct pod_stats_ctx c = {.w = w, .p = p, .at = at};
		_cleanup_close_ int nsfd = -1;
		struct nl_sock *sk = NULL;
		struct link_info li;

		if (at->host_ifindex > 0 && nl_link_get(ag->sk, NULL, at->host_ifindex, &li, NULL) == 0 &&
		    streq(li.ifname, at->host_ifname)) {
			c.side = "host";
			nl_tc_stats_dump(ag->sk, at->host_ifindex, TC_QDISC, pod_stats_visit, &c, NULL);
		}
		if (!at->netns[0] || netns_open(at->netns, &nsfd, NULL) < 0 || nl_open_in_netns(nsfd, &sk, NULL) < 0)
			continue;
		if (nl_link_get(sk, at->ifname, 0, &li, NULL) == 0) {
			c.side = "pod";
			nl_tc_stats_dump(sk, li.ifindex, TC_QDISC, pod_stats_visit, &c, NULL);
		}
		nl_close(sk);
	}
}

/* ---- one direction of the uplink ---- */

/* The rates of one shaped direction (the plan in force: info) and the queue
 * statistics of its tree on ifindex. The download tree (helper "policy":
 * an ifb and `downlinkRate`) is one more call of this with DIR "ingress",
 * its ifb's name and index and its own plan info. */
static void direction_write(struct agent *ag, struct metrics_writer *w, const char *direction, const char *dev,
                            int ifindex, const struct node_plan_info *info)
{
	struct uplink_stats_ctx c = {.w = w, .dev = dev, .direction = direction};

	if (info) {
		metrics_write(w, "aiqos_uplink_rate_bytes_per_second",
		              "Rate of the link in this direction (uplinkRate, or the link speed; 0 = unknown)", G,
		              (double)info->rate_bps / 8.0, "dev", dev, "direction", direction, (char *)NULL);
		metrics_write(w, "aiqos_uplink_shaped_rate_bytes_per_second",
		              "Rate aiqos shapes this direction to (0 = not shaped: the link's own queue)", G,
		              (double)info->shaped_bps / 8.0, "dev", dev, "direction", direction, (char *)NULL);
		for (int k = 0; k < _CLASS_MAX; k++) {
			const char *cls = class_name((enum workload_class)k);

			if (!info->class_rate_bps[k] && !info->shares.share_pm[k])
				continue;
			metrics_write(w, "aiqos_class_guaranteed_rate_bytes_per_second",
			              "Rate guaranteed to a class in this direction (its HTB rate; 0 = not shaped)", G,
			              (double)info->class_rate_bps[k] / 8.0, "dev", dev, "direction", direction,
			              "class", cls, (char *)NULL);
			metrics_write(w, "aiqos_class_guaranteed_share_ratio",
			              "Share of the shaped rate guaranteed to a class in this direction (0..1)", G,
			              info->shares.share_pm[k] / 1000.0, "dev", dev, "direction", direction, "class",
			              cls, (char *)NULL);
		}
		/* the band inside inference (node.h BANDS): its HTB rate; its
		 * counters are the queue families' class "inference-bulk" */
		if (info->bulk_rate_bps)
			metrics_write(w, "aiqos_class_guaranteed_rate_bytes_per_second",
			              "Rate guaranteed to a class in this direction (its HTB rate; 0 = not shaped)", G,
			              (double)info->bulk_rate_bps / 8.0, "dev", dev, "direction", direction, "class",
			              "inference-bulk", (char *)NULL);
	}
	if (ifindex > 0 && ag->sk) {
		nl_tc_stats_dump(ag->sk, ifindex, TC_QDISC, uplink_stats_visit, &c, NULL);
		nl_tc_stats_dump(ag->sk, ifindex, TC_CLASS, uplink_stats_visit, &c, NULL);
	}
}

/* ---- the API client ---- */

static void kube_write(struct agent *ag, struct metrics_writer *w)
{
	static const char *const verbs[] = {"list", "watch", "event"};
	struct kube_client_stats ks;

	if (!ag->kube)
		return;
	kube_client_get_stats(ag->kube, &ks);
	metrics_write(w, "aiqos_watch_reconnects_total", "Watch reconnects", C, (double)ks.reconnects, (char *)NULL);
	metrics_write(w, "aiqos_watch_relists_total", "Relists after the initial list", C, (double)ks.relists,
	              (char *)NULL);
	metrics_write(w, "aiqos_watch_events_bad_total", "Watch events skipped as malformed or oversized", C,
	              (double)(ks.events_bad + ks.events_oversized), (char *)NULL);
	metrics_write(w, "aiqos_api_http_errors_total", "HTTP errors from the API server", C, (double)ks.http_errors,
	              (char *)NULL);
	metrics_write(w, "aiqos_api_events_post_failed_total", "Kubernetes Events that could not be posted", C,
	              (double)(ks.events_post_failed + ks.events_post_dropped), (char *)NULL);
	_Static_assert(ARRAY_SIZE(verbs) == ARRAY_SIZE(ks.request_seconds), "one histogram per verb");
	for (size_t v = 0; v < ARRAY_SIZE(verbs); v++)
		metrics_write_hist(w, "aiqos_api_request_duration_seconds",
		                   "Duration of API server requests by verb (list: a LIST page; watch: to the first "
		                   "response byte; event: an Event POST or PATCH)",
		                   &metrics_buckets_api, &ks.request_seconds[v], "verb", verbs[v], (char *)NULL);
}

void agent_metrics_render(struct agent *ag, struct metrics_writer *w)
{
	static const char *const scope[] = {"pod", "node"}, *const result[] = {"ok", "degraded", "failed"};
	unsigned per_class[_CLASS_MAX] = {0}, per_status[_POD_STATUS_MAX] = {0};

	build_info_write(w);
	process_metrics_write(w);
	datapath_write(ag, w);
	for (int m = 0; m < _MODE_MAX; m++)
		metrics_write(w, "aiqos_node_mode", "The node's mode (1 for the current one)", G,
		              ag->mode.mode == (enum node_mode)m ? 1.0 : 0.0, "mode", node_mode_name((enum node_mode)m),
		              (char *)NULL);
	metrics_write(w, "aiqos_node_mode_changes_total", "Node mode changes", C, (double)ag->ctr.mode_changes,
	              (char *)NULL);
	for (unsigned i = 0; i < ag->pods.n; i++) {
		const struct agent_pod *p = ag->pods.v[i];
		if (pod_counts_for_node(p, ag->api_listed))
			per_class[pod_node_class(p)]++;
		per_status[p->status]++;
	}
	for (int c = 0; c < _CLASS_MAX; c++)
		metrics_write(w, "aiqos_pods", "Pods on this node by class (those counted for the node mode)", G,
		              (double)per_class[c], "class", class_name((enum workload_class)c), (char *)NULL);
	for (int s = 0; s < _POD_STATUS_MAX; s++)
		metrics_write(w, "aiqos_pods_tuning", "Pods on this node by tuning status", G, (double)per_status[s],
		              "status", pod_status_name((enum pod_status)s), (char *)NULL);
	for (int s = 0; s < 2; s++) {
		for (int r = 0; r < 3; r++)
			metrics_write(w, "aiqos_retunes_total", "Re-tunes by scope and outcome", C,
			              (double)ag->ctr.retunes[s][r], "scope", scope[s], "result", result[r],
			              (char *)NULL);
		metrics_write_hist(w, "aiqos_retune_duration_seconds", "Duration of re-tunes by scope (pod, node)",
		                   &metrics_buckets_retune, &ag->ctr.retune_seconds[s], "scope", scope[s],
		                   (char *)NULL);
	}
	metrics_write(w, "aiqos_drift_repairs_total", "Kernel objects re-applied or removed by drift repair", C,
	              (double)ag->ctr.drift_repairs, (char *)NULL);
	for (int d = 0; d < 2; d++)
		for (int k = 0; k < AGENT_HOOK_KINDS; k++) {
			static const char *const hook[AGENT_HOOK_KINDS] = {"clsact", "qdisc", "ifb"};

			metrics_write(w, "aiqos_hook_deletions_total",
			              "aiqos's tc objects deleted by another process (noticed at once, put back)", C,
			              (double)ag->ctr.hook_deletions[d][k], "direction", d ? "ingress" : "egress",
			              "hook", hook[k], (char *)NULL);
		}
	{
		/* 0 until an interval with enough packets was measured (node/reach.h) */
		metrics_write(w, "aiqos_download_reached_packets",
		              "Of the packets the uplink received in the last interval, those that reached aiqos's "
		              "download classifier (fewer than half: another tool's program ends the hook first)",
		              G, (double)ag->down_reach.last_seen, (char *)NULL);
		metrics_write(w, "aiqos_download_received_packets", "The packets the uplink received in that interval",
		              G, (double)ag->down_reach.last_rx, (char *)NULL);
		metrics_write(w, "aiqos_download_bypassed",
		              "1 while the packets the uplink receives do not reach its ingress hook's download "
		              "classifier (the download tree is then fed at the pods' interfaces)",
		              G, ag->down_reach.known && ag->down_reach.bypassed ? 1.0 : 0.0, (char *)NULL);
	}
	metrics_write(w, "aiqos_events_posted_total", "Kubernetes Events the agent posted", C,
	              (double)ag->ctr.events_posted, (char *)NULL);
	for (int r = 0; r < 2; r++) {
		metrics_write(w, "aiqos_config_reloads_total", "Config reloads by outcome", C,
		              (double)ag->ctr.config_reloads[r], "result", r ? "failed" : "ok", (char *)NULL);
		metrics_write(w, "aiqos_cni_chain_runs_total", "Runs of the CNI chaining by outcome", C,
		              (double)ag->ctr.chain_runs[r], "result", r ? "failed" : "ok", (char *)NULL);
	}
	metrics_write(w, "aiqos_api_connected", "1 while a watch stream to the API server is open", G,
	              ag->api_connected ? 1.0 : 0.0, (char *)NULL);
	metrics_write(w, "aiqos_ready", "1 once the first list and reconcile are done", G, ag->ready ? 1.0 : 0.0,
	              (char *)NULL);
	metrics_write(w, "aiqos_records_unsaved",
	              "Attachment records the plugin could not write, not yet written by the agent (retried)", G,
	              (double)ag->records.n, (char *)NULL);
	metrics_write(w, "aiqos_records_written_total",
	              "Attachment records the plugin could not write that the agent wrote later", C,
	              (double)ag->records.written, (char *)NULL);
	metrics_write(w, "aiqos_uplink_failing", "1 while tuning the uplink fails (retried with backoff)", G,
	              ag->up_failure[0] ? 1.0 : 0.0, (char *)NULL);
	{
		unsigned n = 0;
		for (unsigned i = 0; i < ag->pods.n; i++)
			n += ag->pods.v[i]->netns_unreachable;
		metrics_write(w, "aiqos_pods_netns_unreachable",
		              "Running pods whose netns path the agent cannot open (not tuned; retried)", G, (double)n,
		              (char *)NULL);
	}
	for (int t = 0; t < _KUBE_EVENT_MAX; t++)
		if (t != KUBE_EVENT_EXPIRED)
			metrics_write(w, "aiqos_watch_events_total", "Watch events received by type", C,
			              (double)ag->ctr.watch_events[t], "type",
			              kube_event_type_name((enum kube_event_type)t), (char *)NULL);
	kube_write(ag, w);
	if (ag->server)
		agent_server_write_metrics(ag->server, w);

	if (ag->up.ifname[0]) {
		metrics_write(w, "aiqos_uplink_objects", "tc objects of the uplink plan in force", G,
		              (double)ag->in_force.n, "dev", ag->up.ifname, (char *)NULL);
		/* GATED HTB (node.h): the upload tree lives on its ifb */
		if (ag->have_info && ag->info.shape == SHAPE_HTB_IFB)
			direction_write(ag, w, DIR_EGRESS, PLAN_IFB_UP_NAME, ag->shaper.ifb_ifindex, &ag->info);
		else
			direction_write(ag, w, DIR_EGRESS, ag->up.ifname, ag->up.ifindex,
			                ag->have_info ? &ag->info : NULL);
		/* the download tree on the ifb (node.h DOWNLOAD): its own rates, the same shares */
		if (ag->have_info) {
			struct node_plan_info d = ag->info;

			d.rate_bps = ag->info.down.rate_bps;
			d.shaped_bps = ag->info.down.planned ? ag->info.down.shaped_bps : 0;
			for (int k = 0; k < _CLASS_MAX; k++)
				d.class_rate_bps[k] = ag->info.down.planned ? ag->info.down.class_rate_bps[k] : 0;
			d.bulk_rate_bps = ag->info.down.planned ? ag->info.down.bulk_rate_bps : 0;
			direction_write(ag, w, DIR_INGRESS, PLAN_IFB_NAME, ag->down.ifb_ifindex, &d);
			metrics_write(w, "aiqos_download_training_rcv_window_bytes",
			              "Receive window (tcp_rmem maximum) training pods get while the download tree "
			              "shapes (trainingRcvWindow; 0 = not bounded)",
			              G, (double)ag->rcv_window, "dev", PLAN_IFB_NAME, (char *)NULL);
		}
	}
	for (unsigned i = 0; ag->sk && i < ag->pods.n; i++)
		if (ag->pods.v[i]->n_att)
			pod_stats(ag, w, ag->pods.v[i]);
}
