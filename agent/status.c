/* status.c — what the agent tells people: the `aiqosctl status` object
 * (mode, uplink plan in force, pods and their attachments: desired vs
 * effective), `aiqosctl explain` for one pod (its plan as text and tc
 * commands, its uplink filters, and why). The Prometheus families are
 * agent_metrics.c's. Runs on the loop thread. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>

#include "file.h"
#include "json.h"
#include "agent.h"
#include "attach.h"
#include "kube/kube.h"
#include "metrics/metrics.h"
#include "netns.h"
#include "nl.h"
#include "reason.h"
#include "server.h"
#include "status.h"

/* A gate (bpf_gate.h): its threshold, and whether it sends traffic
 * through its ifb right now (read from its map, map_fd): within the hold
 * after a window over the threshold, or while the map's threshold is 0
 * (attached but not synced yet, or off: every packet is redirected). */
static void gate_status(const struct bpf_gate *cfg, uint64_t threshold_bps, int map_fd, cJSON *g)
{
	uint64_t window_us = cfg->win_ns / 1000, hold_ms = cfg->hold_ns / 1000000;
	struct bpf_gate st;
	struct timespec ts;

	if (!g)
		return;
	cJSON_AddNumberToObject(g, "thresholdBps", (double)threshold_bps);
	cJSON_AddNumberToObject(g, "windowUs", (double)window_us);
	cJSON_AddNumberToObject(g, "holdMs", (double)hold_ms);
	if (map_fd >= 0 && bpf_gate_read(map_fd, &st, NULL) == 0 && clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
		cJSON_AddBoolToObject(g, "redirecting",
		                      st.threshold_bytes == 0 ||
		                              (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec <
		                                      st.redirect_until_ns);
}

static const char *class_name(enum workload_class c)
{
	return workload_class_name(c) ?: "default";
}

static cJSON *ips_json(unsigned n, const struct node_ip *ips)
{
	cJSON *arr = cJSON_CreateArray();

	for (unsigned i = 0; arr && i < n; i++) {
		char buf[INET6_ADDRSTRLEN];

		if (!inet_ntop(ips[i].family, ips[i].addr, buf, sizeof(buf)))
			continue;
		cJSON_AddItemToArray(arr, cJSON_CreateString(buf));
	}
	return arr;
}

/* The record file of an attachment as JSON (NULL when unreadable). */
static cJSON *record_json(const struct agent *ag, const struct agent_attach *at)
{
	char path[STATE_PATH_MAX + 256];
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;

	if (state_path(ag->state_dir, at->container_id, at->ifname, path, sizeof(path)) < 0 ||
	    file_read_bounded(path, STATE_FILE_MAX, FILE_READ_NOFOLLOW, &buf, &len, NULL, NULL) < 0)
		return NULL;
	return cJSON_ParseWithLength(buf, len);
}

static cJSON *copy_or(const cJSON *from, const char *key, cJSON *(*fallback)(void))
{
	const cJSON *v = from ? cJSON_GetObjectItemCaseSensitive(from, key) : NULL;
	return v ? cJSON_Duplicate(v, true) : fallback();
}

static cJSON *attachment_json(const struct agent *ag, const struct agent_attach *at)
{
	_cleanup_json_ cJSON *rec = record_json(ag, at);
	cJSON *o = cJSON_CreateObject();
	const cJSON *failure = rec ? cJSON_GetObjectItemCaseSensitive(rec, "failure") : NULL;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "containerId", at->container_id);
	cJSON_AddStringToObject(o, "ifname", at->ifname);
	cJSON_AddStringToObject(o, "hostIfname", at->host_ifname);
	cJSON_AddStringToObject(o, "class", class_name(at->class));
	cJSON_AddStringToObject(o, "profile", at->profile);
	cJSON_AddItemToObject(o, "effective", copy_or(rec, "effective", cJSON_CreateArray));
	cJSON_AddItemToObject(o, "degraded", copy_or(rec, "degraded", cJSON_CreateArray));
	cJSON_AddStringToObject(o, "failure", failure && cJSON_IsString(failure) ? failure->valuestring : "");
	return o;
}

static cJSON *pod_json(const struct agent *ag, const struct agent_pod *p)
{
	cJSON *o = cJSON_CreateObject(), *atts;
	struct node_pod np;

	if (!o)
		return NULL;
	pod_node_pod(p, &np); /* the node plan's view of it */
	cJSON_AddStringToObject(o, "namespace", p->namespace_);
	cJSON_AddStringToObject(o, "name", p->name);
	cJSON_AddStringToObject(o, "uid", p->uid);
	cJSON_AddStringToObject(o, "class", class_name(np.class));
	cJSON_AddStringToObject(o, "profile", np.profile);
	cJSON_AddStringToObject(o, "source", p->in_api ? "api" : "plugin");
	if (p->in_api) {
		cJSON_AddNumberToObject(o, "egressBps", (double)p->want.egress_bps);
		cJSON_AddNumberToObject(o, "ingressBps", (double)p->want.ingress_bps);
		if (p->want.invalid[0])
			cJSON_AddStringToObject(o, "warning", p->want.invalid);
	}
	/* the addresses the uplink classifies */
	cJSON_AddItemToObject(o, "ips", ips_json(np.n_ips, np.ips));
	cJSON_AddStringToObject(o, "status", pod_status_name(p->status));
	cJSON_AddBoolToObject(o, "countsForNode", pod_counts_for_node(p, ag->api_listed));
	if (p->failure[0])
		cJSON_AddStringToObject(o, "failure", p->failure);
	if (p->retry_at_ms >= 0)
		cJSON_AddNumberToObject(o, "retryInMs", (double)(p->retry_at_ms - agent_now_ms()));
	atts = cJSON_AddArrayToObject(o, "attachments");
	for (unsigned k = 0; atts && k < p->n_att; k++) {
		cJSON *a = attachment_json(ag, &p->att[k]);
		if (a)
			cJSON_AddItemToArray(atts, a);
	}
	return o;
}

static void spec_line_dev(const struct agent *ag, enum plan_dev dev, const struct tc_spec *s, char *buf, size_t size)
{
	const char *ifname = dev == DEV_IFB      ? PLAN_IFB_NAME
	                     : dev == DEV_IFB_UP ? PLAN_IFB_UP_NAME
	                     : ag->up.ifname[0]  ? ag->up.ifname
	                                         : "uplink";

	if (tc_spec_format(s, ifname, "replace", buf, size) < 0)
		snprintf(buf, size, "(unprintable)");
}

static void spec_line(const struct agent *ag, const struct tc_spec *s, char *buf, size_t size)
{
	if (tc_spec_format(s, ag->up.ifname[0] ? ag->up.ifname : "uplink", "replace", buf, size) < 0)
		snprintf(buf, size, "(unprintable)");
}

static cJSON *uplink_json(const struct agent *ag)
{
	cJSON *o = cJSON_CreateObject(), *shares, *eff, *deg;
	const struct node_plan_info *info = &ag->info;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "ifname", ag->up.ifname);
	cJSON_AddStringToObject(o, "kind", ag->up.kind[0] ? ag->up.kind : (ag->up.ifname[0] ? "physical" : ""));
	cJSON_AddBoolToObject(o, "virtual", ag->up.facts.is_virtual);
	cJSON_AddNumberToObject(o, "speedBps", (double)ag->up.facts.speed_bps);
	cJSON_AddNumberToObject(o, "rateBps", (double)(ag->have_info ? info->rate_bps : 0));
	cJSON_AddNumberToObject(o, "shapedBps", (double)(ag->have_info ? info->shaped_bps : 0));
	cJSON_AddStringToObject(o, "shape", node_shape_name(ag->have_info ? info->shape : SHAPE_NONE) ?: "none");
	if (ag->have_info && info->shape == SHAPE_HTB_IFB) {
		/* GATED HTB: the tree on the ifb, behind the upload gate */
		struct bpf_gate g;

		cJSON_AddStringToObject(o, "shaperIfb", ag->shaper.ifb_ifindex ? PLAN_IFB_UP_NAME : "");
		node_up_gate_config(info, ag->shaper.ifb_ifindex, &g);
		gate_status(&g, info->up_gate_bps, ag->up_gate_map_fd, cJSON_AddObjectToObject(o, "gate"));
	}
	shares = cJSON_AddObjectToObject(o, "shares");
	for (int c = 0; shares && ag->have_info && c < _CLASS_MAX; c++)
		if (info->shares.share_pm[c])
			cJSON_AddNumberToObject(shares, class_name((enum workload_class)c),
			                        info->shares.share_pm[c] / 1000.0);
	if (ag->have_info && info->mode == MODE_MIXED) {
		cJSON_AddStringToObject(o, "weightBasis", node_weight_basis_name(info->shares.basis) ?: "");
		cJSON_AddNumberToObject(o, "trainingFloor", info->shares.share_pm[CLASS_TRAINING] / 1000.0);
	}
	if (ag->have_info)
		node_bands_json(info, o); /* node.h BANDS */
	{
		/* the HTB guarantees: rate (served first, by prio) and ceil (may borrow up to) */
		cJSON *cl = cJSON_AddObjectToObject(o, "classes");

		for (int c = 0; cl && ag->have_info && c < _CLASS_MAX; c++)
			if (info->class_rate_bps[c]) {
				cJSON *k = cJSON_AddObjectToObject(cl, class_name((enum workload_class)c));

				cJSON_AddNumberToObject(k, "rateBps", (double)info->class_rate_bps[c]);
				cJSON_AddNumberToObject(k, "ceilBps", (double)info->class_ceil_bps[c]);
			}
	}
	eff = cJSON_AddArrayToObject(o, "effective");
	deg = cJSON_AddArrayToObject(o, "degraded");
	for (unsigned i = 0; eff && deg && i < ag->in_force.n && i < AGENT_STATUS_ITEMS_MAX; i++) {
		const struct plan_item *it = &ag->in_force.items[i];
		const struct tc_spec *s = plan_item_effective_tc(it);
		char line[TC_FORMAT_MAX];

		if (s) {
			spec_line_dev(ag, it->dev, s, line, sizeof(line));
			cJSON_AddItemToArray(eff, cJSON_CreateString(line));
		}
		if (it->status == ITEM_DEGRADED || it->status == ITEM_SKIPPED) {
			cJSON *d = cJSON_CreateObject();
			char wanted[TC_FORMAT_MAX];

			if (!d)
				continue;
			spec_line_dev(ag, it->dev, &it->tc[0], wanted, sizeof(wanted));
			cJSON_AddStringToObject(d, "id", it->id);
			cJSON_AddStringToObject(d, "wanted", wanted);
			cJSON_AddStringToObject(d, "got", s ? line : "");
			char why[REASON_MAX];
			cJSON_AddStringToObject(d, "reason", it->err ? reason_item(it, why, sizeof(why)) : "");
			cJSON_AddItemToArray(deg, d);
		}
	}
	if (ag->up.have_record)
		cJSON_AddStringToObject(o, "original", ag->up.record.rendered);
	{
		/* the download direction: ingress of this uplink shaped on the ifb */
		cJSON *dl = cJSON_AddObjectToObject(o, "downlink");
		const struct node_down_info *d = &info->down;

		if (dl) {
			/* planned, and the received packets reach it (node/reach.h) */
			cJSON_AddBoolToObject(dl, "shaped",
			                      ag->have_info && d->planned &&
			                              (!(ag->down_reach.known && ag->down_reach.bypassed) ||
			                               (ag->podside_on && !ag->down_reach.pods_bypassed)));
			/* where the tree is fed: the uplink's ingress hook, or the pods'
			 * interfaces when packets do not reach that hook (podside.h) */
			cJSON_AddStringToObject(dl, "fedAt", ag->podside_on ? "pods" : "uplink");
			if (ag->podside_on)
				cJSON_AddNumberToObject(dl, "podInterfaces", ag->podside_hooked);
			if (ag->down_reach.known) {
				cJSON *re = cJSON_AddObjectToObject(dl, "reach");

				cJSON_AddNumberToObject(re, "reachedPackets", (double)ag->down_reach.last_seen);
				cJSON_AddNumberToObject(re, "receivedPackets", (double)ag->down_reach.last_rx);
				cJSON_AddBoolToObject(re, "bypassed", ag->down_reach.bypassed);
				if (ag->podside_on) {
					cJSON_AddNumberToObject(re, "podPackets", (double)ag->down_reach.last_pods);
					cJSON_AddBoolToObject(re, "podsBypassed", ag->down_reach.pods_bypassed);
				}
			}
			cJSON_AddStringToObject(dl, "ifb", ag->down.ifb_ifindex ? PLAN_IFB_NAME : "");
			cJSON_AddNumberToObject(dl, "rateBps", (double)(ag->have_info ? d->rate_bps : 0));
			cJSON_AddNumberToObject(dl, "shapedBps",
			                        (double)(ag->have_info && d->planned ? d->shaped_bps : 0));
			cJSON_AddBoolToObject(dl, "foreignIngress", ag->down.foreign_hook);
			/* the BPF classifier in front of the ifb (dcls.bpf.c) names each class */
			cJSON_AddBoolToObject(dl, "classifier",
			                      ag->have_info && d->planned && d->classifier && ag->down_cls_map_fd >= 0);
			/* training pods' tcp_rmem maximum (node.h DOWNLOAD), 0 = not bounded */
			cJSON_AddNumberToObject(dl, "trainingRcvWindowBytes", (double)ag->rcv_window);
			/* inference pods' with the bands on (node_down_rcv_bound), 0 = not bounded */
			cJSON_AddNumberToObject(dl, "inferenceRcvWindowBytes",
			                        ag->rcv_window && ag->have_info
			                                ? (double)node_down_rcv_bound(&ag->info, CLASS_INFERENCE)
			                                : 0);
			if (ag->have_info && d->planned && d->gate_bps) {
				struct bpf_gate g;

				node_gate_config(info, &g);
				gate_status(&g, d->gate_bps, ag->down_gate_map_fd, cJSON_AddObjectToObject(dl, "gate"));
			}
			if (ag->have_info && d->planned) {
				cJSON *cl = cJSON_AddObjectToObject(dl, "classes");

				for (int c = 0; cl && c < _CLASS_MAX; c++)
					if (d->class_rate_bps[c]) {
						cJSON *k =
						        cJSON_AddObjectToObject(cl, class_name((enum workload_class)c));

						cJSON_AddNumberToObject(k, "rateBps", (double)d->class_rate_bps[c]);
						cJSON_AddNumberToObject(k, "ceilBps", (double)d->class_ceil_bps[c]);
					}
			}
		}
	}
	if (ag->up_failure[0])
		cJSON_AddStringToObject(o, "failure", ag->up_failure);
	if (ag->up_foreign[0])
		cJSON_AddStringToObject(o, "foreign", ag->up_foreign);
	{
		/* other tools' filters on the uplink's hooks: kept, never replaced */
		cJSON *ff = cJSON_AddArrayToObject(o, "foreignFilters");

		for (unsigned i = 0; ff && i < ag->up_n_hook_foreign; i++)
			cJSON_AddItemToArray(ff, cJSON_CreateString(ag->up_hook_foreign[i]));
	}
	/* where the classifier runs: a tcx link first on the egress hook, or a clsact filter */
	cJSON_AddStringToObject(o, "classifierHook", ag->up_tcx ? "tcx" : "clsact");
	{
		/* other programs on the tcx hooks: they run before every clsact
		 * filter, and one that ends the hook (any verdict but TCX_NEXT;
		 * Cilium's TC_ACT_OK) keeps the download redirect to the ifb and the
		 * upload gate from ever seeing a packet */
		cJSON *tf = cJSON_AddArrayToObject(o, "tcxForeign");

		for (unsigned i = 0; tf && i < ag->up_n_tcx_foreign; i++)
			cJSON_AddItemToArray(tf, cJSON_CreateString(ag->up_tcx_foreign[i]));
	}
	if (ag->up_hook_deleted[0]) {
		/* the last deletion of aiqos's objects by another process */
		cJSON *hd = cJSON_AddObjectToObject(o, "hookDeleted");

		if (hd) {
			cJSON_AddStringToObject(hd, "message", ag->up_hook_deleted);
			cJSON_AddNumberToObject(hd, "at", (double)ag->up_hook_deleted_unix);
		}
	}
	cJSON_AddStringToObject(o, "classify", node_classify_name(ag->cfg.node.classify));
	cJSON_AddStringToObject(o, "classifyEffective",
	                        node_classify_name(ag->classify_why[0] ? CLASSIFY_SRC_IP : ag->cfg.node.classify));
	if (ag->classify_why[0])
		cJSON_AddStringToObject(o, "classifyWhy", ag->classify_why);
	if (ag->up_n_warn) {
		cJSON *w = cJSON_AddArrayToObject(o, "warnings");
		for (unsigned i = 0; w && i < ag->up_n_warn; i++)
			cJSON_AddItemToArray(w, cJSON_CreateString(ag->up_warn[i]));
	}
	return o;
}

