/* attach.c — the plumbing every verb shares: find the pod interface and its
 * host-side veth (one rtnetlink socket per netns, single link lookups, no
 * dumps), rebuild an attachment's plan from its state with the one planner,
 * undo it, and summarise it for the log. */
#include <stdarg.h>

#include "cni.h"
#include "netns.h"

void cni_attach_init(struct cni_attach *a)
{
	memset(a, 0, sizeof(*a));
	a->pod_nsfd = -1;
	a->target.pod_nsfd = -1;
}

void cni_attach_close(struct cni_attach *a)
{
	if (a->pod_sk)
		nl_close(a->pod_sk);
	if (a->host_sk)
		nl_close(a->host_sk);
	if (a->pod_nsfd >= 0)
		close(a->pod_nsfd);
	cni_attach_init(a);
}

static void target_fill(struct cni_attach *a)
{
	a->target = (struct apply_target){
	        .pod_nsfd = a->pod_nsfd,
	        .pod_sk = a->pod_sk,
	        .pod_ifindex = a->pod.ifindex,
	        .host_sk = a->host.ifindex ? a->host_sk : NULL,
	        .host_ifindex = a->host.ifindex,
	        .uplink_ifindex = 0,
	};
}

/* A host link is the pod's peer when it is a veth whose own peer is the
 * pod interface (the peer index is not always reported; then trust the kind). */
static bool host_link_is_peer(const struct link_info *h, const struct link_info *pod)
{
	return streq(h->kind, "veth") && (h->peer_ifindex == 0 || h->peer_ifindex == pod->ifindex);
}

/* Find the host side of a veth pod interface. Not finding it is not an
 * error: host-side items are then not planned (a->note says why). */
static int host_find(struct cni_attach *a, const struct cni_prev_result *prev, struct error *err)
{
	struct link_info by_index = {0};
	unsigned n_prev_host = prev ? cni_prev_count_host_ifaces(prev) : 0;
	bool index_ok = false;
	int r;

	r = nl_open(&a->host_sk, err);
	if (r < 0) {
		error_prefix(err, "open rtnetlink in the host netns");
		return r;
	}
	r = nl_link_get(a->host_sk, NULL, a->pod.peer_ifindex, &by_index, NULL);
	if (r == 0 && host_link_is_peer(&by_index, &a->pod))
		index_ok = true;
	else if (r < 0 && r != -ENODEV) {
		error_set(err, CNI_ERR_NONE, -r, "look up host-side veth ifindex %d: %s", a->pod.peer_ifindex,
		          strerror(-r));
		return r;
	}

	/* The usual case: the kernel's peer agrees with prevResult (or
	 * prevResult does not name host interfaces). */
	if (index_ok && (n_prev_host == 0 || cni_prev_has_host_iface(prev, by_index.ifname))) {
		a->host = by_index;
		snprintf(a->note, sizeof(a->note), "host veth %s (ifindex %d)", a->host.ifname, a->host.ifindex);
		return 0;
	}
	/* The peer index may belong to another netns than ours: try the names
	 * prevResult gives for host-side interfaces (bridge, ptp: the veth). */
	for (unsigned i = 0; prev && i < prev->n_ifaces; i++) {
		struct link_info li = {0};
		if (prev->ifaces[i].sandbox[0])
			continue;
		if (nl_link_get(a->host_sk, prev->ifaces[i].name, 0, &li, NULL) == 0 &&
		    host_link_is_peer(&li, &a->pod)) {
			a->host = li;
			snprintf(a->note, sizeof(a->note), "host veth %s (ifindex %d) from prevResult%s", li.ifname,
			         li.ifindex, index_ok ? "" : "; the peer index did not match");
			return 0;
		}
	}
	if (index_ok) {
		a->host = by_index;
		snprintf(a->note, sizeof(a->note), "host veth %s (ifindex %d), not named in prevResult", a->host.ifname,
		         a->host.ifindex);
		return 0;
	}
	snprintf(a->note, sizeof(a->note), "no host-side veth found for peer ifindex %d: host-side shaping skipped",
	         a->pod.peer_ifindex);
	return 0;
}

int cni_attach_discover(struct cni_attach *a, const char *netns, const char *ifname, const struct cni_prev_result *prev,
                        struct error *err)
{
	int r;

