/* loop.c — the agent's one sd-event loop: the Kubernetes API client (pod
 * list/watch into the pod cache), the plugin socket, /metrics, an rtnetlink
 * monitor (the uplink and default routes appearing, vanishing, moving), inotify
 * on the config file (hot reload), the state dir (attachments the plugin
 * records) and the CNI config dir (re-chain when the primary CNI rewrites its
 * file), one timer armed at the scheduler's next deadline, signals (TERM/INT
 * stop and leave the tuning in place, HUP reloads) and sd_notify
 * (READY after the first list + reconcile, WATCHDOG, STATUS on mode changes). */
#include <cjson/cJSON.h>
#include <libgen.h>
#include <linux/if.h>
#include <malloc.h>
#include <linux/rtnetlink.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include "agent.h"
#include "node/rcv_window.h"
#include "install/chain.h"
#include "kube/kube.h"
#include "loop.h"
#include "metrics/agent_metrics.h"
#include "metrics/metrics.h"
#include "nl.h"
#include "reconcile/reconcile.h"
#include "server.h"
#include "status.h"

#define USEC_PER_MSEC 1000ULL

struct loop_priv {
	sd_event_source *timer;
	sd_event_source *post;
	sd_event_source *sig_term, *sig_int, *sig_hup;
	sd_event_source *rtnl;
	sd_event_source *ino_config, *ino_state, *ino_cni;
	struct nl_sock *mon;
	char config_dir[AGENT_PATH_MAX];
	char config_base[256];
	int64_t config_due_ms; /* settle: reload at this time, -1 none */
	int64_t cni_due_ms;    /* settle: re-chain at this time, -1 none */
	bool rescan_due;       /* the state dir overflowed: rescan it */
	int64_t reach_due_ms;  /* sample whether downloads reach the tree (node/reach.h), -1 none */
	struct kube_client_config kcfg;
};

static struct loop_priv *priv(struct agent *ag)
{
	return ag->loop_priv;
}

/* ---- hooks for reconcile/ ---- */

static void hook_event(struct agent *ag, const struct agent_pod *p, bool warning, const char *reason, const char *msg)
{
	if (ag->kube)
		kube_post_pod_event(ag->kube, p->namespace_, p->name, p->uid,
		                    warning ? KUBE_EV_WARNING : KUBE_EV_NORMAL, reason, msg);
}

static void hook_notify(struct agent *ag, const char *status)
{
	sd_notifyf(0, "STATUS=%s", status);
}

static void cni_chain(struct agent *ag);

/* ---- config reload ---- */

static void config_reload(struct agent *ag, const char *why)
{
	struct agent_config cfg;
	struct error e = {0};
	char old_uplink[IFNAME_LEN];
	int r;

	r = agent_config_load(ag->config_path, &cfg, &e);
	if (r < 0) {
		ag->ctr.config_reloads[1]++;
		str_copy(ag->config_error, sizeof(ag->config_error), e.msg);
		log_msg(LOG_LVL_ERROR, "config reload failed; keeping the previous config", "trigger", why, "error",
		        e.msg, (char *)NULL);
		return;
	}
	str_copy(old_uplink, sizeof(old_uplink), ag->cfg.node.uplink);
	agent_config_done(&ag->cfg);
	ag->cfg = cfg;
	ag->ctr.config_reloads[0]++;
	ag->config_error[0] = '\0';
	ag->config_loaded_unix = agent_now_unix();
	sched_configure(&ag->sched, ag->cfg.node.debounce_ms, ag->cfg.drift_repair_s, agent_now_ms());
	if (!streq(old_uplink, ag->cfg.node.uplink))
		ag->up_need_discover = true;
	agent_profiles_refresh(ag, false);
	r = (int)pod_cache_rewant(&ag->pods, &ag->profiles);
	log_msg(LOG_LVL_INFO, "config reloaded", "trigger", why, "file", ag->config_path, "from_file",
	        ag->cfg.from_file ? "true" : "false", (char *)NULL);
	if (r > 0) {
		char n[16];

		snprintf(n, sizeof(n), "%d", r);
		log_msg(LOG_LVL_INFO, "config changed the tuning of running pods; re-tuning them", "pods", n,
		        (char *)NULL);
	}
	/* the chained plugin config carries the profiles: keep it in step */
	if (ag->opt.cni_conf_dir)
		cni_chain(ag);
	sched_kick(&ag->sched, agent_now_ms());
}