cJSON *agent_status_json(struct agent *ag)
{
	_cleanup_json_ cJSON *o = cJSON_CreateObject();
	cJSON *cfg, *pods, *up;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "node", ag->node_name);
	cJSON_AddStringToObject(o, "version", aiqos_version());
	cJSON_AddStringToObject(o, "commit", aiqos_commit());
	cJSON_AddStringToObject(o, "mode", node_mode_name(ag->mode.mode));
	cJSON_AddNumberToObject(o, "modeSince", (double)ag->mode_since_unix);
	up = uplink_json(ag);
	if (!up)
		return NULL;
	cJSON_AddItemToObject(o, "uplink", up);
	{
		/* the pod network (node/datapath.h) and the uplinkOverhead it gives */
		cJSON *dp = datapath_json(&ag->dp);

		if (!dp || !cJSON_AddItemToObject(o, "datapath", dp) ||
		    !cJSON_AddNumberToObject(
		            dp, "uplinkOverhead",
		            datapath_overhead(ag->cfg.overhead_set, ag->cfg.node.overhead_bytes, &ag->dp)) ||
		    !cJSON_AddStringToObject(dp, "uplinkOverheadFrom", ag->cfg.overhead_set ? "config" : "auto"))
			return NULL;
	}
	cJSON_AddBoolToObject(o, "apiConnected", ag->api_connected);
	cJSON_AddBoolToObject(o, "apiSynced", ag->api_listed);
	if (!ag->api_connected && ag->api_why[0])
		cJSON_AddStringToObject(o, "apiError", ag->api_why);
	cJSON_AddBoolToObject(o, "ready", ag->ready);
	cfg = cJSON_AddObjectToObject(o, "config");
	if (cfg) {
		cJSON_AddStringToObject(cfg, "path", ag->config_path);
		cJSON_AddBoolToObject(cfg, "fromFile", ag->cfg.from_file);
		cJSON_AddNumberToObject(cfg, "loadedAt", (double)ag->config_loaded_unix);
		cJSON_AddStringToObject(cfg, "error", ag->config_error);
	}
	/* records the plugin could not write, until the agent could */
	if (!cJSON_AddItemToObject(o, "unsavedRecords", agent_records_json(&ag->records, agent_now_ms())))
		return NULL;
	pods = cJSON_AddArrayToObject(o, "pods");
	if (!pods)
		return NULL;
	for (unsigned i = 0; i < ag->pods.n; i++) {
		cJSON *p = pod_json(ag, ag->pods.v[i]);
		if (!p)
			return NULL;
		cJSON_AddItemToArray(pods, p);
	}
	return TAKE_PTR(o);
}