	/* A netns that is gone or is not a netns is a broken precondition
	 * (CNI_NETNS), not a tuning failure: callers refuse ADD whatever the
	 * failure policy (code 4; nothing was changed). */
	r = netns_open(netns, &a->pod_nsfd, err); /* err names the path */
	if (r < 0) {
		error_prefix(err, "CNI_NETNS");
		if (err)
			err->code = CNI_ERR_ENV;
		return r;
	}
	r = nl_open_in_netns(a->pod_nsfd, &a->pod_sk, err);
	if (r < 0) {
		error_prefix(err, "CNI_NETNS '%s' is not a usable network namespace: open rtnetlink", netns);
		if (err && r == -EINVAL)
			err->code = CNI_ERR_ENV;
		return r;
	}
	r = nl_link_get(a->pod_sk, ifname, 0, &a->pod, err); /* err names the interface */
	if (r < 0) {
		error_prefix(err, "pod interface in netns %s", netns);
		return r;
	}
	str_copy(a->ifs.pod_ifname, sizeof(a->ifs.pod_ifname), a->pod.ifname);
	a->ifs.mtu = a->pod.mtu;

	/* Only a veth whose peer lives in another netns has a host side;
	 * macvlan/ipvlan/host-device have none. */
	if (streq(a->pod.kind, "veth") && a->pod.peer_ifindex > 0 && a->pod.link_netnsid >= 0) {
		r = host_find(a, prev, err);
		if (r < 0)
			return r;
	} else {
		snprintf(a->note, sizeof(a->note), "pod interface is %s%s: no host side",
		         a->pod.kind[0] ? "a " : "not a veth", a->pod.kind);
	}
	if (a->host.ifindex)
		str_copy(a->ifs.host_ifname, sizeof(a->ifs.host_ifname), a->host.ifname);
	target_fill(a);
	return 0;
}

int cni_attach_open_host(struct cni_attach *a, const struct attach_state *s, struct error *err)
{
	struct link_info li = {0};
	int r;

	if (!s->ifs.host_ifname[0] || s->host_ifindex <= 0)
		return 0;
	if (!a->host_sk) {
		r = nl_open(&a->host_sk, err);
		if (r < 0) {
			error_prefix(err, "open rtnetlink in the host netns");
			return r;
		}
	}
	r = nl_link_get(a->host_sk, s->ifs.host_ifname, 0, &li, err);
	if (r == -ENODEV)
		return 0; /* gone with the pod netns */
	if (r < 0) {
		error_prefix(err, "look up host veth %s", s->ifs.host_ifname);
		return r;
	}
	if (li.ifindex != s->host_ifindex || !streq(li.kind, "veth"))
		return 0; /* the name was reused by another device: not ours */
	a->host = li;
	str_copy(a->ifs.host_ifname, sizeof(a->ifs.host_ifname), li.ifname);
	target_fill(a);
	return 1;
}

int cni_attach_open_pod(struct cni_attach *a, const char *netns, const struct attach_state *s, struct error *err)
{
	struct link_info li = {0};
	int r;

	if (!netns || !netns[0])
		return 0;
	r = netns_open(netns, &a->pod_nsfd, err);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	r = nl_open_in_netns(a->pod_nsfd, &a->pod_sk, err);
	if (r < 0) {
		error_prefix(err, "open rtnetlink in netns %s", netns);
		return r;
	}
	r = nl_link_get(a->pod_sk, s->ifname, 0, &li, err);
	if (r == -ENODEV)
		return 0;
	if (r < 0) {
		error_prefix(err, "pod interface %s in netns %s", s->ifname, netns);
		return r;
	}
	if (s->pod_ifindex > 0 && li.ifindex != s->pod_ifindex)
		return 0;
	a->pod = li;
	str_copy(a->ifs.pod_ifname, sizeof(a->ifs.pod_ifname), li.ifname);
	target_fill(a);
	return 1;
}

const struct profile *cni_profile_for_state(const struct cni_conf *c, const struct attach_state *s, bool *ret_changed)
{
	const struct profile *p = s->profile[0] ? profile_find(&c->profiles, s->profile) : NULL;

	if (ret_changed)
		*ret_changed = false;
	if (p && p->class == s->workload.class)
		return p;
	if (ret_changed)
		*ret_changed = true;
	return profile_resolve(&c->profiles, &s->workload, NULL, 0);
}