/* ---- CNI chaining ---- */

/* The aiqos entry the agent chains: --plugin-conf (or the default) with the
 * agent's effective profiles in it (every profile, whole: profile_to_json),
 * so the plugin's ADD plans with exactly the profiles of the agent's
 * re-tunes (it reads no agent config and asks no one), including what the
 * config implies (classify "dscp" re-marks default pods to 0). NULL keeps
 * the entry as given: the config sets no profiles and classifies by address,
 * or the entry does not parse (chain_ensure reports that). Caller frees. */
static char *plugin_conf_with_profiles(const struct agent *ag)
{
	const char *text = ag->opt.plugin_conf ? ag->opt.plugin_conf : CHAIN_PLUGIN_CONF_DEFAULT;
	cJSON *j, *set;
	char *out;

	if (!agent_config_profiles_json(&ag->cfg) && ag->cfg.node.classify != CLASSIFY_DSCP)
		return NULL;
	j = cJSON_Parse(text);
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return NULL;
	}
	set = cJSON_CreateObject();
	for (unsigned i = 0; set && i < ag->cfg.profiles.n; i++) {
		cJSON *p = profile_to_json(&ag->cfg.profiles.p[i]);

		if (!p || !cJSON_AddItemToObject(set, ag->cfg.profiles.p[i].name, p)) {
			cJSON_Delete(p);
			cJSON_Delete(set);
			set = NULL;
		}
	}
	cJSON_DeleteItemFromObjectCaseSensitive(j, "profiles");
	if (!set || !cJSON_AddItemToObject(j, "profiles", set)) {
		cJSON_Delete(set);
		cJSON_Delete(j);
		return NULL;
	}
	out = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return out;
}

static void cni_chain(struct agent *ag)
{
	_cleanup_free_ char *conf = plugin_conf_with_profiles(ag);
	struct chain_options o = {
	        .conf_dir = ag->opt.cni_conf_dir,
	        .bin_dir = ag->opt.cni_bin_dir,
	        .plugin_src = ag->opt.plugin_src,
	        .plugin_conf = conf ? conf : ag->opt.plugin_conf,
	        .dropin = ag->opt.chain_dropin,
	        .edit_in_place = ag->opt.chain_in_place,
	};
	struct error e = {0};
	struct chain_report rep;
	bool changed;

	if (chain_ensure_report(&o, &rep, &e) < 0) {
		ag->ctr.chain_runs[1]++;
		log_msg(LOG_LVL_ERROR, "CNI chaining failed", "dir", o.conf_dir, "error", e.msg, (char *)NULL);
		return;
	}
	ag->ctr.chain_runs[0]++;
	changed = rep.conf_changed || rep.binary_changed;
	log_msg(rep.two_shapers ? LOG_LVL_WARN
	        : changed       ? LOG_LVL_INFO
	                        : LOG_LVL_DEBUG,
	        changed ? "CNI chain updated" : "CNI chain in place", "dir", o.conf_dir, "what", rep.what,
	        (char *)NULL);
}

/* ---- the timer ---- */

static void loop_rearm(struct agent *ag)
{
	struct loop_priv *lp = priv(ag);
	int64_t t = sched_next(&ag->sched);

	t = sched_earliest(t, lp->config_due_ms);
	t = sched_earliest(t, lp->cni_due_ms);
	if (lp->rescan_due)
		t = sched_earliest(t, agent_now_ms());
	if (ag->down_seen_map_fd < 0)
		lp->reach_due_ms = -1;
	else if (lp->reach_due_ms < 0)
		lp->reach_due_ms = agent_now_ms() + DOWN_REACH_INTERVAL_MS;
	t = sched_earliest(t, lp->reach_due_ms);
	if (t < 0) {
		sd_event_source_set_enabled(lp->timer, SD_EVENT_OFF);
		return;
	}
	sd_event_source_set_time(lp->timer, (uint64_t)(t < 0 ? 0 : t) * USEC_PER_MSEC);
	sd_event_source_set_enabled(lp->timer, SD_EVENT_ONESHOT);
}