/* ---- explain ---- */

static void why_add(cJSON *why, const char *fmt, ...) _printf_(2, 3);
static void why_add(cJSON *why, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	cJSON_AddItemToArray(why, cJSON_CreateString(buf));
}

static const char *annotation(const struct agent_pod *p, const char *key)
{
	const cJSON *v = p->annotations ? cJSON_GetObjectItemCaseSensitive(p->annotations, key) : NULL;
	return v && cJSON_IsString(v) ? v->valuestring : NULL;
}

static void explain_why(const struct agent *ag, const struct agent_pod *p, cJSON *why)
{
	const char *wl = annotation(p, ANNOT_WORKLOAD), *prof = annotation(p, ANNOT_PROFILE);
	const char *eg = annotation(p, ANNOT_EGRESS_BW), *in = annotation(p, ANNOT_INGRESS_BW);

	if (!p->in_api) {
		why_add(why, "not in the API view: class %s as the plugin recorded it", class_name(pod_node_class(p)));
	} else if (p->want.invalid[0]) {
		why_add(why, "class default: %s", p->want.invalid);
	} else if (wl) {
		why_add(why, "class %s from annotation %s=%s", class_name(p->want.class), ANNOT_WORKLOAD, wl);
	} else {
		why_add(why, "class default: no %s annotation", ANNOT_WORKLOAD);
	}
	if (p->in_api) {
		if (prof && streq(prof, p->want.profile))
			why_add(why, "profile %s from annotation %s=%s", p->want.profile, ANNOT_PROFILE, prof);
		else if (prof)
			why_add(why, "profile %s: the requested %s=%s is unknown or of another class", p->want.profile,
			        ANNOT_PROFILE, prof);
		else
			why_add(why, "profile %s (the default of class %s)", p->want.profile,
			        class_name(p->want.class));
		if (eg)
			why_add(why, "egress limit %llu bit/s from %s=%s", (unsigned long long)p->want.egress_bps,
			        ANNOT_EGRESS_BW, eg);
		if (in)
			why_add(why, "ingress limit %llu bit/s from %s=%s", (unsigned long long)p->want.ingress_bps,
			        ANNOT_INGRESS_BW, in);
		if (p->want.bulk && p->want.class == CLASS_INFERENCE)
			why_add(why, "bulk by nature from %s=true: every flow in the inference-bulk band%s", ANNOT_BULK,
			        ag->have_info && (ag->info.bulk_priority || ag->info.down.bulk_priority)
			                ? ""
			                : " (no band in this plan)");
		else if (p->want.class == CLASS_INFERENCE && ag->have_info && ag->info.bulk_priority)
			why_add(why, "bands: a flow beyond %u bytes goes to the inference-bulk band until it is quiet",
			        ag->info.bulk_threshold_bytes);
	}
	if (!pod_counts_for_node(p, ag->api_listed))
		why_add(why, "not counted for the node mode (%s)",
		        p->host_network ? "host network"
		        : p->in_api     ? "finished"
		                        : "not in the API");
	why_add(why, "node mode %s on uplink %s", node_mode_name(ag->mode.mode),
	        ag->up.ifname[0] ? ag->up.ifname : "-");
	if (p->n_att == 0)
		why_add(why, "no attachment recorded by the plugin on this node yet");
}

