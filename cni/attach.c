/* attach.c — the plugin's side of the attachment plumbing: find the pod
 * interface and its host-side veth at ADD/CHECK (cross-checked with
 * prevResult; one rtnetlink socket per netns, single link lookups, no dumps).
 * Reopening a recorded attachment, its plan and summary live in
 * shared/attach.c (the agent uses them too). */
#include <stdarg.h>

#include "cni.h"
#include "netns.h"

/* Find the host side of a veth pod interface. Not finding it is not an
 * error: host-side items are then not planned (a->note says why). */
static int host_find(struct attach *a, const struct cni_prev_result *prev, struct error *err)
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
	if (r == 0 && attach_host_link_is_peer(&by_index, &a->pod))
		index_ok = true;
	else if (r < 0 && r != -ENODEV) {
		error_set(err, -r, "look up host-side veth ifindex %d: %s", a->pod.peer_ifindex, strerror(-r));
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
		    attach_host_link_is_peer(&li, &a->pod)) {
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

int cni_attach_discover(struct attach *a, const char *netns, const char *ifname, const struct cni_prev_result *prev,
                        struct error *err)
{
	int r;

	/* A netns that is gone or is not a netns is a broken precondition
	 * (CNI_NETNS), not a tuning failure: callers refuse ADD whatever the
	 * failure policy (code 4; nothing was changed). */
	r = netns_open(netns, &a->pod_nsfd, err); /* err names the path */
	if (r < 0) {
		error_prefix(err, "CNI_NETNS");
		return cni_error_code(err, CNI_ERR_ENV, r);
	}
	r = nl_open_in_netns(a->pod_nsfd, &a->pod_sk, err);
	if (r < 0) {
		error_prefix(err, "CNI_NETNS '%s' is not a usable network namespace: open rtnetlink", netns);
		return r == -EINVAL ? cni_error_code(err, CNI_ERR_ENV, r) : r;
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
	attach_target_fill(a);
	return 0;
}

const char *cni_pod_display(const struct cni_args *a, char *buf, size_t size)
{
	if (!a->pod_namespace[0] && !a->pod_name[0])
		snprintf(buf, size, "%s", "");
	else
		snprintf(buf, size, "%s/%s", a->pod_namespace, a->pod_name);
	return buf;
}