static int on_post(sd_event_source *s, void *ud)
{
	loop_rearm(ud);
	return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *ud)
{
	struct agent *ag = ud;
	struct loop_priv *lp = priv(ag);
	int64_t now = agent_now_ms();
	unsigned due;

	if (lp->config_due_ms >= 0 && lp->config_due_ms <= now) {
		lp->config_due_ms = -1;
		config_reload(ag, "file changed");
	}
	if (lp->cni_due_ms >= 0 && lp->cni_due_ms <= now) {
		lp->cni_due_ms = -1;
		cni_chain(ag);
	}
	if (lp->rescan_due) {
		lp->rescan_due = false;
		agent_attach_rescan(ag);
		sched_kick(&ag->sched, now);
	}
	if (lp->reach_due_ms >= 0 && lp->reach_due_ms <= now) {
		lp->reach_due_ms = now + DOWN_REACH_INTERVAL_MS;
		agent_down_reach_tick(ag, now);
	}
	due = sched_take_due(&ag->sched, now);
	if (due) {
		agent_pass(ag, now, due);
		/* a pass allocates and frees (records, plans, dumps): give the
		 * freed heap back so the footprint stays that of the pods */
		malloc_trim(0);
	}
	if (!ag->ready && ag->api_listed && (due & SCHED_PASS)) {
		ag->ready = true;
		sd_notifyf(0, "READY=1\nSTATUS=mode %s on %s", node_mode_name(ag->mode.mode),
		           ag->up.ifname[0] ? ag->up.ifname : "-");
		log_msg(LOG_LVL_INFO, "ready", "pods", LOG_FMT("%zu", (size_t)ag->pods.n), "mode",
		        node_mode_name(ag->mode.mode), "uplink", ag->up.ifname, (char *)NULL);
		if (ag->opt.once)
			sd_event_exit(ag->loop, 0);
	}
	return 0;
}

/* ---- the API client ---- */

static void kube_list_begin(void *ud)
{
	struct agent *ag = ud;

	pod_cache_list_begin(&ag->pods);
}

static bool pod_is_ours(const struct agent *ag, const struct kube_pod *pod)
{
	return !pod->node_name[0] || streq(pod->node_name, ag->node_name);
}

static void kube_list_pod(void *ud, const struct kube_pod *pod)
{
	struct agent *ag = ud;
	unsigned changed;

	if (!pod_is_ours(ag, pod))
		return;
	if (!pod_cache_api_upsert(&ag->pods, pod, &ag->profiles, &changed))
		log_msg(LOG_LVL_ERROR, "out of memory caching a pod", "pod",
		        LOG_FMT("%s/%s", pod->namespace_, pod->name), (char *)NULL);
}

static void kube_list_end(void *ud)
{
	struct agent *ag = ud;
	unsigned dropped = pod_cache_list_end(&ag->pods);
	bool first = !ag->api_listed;

	ag->api_listed = true;
	log_msg(first ? LOG_LVL_INFO : LOG_LVL_DEBUG, first ? "pods listed" : "pods relisted", "pods",
	        LOG_FMT("%zu", (size_t)ag->pods.n), "gone", LOG_FMT("%u", dropped), (char *)NULL);
	if (first)
		sched_kick_now(&ag->sched, agent_now_ms());
	else
		sched_kick(&ag->sched, agent_now_ms());
}

static void kube_watch_event(void *ud, enum kube_event_type type, const struct kube_pod *pod)
{
	struct agent *ag = ud;
	unsigned changed = 0;

	if (type >= 0 && type < _KUBE_EVENT_MAX)
		ag->ctr.watch_events[type]++;
	switch (type) {
	case KUBE_EVENT_ADDED:
	case KUBE_EVENT_MODIFIED:
		if (!pod_is_ours(ag, pod)) {
			changed = pod_cache_api_delete(&ag->pods, pod->uid) ? POD_CHANGED_NODE : 0;
			break;
		}
		if (!pod_cache_api_upsert(&ag->pods, pod, &ag->profiles, &changed))
			log_msg(LOG_LVL_ERROR, "out of memory caching a pod", "pod",
			        LOG_FMT("%s/%s", pod->namespace_, pod->name), (char *)NULL);
		break;
	case KUBE_EVENT_DELETED:
		changed = pod_cache_api_delete(&ag->pods, pod->uid) ? POD_CHANGED_NODE : 0;
		break;
	default:
		break;
	}
	if (changed)
		sched_kick(&ag->sched, agent_now_ms());
}