/* Plan of the pod's first attachment (its record), else a dry run on eth0. */
static int explain_plan(struct agent *ag, const struct agent_pod *p, cJSON *o)
{
	_cleanup_attach_state_ struct attach_state *s = calloc(1, sizeof(*s));
	_cleanup_free_ char *text = NULL, *tc = NULL;
	cJSON *plan, *choices = NULL;
	const char *netns = NULL;
	struct plan_names names;
	int r = -ENOENT;

	if (!s)
		return -ENOMEM;
	if (p->n_att > 0) {
		r = state_load(ag->state_dir, p->att[0].container_id, p->att[0].ifname, s, &choices, NULL);
		if (r == 0) {
			r = attach_plan_restore(&ag->profiles, s, choices, NULL, NULL);
			netns = s->netns;
		}
		cJSON_Delete(choices);
	}
	if (r < 0) {
		struct workload w = {
		        .class = p->want.class, .egress_bps = p->want.egress_bps, .ingress_bps = p->want.ingress_bps};
		struct attach_ifaces ifs = {.pod_ifname = "eth0", .host_ifname = "veth-host"};

		str_copy(w.profile, sizeof(w.profile), p->want.profile_requested);
		r = plan_pod(&w, profile_resolve(&ag->profiles, &w, NULL, 0), &ifs, &ag->pod_caps, &s->plan);
		s->ifs = ifs;
		if (r < 0)
			return r;
	}
	names = plan_names_attach(&s->ifs);
	if (plan_render(&s->plan, &names, netns, PLAN_FMT_TEXT, false, &text) < 0 ||
	    plan_render(&s->plan, &names, netns, PLAN_FMT_TC, false, &tc) < 0)
		return -ENOMEM;
	plan = cJSON_AddObjectToObject(o, "plan");
	if (!plan)
		return -ENOMEM;
	cJSON_AddStringToObject(plan, "text", text);
	cJSON_AddStringToObject(plan, "tc", tc);
	cJSON_AddStringToObject(plan, "source", p->n_att ? "record" : "dry-run");
	return 0;
}