int cni_plan_restore(const struct cni_conf *c, struct attach_state *s, const cJSON *choices, bool *ret_profile_changed,
                     struct error *err)
{
	const struct profile *p = cni_profile_for_state(c, s, ret_profile_changed);
	struct plan_caps caps = {0};
	int r;

	r = plan_pod(&s->workload, p, &s->ifs, &caps, &s->plan);
	if (r < 0)
		return error_set(err, CNI_ERR_STATE, -r, "re-plan container %s ifname %s: %s", s->container_id,
		                 s->ifname, strerror(-r));
	if (choices) {
		r = plan_choices_from_json(&s->plan, choices, err);
		if (r < 0) {
			if (err && !err->code)
				err->code = CNI_ERR_STATE;
			error_prefix(err, "state of container %s ifname %s", s->container_id, s->ifname);
			return r;
		}
	}
	return 0;
}

int cni_plan_remove(const struct plan *p, const struct cni_attach *a, struct error *err)
{
	struct error e = {0};
	int first = 0, r;

	if (a->target.host_sk && a->target.host_ifindex > 0) {
		r = apply_remove(p, DEV_HOST, &a->target, &e);
		if (r < 0 && !first) {
			first = r;
			if (err)
				*err = e;
		}
	}
	if (a->target.pod_sk && a->target.pod_ifindex > 0) {
		error_clear(&e);
		r = apply_remove(p, DEV_POD, &a->target, &e);
		if (r < 0 && !first) {
			first = r;
			if (err)
				*err = e;
		}
	}
	return first;
}

/* Append "sep text" to buf, marking truncation with "...". */
static void list_append(char *buf, size_t size, const char *fmt, ...) _printf_(3, 4);
static void list_append(char *buf, size_t size, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;
	int w;

	if (n + 1 >= size)
		return;
	if (n > 0) {
		buf[n++] = ',';
		buf[n] = '\0';
	}
	va_start(ap, fmt);
	w = vsnprintf(buf + n, size - n, fmt, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= size - n) {
		if (size >= 4)
			memcpy(buf + size - 4, "...", 4);
	}
}

static const char *item_effective_name(const struct plan_item *it, int alt)
{
	if (alt < 0 || (unsigned)alt >= it->n_alt || alt >= PLAN_ALT_MAX)
		return "none";
	if (it->type == ITEM_TC) {
		const struct tc_kind *k = tc_kind_get(it->tc[alt].kind);
		return k && k->name ? k->name : "?";
	}
	return it->val[alt];
}

void cni_plan_summary(const struct plan *p, char *effective, size_t eff_size, char *degraded, size_t deg_size)
{
	if (eff_size)
		effective[0] = '\0';
	if (deg_size)
		degraded[0] = '\0';
	for (unsigned i = 0; i < p->n && i < PLAN_ITEMS_MAX; i++) {
		const struct plan_item *it = &p->items[i];

		switch (it->status) {
		case ITEM_APPLIED:
			list_append(effective, eff_size, "%s=%s", it->id, item_effective_name(it, it->chosen));
			break;
		case ITEM_DEGRADED:
			list_append(effective, eff_size, "%s=%s", it->id, item_effective_name(it, it->chosen));
			list_append(degraded, deg_size, "%s=%s(wanted %s: %s)", it->id,
			            item_effective_name(it, it->chosen), item_effective_name(it, 0),
			            it->err ? strerror(it->err) : "refused");
			break;
		case ITEM_SKIPPED:
			list_append(degraded, deg_size, "%s=skipped(%s)", it->id,
			            it->err ? strerror(it->err) : "not applicable");
			break;
		default:
			break;
		}
	}
}

const char *cni_pod_display(const struct cni_args *a, char *buf, size_t size)
{
	if (!a->pod_namespace[0] && !a->pod_name[0])
		snprintf(buf, size, "%s", "");
	else
		snprintf(buf, size, "%s/%s", a->pod_namespace, a->pod_name);
	return buf;
}

void cni_details_append(char *buf, size_t size, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;
	int w;

	if (n + 1 >= size)
		return;
	if (n > 0) {
		buf[n++] = '\n';
		buf[n] = '\0';
	}
	va_start(ap, fmt);
	w = vsnprintf(buf + n, size - n, fmt, ap);
	va_end(ap);
	if ((w < 0 || (size_t)w >= size - n) && size >= 4)
		memcpy(buf + size - 4, "...", 4);
}