static void kube_state(void *ud, bool connected, const char *why)
{
	struct agent *ag = ud;

	if (connected != ag->api_connected)
		log_msg(connected ? LOG_LVL_INFO : LOG_LVL_WARN, connected ? "API watch open" : "API watch lost", "why",
		        why ? why : "", (char *)NULL);
	ag->api_connected = connected;
	str_copy(ag->api_why, sizeof(ag->api_why), why ? why : "");
}

static const struct kube_client_ops kube_ops = {
        .list_begin = kube_list_begin,
        .list_pod = kube_list_pod,
        .list_end = kube_list_end,
        .watch_event = kube_watch_event,
        .state = kube_state,
};

/* ---- the plugin socket ---- */

static int srv_pod_annotations(void *ud, const char *ns, const char *name, const char *uid, cJSON **ret_annotations,
                               bool *ret_found)
{
	struct agent *ag = ud;
	struct agent_pod *p = pod_cache_lookup(&ag->pods, ns, name, uid);

	*ret_found = false;
	*ret_annotations = NULL;
	if (!p || !p->in_api || (uid && uid[0] && !streq(p->uid, uid)))
		return 0;
	*ret_annotations = p->annotations ? cJSON_Duplicate(p->annotations, true) : cJSON_CreateObject();
	if (!*ret_annotations)
		return -ENOMEM;
	*ret_found = true;
	return 0;
}

static void srv_attachment(void *ud, bool attached, const struct proto_request *r)
{
	struct agent *ag = ud;
	struct error e = {0};
	bool found;

	if (attached && r->attachment) {
		/* the plugin could not write it: ours to write (records.h) */
		if (agent_records_offer(&ag->records, r->attachment, r->container_id, r->ifname, agent_now_ms(), &e) <
		    0)
			log_msg(LOG_LVL_WARN, "unsaved attachment record refused", "container", r->container_id,
			        "ifname", r->ifname, "error", e.msg, (char *)NULL);
		else
			log_msg(LOG_LVL_INFO, "attachment record to write for the plugin", "container", r->container_id,
			        "ifname", r->ifname, (char *)NULL);
		sched_kick_now(&ag->sched, agent_now_ms());
		return;
	}
	if (attached) {
		if (agent_attach_load(ag, r->container_id, r->ifname, &e) < 0)
			log_msg(LOG_LVL_WARN, "attachment record unreadable", "container", r->container_id, "ifname",
			        r->ifname, "error", e.msg, (char *)NULL);
	} else {
		agent_records_forget(&ag->records, r->container_id, r->ifname);
		pod_cache_attach_remove(&ag->pods, r->container_id, r->ifname, &found);
	}
	sched_kick(&ag->sched, agent_now_ms());
}

static cJSON *srv_status(void *ud)
{
	return agent_status_json(ud);
}

static cJSON *srv_explain(void *ud, const char *ns, const char *name, bool *ret_found)
{
	return agent_explain_json(ud, ns, name, ret_found);
}

static const struct agent_server_ops server_ops = {
        .pod_annotations = srv_pod_annotations,
        .attachment = srv_attachment,
        .status = srv_status,
        .explain = srv_explain,
};

/* ---- metrics ---- */

static void m_render(void *ud, struct metrics_writer *w)
{
	agent_metrics_render(ud, w);
}

static bool m_healthy(void *ud)
{
	const struct agent *ag = ud;
	return !ag->stopping;
}

static bool m_ready(void *ud)
{
	const struct agent *ag = ud;
	return ag->ready;
}

static const struct metrics_ops metrics_ops = {.render = m_render, .healthy = m_healthy, .ready = m_ready};

/* ---- rtnetlink monitor ---- */

/* An ifb's link message that needs a pass: its deletion, a state without
 * IFF_UP (mirred drops what it redirects to a device that is down), another
 * name (ifb_ensure renames it back) or an MTU other than the uplink's
 * (ifb_ensure gives it back). */
static bool ifb_link_broken(const struct agent *ag, struct nlmsghdr *h, const struct ifinfomsg *ifi)
{
	const char *name = ifi->ifi_index == ag->down.ifb_ifindex ? PLAN_IFB_NAME : PLAN_IFB_UP_NAME;
	struct nlattr *tb[IFLA_MAX + 1];

	if (h->nlmsg_type == RTM_DELLINK || !(ifi->ifi_flags & IFF_UP))
		return true;
	if (nlmsg_parse(h, sizeof(*ifi), tb, IFLA_MAX, NULL) < 0)
		return false;
	if (tb[IFLA_IFNAME] && !streq(nla_get_string(tb[IFLA_IFNAME]), name))
		return true;
	return ag->up.facts.mtu && tb[IFLA_MTU] && nla_get_u32(tb[IFLA_MTU]) != ag->up.facts.mtu;
}