cJSON *agent_explain_json(struct agent *ag, const char *ns, const char *name, bool *ret_found)
{
	struct agent_pod *p = pod_cache_lookup(&ag->pods, ns, name, NULL);
	_cleanup_json_ cJSON *o = NULL;
	_cleanup_free_ struct node_pod *pods = NULL;
	cJSON *items, *down, *why;
	unsigned n = 0;

	*ret_found = p != NULL;
	if (!p)
		return NULL;
	o = pod_json(ag, p);
	if (!o)
		return NULL;
	if (explain_plan(ag, p, o) < 0)
		return NULL;
	items = cJSON_AddArrayToObject(o, "uplinkItems");
	down = cJSON_AddArrayToObject(o, "downloadItems");
	if (items && pod_cache_node_pods(&ag->pods, ag->api_listed, &pods, &n) == 0) {
		for (unsigned i = 0; i < n; i++) {
			if (!streq(pods[i].namespace_, p->namespace_) || !streq(pods[i].name, p->name))
				continue;
			for (unsigned k = 0; k < pods[i].n_ips; k++) {
				char id[PLAN_ID_MAX], line[TC_FORMAT_MAX + 64];
				const struct plan_item *it;

				if (node_pod_item_id(pods[i].uid, k, id, sizeof(id)) < 0)
					continue;
				it = plan_find_const(&ag->in_force, id);
				if (!it)
					continue;
				spec_line(ag, plan_item_effective_tc(it) ?: &it->tc[0], line, sizeof(line));
				snprintf(line + strlen(line), sizeof(line) - strlen(line), "  # %s %s", id,
				         item_status_name(it->status) ?: "?");
				cJSON_AddItemToArray(items, cJSON_CreateString(line));
			}
			/* its download filters on the ifb */
			for (unsigned k = 0; down && k < pods[i].n_ips; k++) {
				char id[PLAN_ID_MAX], line[TC_FORMAT_MAX + 64];
				const struct plan_item *it;

				if (node_down_pod_item_id(pods[i].uid, k, id, sizeof(id)) < 0 ||
				    !(it = plan_find_const(&ag->in_force, id)))
					continue;
				spec_line_dev(ag, DEV_IFB, plan_item_effective_tc(it) ?: &it->tc[0], line,
				              sizeof(line));
				snprintf(line + strlen(line), sizeof(line) - strlen(line), "  # %s %s", id,
				         item_status_name(it->status) ?: "?");
				cJSON_AddItemToArray(down, cJSON_CreateString(line));
			}
		}
	}
	why = cJSON_AddArrayToObject(o, "why");
	if (why)
		explain_why(ag, p, why);
	return TAKE_PTR(o);
}