/* A link message of a tunnel kind (datapath_header_bytes knows it). */
static bool tunnel_link_msg(struct nlmsghdr *h, const struct ifinfomsg *ifi)
{
	struct nlattr *tb[IFLA_MAX + 1], *li[IFLA_INFO_MAX + 1];

	if (nlmsg_parse(h, sizeof(*ifi), tb, IFLA_MAX, NULL) < 0 || !tb[IFLA_LINKINFO] ||
	    nla_parse_nested(li, IFLA_INFO_MAX, tb[IFLA_LINKINFO], NULL) < 0 || !li[IFLA_INFO_KIND])
		return false;
	return datapath_header_bytes(nla_get_string(li[IFLA_INFO_KIND]), false) > 0;
}

static int rtnl_msg(struct nl_msg *msg, void *ud)
{
	struct agent *ag = ud;
	struct nlmsghdr *h = nlmsg_hdr(msg);
	bool relevant = false;

	switch (h->nlmsg_type) {
	case RTM_NEWLINK:
	case RTM_DELLINK: {
		const struct ifinfomsg *ifi = nlmsg_data(h);

		if (!nlmsg_valid_hdr(h, sizeof(*ifi)))
			break;
		if (ifi->ifi_index == ag->up.ifindex || !ag->up.ifname[0]) {
			relevant = true;
		} else if (!streq(ag->cfg.node.uplink, NODE_UPLINK_AUTO) && h->nlmsg_type == RTM_NEWLINK) {
			/* a named uplink that appears */
			struct nlattr *tb[IFLA_MAX + 1];
			if (nlmsg_parse(h, sizeof(*ifi), tb, IFLA_MAX, NULL) == 0 && tb[IFLA_IFNAME] &&
			    streq(nla_get_string(tb[IFLA_IFNAME]), ag->cfg.node.uplink))
				relevant = true;
		}
		if (!relevant && tunnel_link_msg(h, ifi))
			relevant = true; /* a tunnel device came, went or changed: the datapath (node/datapath.h) */
		if (ifi->ifi_index > 0 &&
		    (ifi->ifi_index == ag->down.ifb_ifindex || ifi->ifi_index == ag->shaper.ifb_ifindex) &&
		    ifb_link_broken(ag, h, ifi)) {
			/* one of our ifbs deleted, set down or given another MTU
			 * behind our back: the redirect to it drops what it takes
			 * until a pass puts it back */
			ag->up_need_observe = true;
			sched_kick(&ag->sched, agent_now_ms());
		}
		if (h->nlmsg_type == RTM_DELLINK)
			for (unsigned i = 0; i < ag->pods.n; i++)
				for (unsigned k = 0; k < ag->pods.v[i]->n_att; k++)
					if (ag->pods.v[i]->att[k].host_ifindex == ifi->ifi_index)
						ag->pods.v[i]->dirty = true; /* its pod went away: look again */
		break;
	}
	case RTM_NEWROUTE:
	case RTM_DELROUTE: {
		const struct rtmsg *rtm = nlmsg_data(h);

		if (nlmsg_valid_hdr(h, sizeof(*rtm)) && rtm->rtm_dst_len == 0 && rtm->rtm_table == RT_TABLE_MAIN &&
		    streq(ag->cfg.node.uplink, NODE_UPLINK_AUTO))
			relevant = true;
		break;
	}
	case RTM_NEWTFILTER:
	case RTM_DELTFILTER:
	case RTM_DELQDISC: {
		const struct tcmsg *t = nlmsg_data(h);
		struct nlattr *tb[TCA_MAX + 1];
		char kind[16] = "";

		/* our own changes come from our socket's port */
		if (!nlmsg_valid_hdr(h, sizeof(*t)) || (ag->sk && h->nlmsg_pid == nl_socket_get_local_port(ag->sk)))
			break;
		if (nlmsg_parse(h, sizeof(*t), tb, TCA_MAX, NULL) == 0 && tb[TCA_KIND])
			nla_strlcpy(kind, tb[TCA_KIND], sizeof(kind));
		agent_tc_event(ag, h->nlmsg_type, t->tcm_ifindex, t->tcm_parent, t->tcm_handle,
		               (uint16_t)(TC_H_MAJ(t->tcm_info) >> 16), kind, h->nlmsg_pid);
		break;
	}
	default:
		break;
	}
	if (relevant) {
		ag->up_need_discover = true;
		sched_kick(&ag->sched, agent_now_ms());
	}
	return NL_OK;
}

static int on_rtnl(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
	struct agent *ag = ud;
	struct loop_priv *lp = priv(ag);

	for (int i = 0; i < 64; i++) {
		int r = nl_recvmsgs_default(lp->mon);

		if (r >= 0)
			continue;
		if (r == -NLE_AGAIN)
			break;
		/* overflow (ENOBUFS) or another error: we may have missed events */
		log_msg(LOG_LVL_WARN, "rtnetlink monitor lost messages; re-reading", "error", nl_geterror(r),
		        (char *)NULL);
		ag->up_need_discover = true;
		lp->rescan_due = true;
		sched_kick(&ag->sched, agent_now_ms());
		break;
	}
	return 0;
}

static int rtnl_monitor_open(struct agent *ag, struct error *err)
{
	struct loop_priv *lp = priv(ag);
	int r;

	lp->mon = nl_socket_alloc();
	if (!lp->mon)
		return error_set(err, ENOMEM, "rtnetlink monitor: out of memory");
	nl_socket_disable_seq_check(lp->mon);
	nl_socket_modify_cb(lp->mon, NL_CB_VALID, NL_CB_CUSTOM, rtnl_msg, ag);
	r = nl_connect(lp->mon, NETLINK_ROUTE);
	if (r >= 0)
		r = nl_socket_add_memberships(lp->mon, RTNLGRP_LINK, RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE, RTNLGRP_TC,
		                              0);
	if (r >= 0)
		r = nl_socket_set_nonblocking(lp->mon);
	if (r >= 0)
		r = nl_socket_set_buffer_size(lp->mon, 1 << 20, 0);
	if (r < 0) {
		r = nl_to_errno(r);
		return error_set(err, -r, "rtnetlink monitor: %s", strerror(-r));
	}
	r = sd_event_add_io(ag->loop, &lp->rtnl, nl_socket_get_fd(lp->mon), EPOLLIN, on_rtnl, ag);
	if (r < 0)
		return error_set(err, -r, "rtnetlink monitor: add to the loop: %s", strerror(-r));
	return 0;
}

/* ---- inotify ---- */

static int on_config_dir(sd_event_source *s, const struct inotify_event *ev, void *ud)
{
	struct agent *ag = ud;
	struct loop_priv *lp = priv(ag);

	if (ev->mask & IN_Q_OVERFLOW || (ev->len && (streq(ev->name, lp->config_base) || ev->name[0] == '.')))
		if (lp->config_due_ms < 0)
			lp->config_due_ms = agent_now_ms() + AGENT_RELOAD_SETTLE_MS;
	return 0;
}

static int on_state_dir(sd_event_source *s, const struct inotify_event *ev, void *ud)
{
	struct agent *ag = ud;
	char cid[STATE_ID_MAX], ifn[IFNAME_LEN];
	struct error e = {0};
	bool found;

	if (ev->mask & IN_Q_OVERFLOW) {
		priv(ag)->rescan_due = true;
		return 0;
	}
	if (!ev->len || !state_file_parse(ev->name, cid, sizeof(cid), ifn, sizeof(ifn)))
		return 0;
	if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
		pod_cache_attach_remove(&ag->pods, cid, ifn, &found);
		if (found)
			sched_kick(&ag->sched, agent_now_ms());
		return 0;
	}
	if (agent_attach_load(ag, cid, ifn, &e) < 0)
		log_msg(LOG_LVL_WARN, "attachment record unreadable", "container", cid, "ifname", ifn, "error", e.msg,
		        (char *)NULL);
	sched_kick(&ag->sched, agent_now_ms());
	return 0;
}

static int on_cni_dir(sd_event_source *s, const struct inotify_event *ev, void *ud)
{
	struct agent *ag = ud;
	struct loop_priv *lp = priv(ag);

	if ((ev->mask & IN_Q_OVERFLOW) || (ev->len && chain_name_relevant(ev->name)))
		if (lp->cni_due_ms < 0)
			lp->cni_due_ms = agent_now_ms() + AGENT_RELOAD_SETTLE_MS;
	return 0;
}

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[AGENT_PATH_MAX];

	if (str_copy(buf, sizeof(buf), path) < 0)
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int watches_add(struct agent *ag, struct error *err)
{
	struct loop_priv *lp = priv(ag);
	char tmp[AGENT_PATH_MAX];
	int r;

	str_copy(tmp, sizeof(tmp), ag->config_path);
	str_copy(lp->config_dir, sizeof(lp->config_dir), dirname(tmp));
	str_copy(tmp, sizeof(tmp), ag->config_path);
	str_copy(lp->config_base, sizeof(lp->config_base), basename(tmp));
	r = sd_event_add_inotify(ag->loop, &lp->ino_config, lp->config_dir,
	                         IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ONLYDIR,
	                         on_config_dir, ag);
	if (r < 0)
		log_msg(LOG_LVL_WARN, "config dir not watched: changes need SIGHUP", "dir", lp->config_dir, "error",
		        strerror(-r), (char *)NULL);

	r = mkdir_p(ag->state_dir, 0700);
	if (r < 0)
		return error_set(err, -r, "state dir %s: %s", ag->state_dir, strerror(-r));
	r = sd_event_add_inotify(ag->loop, &lp->ino_state, ag->state_dir,
	                         IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR, on_state_dir,
	                         ag);
	if (r < 0)
		return error_set(err, -r, "watch the state dir %s: %s", ag->state_dir, strerror(-r));

	if (ag->opt.cni_conf_dir) {
		r = sd_event_add_inotify(ag->loop, &lp->ino_cni, ag->opt.cni_conf_dir,
		                         IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE |
		                                 IN_ONLYDIR,
		                         on_cni_dir, ag);
		if (r < 0)
			return error_set(err, -r, "watch the CNI config dir %s: %s", ag->opt.cni_conf_dir,
			                 strerror(-r));
	}
	return 0;
}

/* ---- signals ---- */

static int on_stop(sd_event_source *s, const struct signalfd_siginfo *si, void *ud)
{
	struct agent *ag = ud;

	log_msg(LOG_LVL_INFO, "stopping; the tuning stays in place (aiqos-agent --cleanup restores the uplink)",
	        "signal", strsignal((int)si->ssi_signo), (char *)NULL);
	ag->stopping = true;
	sd_notify(0, "STOPPING=1");
	return sd_event_exit(ag->loop, 0);
}

static int on_hup(sd_event_source *s, const struct signalfd_siginfo *si, void *ud)
{
	struct agent *ag = ud;

	config_reload(ag, "SIGHUP");
	priv(ag)->rescan_due = true;
	if (ag->opt.cni_conf_dir)
		priv(ag)->cni_due_ms = agent_now_ms();
	ag->up_need_discover = true;
	sched_kick_now(&ag->sched, agent_now_ms());
	return 0;
}

/* ---- setup and teardown ---- */

static void loop_free(struct agent *ag)
{
	struct loop_priv *lp = priv(ag);

	if (ag->kube)
		kube_client_free(ag->kube);
	ag->kube = NULL;
	if (ag->server)
		agent_server_free(ag->server);
	ag->server = NULL;
	if (ag->metrics)
		metrics_server_free(ag->metrics);
	ag->metrics = NULL;
	if (lp) {
		sd_event_source *srcs[] = {lp->timer, lp->post,       lp->sig_term,  lp->sig_int, lp->sig_hup,
		                           lp->rtnl,  lp->ino_config, lp->ino_state, lp->ino_cni};
		for (size_t i = 0; i < ARRAY_SIZE(srcs); i++)
			sd_event_source_disable_unref(srcs[i]);
		if (lp->mon)
			nl_socket_free(lp->mon);
		kube_client_config_done(&lp->kcfg);
		free(lp);
	}
	ag->loop_priv = NULL;
	if (ag->loop)
		sd_event_unref(ag->loop);
	ag->loop = NULL;
}

static int kube_setup(struct agent *ag, struct error *err)
{
	struct loop_priv *lp = priv(ag);
	int r;

	if (ag->opt.kubeconfig)
		r = kube_config_load_file(ag->opt.kubeconfig, NULL, &lp->kcfg, err);
	else
		r = kube_config_load_in_cluster(NULL, NULL, NULL, &lp->kcfg, err);
	if (r < 0) {
		error_prefix(err, "%s", ag->opt.kubeconfig ? "kubeconfig" : "in-cluster config (or pass --kubeconfig)");
		return r;
	}
	if (lp->kcfg.insecure_skip_tls_verify)
		return error_set(err, EPERM, "%s: insecure-skip-tls-verify is refused (TLS is always verified)",
		                 ag->opt.kubeconfig ? ag->opt.kubeconfig : "in-cluster config");
	r = kube_client_new(ag->loop, &lp->kcfg, ag->node_name, &kube_ops, ag, &ag->kube, err);
	if (r < 0)
		error_prefix(err, "API client");
	return r;
}

int agent_run(struct agent *ag)
{
	struct loop_priv *lp;
	struct error e = {0};
	sigset_t mask;
	int r;

	lp = calloc(1, sizeof(*lp));
	if (!lp)
		return -ENOMEM;
	lp->config_due_ms = -1;
	lp->reach_due_ms = -1;
	lp->cni_due_ms = -1;
	ag->loop_priv = lp;
	ag->event_hook = hook_event;
	ag->notify_hook = hook_notify;

	r = sd_event_new(&ag->loop);
	if (r < 0) {
		error_set(&e, -r, "create the event loop: %s", strerror(-r));
		goto fail;
	}
	sd_event_set_watchdog(ag->loop, true); /* WATCHDOG=1 when WATCHDOG_USEC is set */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	if ((r = sd_event_add_signal(ag->loop, &lp->sig_term, SIGTERM, on_stop, ag)) < 0 ||
	    (r = sd_event_add_signal(ag->loop, &lp->sig_int, SIGINT, on_stop, ag)) < 0 ||
	    (r = sd_event_add_signal(ag->loop, &lp->sig_hup, SIGHUP, on_hup, ag)) < 0) {
		error_set(&e, -r, "signals: %s", strerror(-r));
		goto fail;
	}
	if ((r = sd_event_add_time(ag->loop, &lp->timer, CLOCK_MONOTONIC, UINT64_MAX, 1000, on_timer, ag)) < 0 ||
	    (r = sd_event_add_post(ag->loop, &lp->post, on_post, ag)) < 0) {
		error_set(&e, -r, "timers: %s", strerror(-r));
		goto fail;
	}
	sd_event_source_set_enabled(lp->timer, SD_EVENT_OFF);

	r = nl_open(&ag->sk, &e);
	if (r < 0)
		goto fail;
	r = watches_add(ag, &e);
	if (r < 0)
		goto fail;
	r = rtnl_monitor_open(ag, &e);
	if (r < 0)
		goto fail;
	agent_attach_rescan(ag);

	r = agent_server_new(ag->loop, ag->opt.socket_path, &server_ops, ag, &ag->server, &e);
	if (r < 0)
		goto fail;
	r = metrics_server_new(ag->loop, ag->opt.metrics_addr, &metrics_ops, ag, &ag->metrics, &e);
	if (r < 0)
		goto fail;
	r = kube_setup(ag, &e);
	if (r < 0)
		goto fail;
	if (ag->opt.cni_conf_dir)
		cni_chain(ag);
	r = kube_client_start(ag->kube);
	if (r < 0) {
		error_set(&e, -r, "start the API client: %s", strerror(-r));
		goto fail;
	}
	{
		char port[16] = "";

		if (ag->metrics)
			snprintf(port, sizeof(port), "%u", (unsigned)metrics_server_port(ag->metrics));
		log_msg(LOG_LVL_INFO, "started", "version", aiqos_version(), "node", ag->node_name, "socket",
		        ag->opt.socket_path, "state_dir", ag->state_dir, "config", ag->config_path, "metrics",
		        ag->opt.metrics_addr ? ag->opt.metrics_addr : "", "metrics_port", port, (char *)NULL);
	}
	sched_kick(&ag->sched, agent_now_ms());
	loop_rearm(ag);
	r = sd_event_loop(ag->loop);
	loop_free(ag);
	if (r < 0) {
		log_msg(LOG_LVL_ERROR, "event loop failed", "error", strerror(-r), (char *)NULL);
		return r;
	}
	return 0;
fail:
	log_msg(LOG_LVL_ERROR, "cannot start", "error", e.msg, (char *)NULL);
	loop_free(ag);
	return r < 0 ? r : -EIO;
}
