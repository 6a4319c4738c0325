/* doctor.c — node preflight (see doctor.h). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <ctype.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json.h"
#include "agent.h"
#include "apply.h"
#include "bpf_load.h"
#include "install/chain.h"
#include "doctor.h"
#include "nl.h"
#include "reason.h"
#include "workload.h"

/* A finding: its stable id ("kernel.missing.sch_fq_codel", "cni.bandwidth"),
 * for scripts and docs/operations/troubleshooting.md to name it by. */
_printf_(5, 6) static void add(struct doctor_report *r, enum doctor_level l, const char *section, const char *id,
                               const char *fmt, ...)
{
	struct doctor_finding *f;
	va_list ap;

	if (r->n >= DOCTOR_FINDINGS_MAX)
		return;
	f = &r->f[r->n++];
	memset(f, 0, sizeof(*f));
	f->level = l;
	str_copy(f->section, sizeof(f->section), section);
	str_copy(f->id, sizeof(f->id), id);
	va_start(ap, fmt);
	vsnprintf(f->text, sizeof(f->text), fmt, ap);
	va_end(ap);
}

/* The way out of the last finding. */
_printf_(2, 3) static void fix(struct doctor_report *r, const char *fmt, ...)
{
	va_list ap;

	if (!r->n)
		return;
	va_start(ap, fmt);
	vsnprintf(r->f[r->n - 1].fix, sizeof(r->f[r->n - 1].fix), fmt, ap);
	va_end(ap);
}

const char *doctor_level_name(enum doctor_level l)
{
	static const char *const names[_DOCTOR_LEVEL_MAX] = {"ok", "info", "warn", "error"};
	return (unsigned)l < _DOCTOR_LEVEL_MAX ? names[l] : "?";
}

int doctor_exit_code(const struct doctor_report *r)
{
	int code = DOCTOR_EXIT_OK;

	for (unsigned i = 0; i < r->n; i++) {
		if (r->f[i].level == DOCTOR_ERROR)
			return DOCTOR_EXIT_ERRORS;
		if (r->f[i].level == DOCTOR_WARN)
			code = DOCTOR_EXIT_WARNINGS;
	}
	return code;
}

/* ---- the kernel features found missing, each listed once ---- */

/* "CONFIG_NET_SCH_FQ_CODEL" -> "sch_fq_codel", CONFIG_NET_ACT_PEDIT ->
 * act_pedit, CONFIG_NET_CLS_U32 -> cls_u32, CONFIG_TCP_CONG_BBR -> tcp_bbr;
 * false for options that are no module (CONFIG_NET_SCHED). */
static bool config_module(const char *opt, size_t len, char *buf, size_t size)
{
	static const struct {
		const char *prefix, *module;
	} map[] = {{"CONFIG_NET_SCH_", "sch_"},
	           {"CONFIG_NET_ACT_", "act_"},
	           {"CONFIG_NET_CLS_", "cls_"},
	           {"CONFIG_TCP_CONG_", "tcp_"}};

	for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
		size_t n = strlen(map[i].prefix);

		if (len > n && strncmp(opt, map[i].prefix, n) == 0 && len - n + strlen(map[i].module) < size) {
			size_t k = strlen(map[i].module);

			memcpy(buf, map[i].module, k);
			for (size_t j = n; j < len; j++)
				buf[k++] = (char)tolower((unsigned char)opt[j]);
			buf[k] = '\0';
			return true;
		}
	}
	return false;
}

/* The missing feature's finding in the kernel section, added once: id
 * kernel.missing.<first module, else the feature's first word>, the fix
 * `modprobe ...` with the CONFIG_ options to build in. */
static void missing_feature(struct doctor_report *r, const char *feature)
{
	char id[sizeof(((struct doctor_finding *)0)->id)] = "kernel.missing.", mods[128] = "", opts[160] = "";

	for (const char *p = feature; (p = strstr(p, "CONFIG_"));) {
		size_t len = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
		char mod[48];

		str_append_sep(opts, sizeof(opts), ' ', "%.*s=m", (int)len, p);
		if (config_module(p, len, mod, sizeof(mod)))
			str_append_sep(mods, sizeof(mods), ' ', "%s", mod);
		p += len;
	}
	if (mods[0]) {
		snprintf(id, sizeof(id), "kernel.missing.%.*s", (int)strcspn(mods, " "), mods);
	} else {
		size_t n = strlen(id);

		/* "sysctl net.ipv4.tcp_ecn_fallback" -> "sysctl_net.ipv4.tcp_ecn_fallback" */
		for (const char *p = feature; *p && *p != '(' && n + 1 < sizeof(id); p++)
			id[n++] = isalnum((unsigned char)*p) || *p == '.' ? (char)tolower((unsigned char)*p) : '_';
		while (n > 0 && id[n - 1] == '_')
			n--;
		id[n] = '\0';
	}
	for (unsigned i = 0; i < r->n; i++)
		if (streq(r->f[i].id, id))
			return;
	add(r, DOCTOR_WARN, "kernel", id, "missing: %s", feature);
	if (mods[0])
		fix(r,
		    "modprobe %s (and list it in /etc/modules-load.d/ so it loads at boot); if modprobe finds no "
		    "module, the kernel needs %s. aiqos retries a feature it found missing after 10 minutes (delete "
		    "<stateDir>/kernel-caps to retry now).",
		    mods, opts);
	else if (opts[0])
		fix(r, "a kernel built with %s", opts);
	else
		fix(r, "a newer kernel (the feature is not a module)");
}

/* ---- kernel: each profile's plan on a scratch netns's loopback ---- */

struct probe_case {
	char name[PROFILE_NAME_MAX + 32];
	struct workload w;
	const struct profile *p;
};

static const char *alt_name(const struct plan_item *it, int i)
{
	if (i < 0 || (unsigned)i >= it->n_alt)
		return "-";
	if (it->type == ITEM_TC) {
		const struct tc_kind *k = tc_kind_get(it->tc[i].kind);
		return k && k->name ? k->name : "?";
	}
	return it->val[i];
}

/* In a child: a new netns, back to the host's for the applier's own netns
 * steps, the plan applied to the new netns's lo (ifindex 1); the plan's
 * items go back through the pipe (into the parent's copy of the same plan). Exit status 0 or the errno that stopped it.
 */
static _Noreturn void probe_child(struct plan *plan, int wfd)
{
	struct error e = {0};
	struct apply_target t = {.pod_nsfd = -1};
	struct plan_caps caps = {0};
	int host = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), pod, r;
	const char *p;
	size_t left;

	if (host < 0 || unshare(CLONE_NEWNET) < 0)
		_exit(errno ? errno : EIO);
	pod = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (pod < 0 || setns(host, CLONE_NEWNET) < 0)
		_exit(errno ? errno : EIO);
	if (nl_open_in_netns(pod, &t.pod_sk, &e) < 0 || nl_open(&t.host_sk, &e) < 0)
		_exit(EIO);
	t.pod_nsfd = pod;
	t.pod_ifindex = 1; /* lo, in every new netns */
	r = apply_plan(plan, NULL, &t, &caps, &e);
	if (r < 0)
		_exit(-r > 0 && -r < 255 ? -r : EIO);
	for (p = (const char *)plan->items, left = plan->n * sizeof(*plan->items); left;) {
		ssize_t n = write(wfd, p, left);
		if (n <= 0)
			_exit(EPIPE);
		p += n;
		left -= (size_t)n;
	}
	_exit(0);
}

static int probe_plan(struct plan *plan)
{
	size_t got = 0, want = plan->n * sizeof(*plan->items);
	int fds[2], st = 0;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		int r = -errno;
		close(fds[0]);
		close(fds[1]);
		return r;
	}
	if (pid == 0) {
		close(fds[0]);
		probe_child(plan, fds[1]);
	}
	close(fds[1]);
	while (got < want) {
		ssize_t n = read(fds[0], (char *)plan->items + got, want - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fds[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st))
		return -EINTR;
	if (WEXITSTATUS(st))
		return -WEXITSTATUS(st);
	return got == want ? 0 : -EIO;
}

static void probe_one(struct doctor_report *r, const struct probe_case *c, bool *stop)
{
	struct attach_ifaces ifs = {.pod_ifname = "lo", .mtu = 1500};
	struct plan_caps none = {0};
	char section[sizeof(((struct doctor_finding *)0)->section) + sizeof(c->name)], applied[DOCTOR_TEXT_MAX] = "",
	                                                                               fallbacks[DOCTOR_TEXT_MAX] = "";
	_cleanup_plan_ struct plan probe = {0};
	struct plan *plan = &probe;
	int q;

	snprintf(section, sizeof(section), "profile %s", c->name);
	q = plan_pod(&c->w, c->p, &ifs, &none, plan);
	if (q >= 0)
		q = probe_plan(plan);
	if (q < 0) {
		if (q == -EPERM) {
			add(r, DOCTOR_WARN, "kernel", "kernel.not-probed",
			    "not probed: creating a scratch network namespace needs CAP_SYS_ADMIN (%s)", strerror(-q));
			fix(r, "run as root, or in the agent container: kubectl aiqos doctor");
			*stop = true;
		} else {
			add(r, DOCTOR_ERROR, section, "profile.probe-failed", "probe failed: %s", strerror(-q));
			fix(r, "a bug report with this output and `uname -a`");
		}
		return;
	}
	for (unsigned i = 0; i < plan->n; i++) {
		const struct plan_item *it = &plan->items[i];
		char why[REASON_MAX], id[sizeof(((struct doctor_finding *)0)->id)];
		const char *w;

		switch (it->status) {
		case ITEM_APPLIED:
			str_append_sep(applied, sizeof(applied), ',', " %s=%s", it->id, alt_name(it, it->chosen));
			continue;
		case ITEM_DEGRADED:
		case ITEM_SKIPPED:
			break;
		default:
			continue;
		}
		w = reason_item(it, why, sizeof(why));
		str_append_sep(fallbacks, sizeof(fallbacks), ',', " %s=%s (not %s)", it->id,
		               it->status == ITEM_DEGRADED ? alt_name(it, it->chosen) : "nothing", alt_name(it, 0));
		if (strncmp(w, "kernel lacks ", strlen("kernel lacks ")) == 0) {
			missing_feature(r, w + strlen("kernel lacks "));
			continue;
		}
		if (strncmp(w, "kernel has no ", strlen("kernel has no ")) == 0) {
			missing_feature(r, w + strlen("kernel has no "));
			continue;
		}
		if (!it->err || strstr(w, " left out: ")) {
			/* the planner's or the applier's choice, following from another
			 * fallback (bbr left out without fq: reason.h) */
			snprintf(id, sizeof(id), "profile.%s.follows", it->id);
			add(r, DOCTOR_INFO, section, id, "%s: %s", it->id, w);
			continue;
		}
		/* a refusal that is not a missing feature: the kernel's answer */
		snprintf(id, sizeof(id), "profile.%s.refused", it->id);
		add(r, DOCTOR_WARN, section, id, "%s: %s", it->id, w);
		fix(r, "a bug report with this output and `uname -a` (the kernel has the feature but refused it)");
	}
	add(r, fallbacks[0] ? DOCTOR_INFO : DOCTOR_OK, section, fallbacks[0] ? "profile.fallbacks" : "profile.ok",
	    "applies:%s%s%s", applied[0] ? applied : " nothing (class left untouched)",
	    fallbacks[0] ? "; falls back (kernel section):" : "", fallbacks);
}

/* The findings from first on: the "kernel" section's first (the missing
 * features were added as the profiles found them), each part in order. */
static void kernel_first(struct doctor_report *r, unsigned first)
{
	_cleanup_free_ struct doctor_finding *tmp = calloc(r->n - first + 1, sizeof(*tmp));
	unsigned n = 0;

	if (!tmp)
		return; /* the same findings, in the order found */
	for (int pass = 0; pass < 2; pass++)
		for (unsigned i = first; i < r->n; i++)
			if (streq(r->f[i].section, "kernel") == (pass == 0))
				tmp[n++] = r->f[i];
	memcpy(&r->f[first], tmp, n * sizeof(*tmp));
}

static void check_kernel(const struct doctor_options *o, struct doctor_report *r)
{
	unsigned first = r->n;
	static const struct {
		enum workload_class cls;
		uint64_t egress_bps;
		const char *label;
	} limited[] = {{CLASS_INFERENCE, 100000000ULL, "inference with kubernetes.io/egress-bandwidth 100M"},
	               {CLASS_TRAINING, 1000000000ULL, "training with kubernetes.io/egress-bandwidth 1G"}};
	struct profile_set builtin;
	const struct profile_set *set = o->profiles;
	struct utsname u;
	bool stop = false;

	if (uname(&u) == 0)
		add(r, DOCTOR_INFO, "kernel", "kernel.version", "Linux %s (%s); %s", u.release, u.machine,
		    o->probe_kernel ? "each profile's plan applied by the real applier to the loopback device of a "
		                      "scratch network namespace"
		                    : "not probed (--no-kernel-probe)");
	if (!o->probe_kernel)
		return;
	if (!set) {
		profile_set_builtin(&builtin);
		set = &builtin;
	}
	for (unsigned i = 0; i < set->n && !stop; i++) {
		struct probe_case c = {.p = &set->p[i]};

		if (c.p->class == CLASS_DEFAULT)
			continue; /* untouched unless limited */
		str_copy(c.name, sizeof(c.name), c.p->name);
		c.w.class = c.p->class;
		str_copy(c.w.profile, sizeof(c.w.profile), c.p->name);
		probe_one(r, &c, &stop);
	}
	for (unsigned i = 0; i < ARRAY_SIZE(limited) && !stop; i++) {
		struct probe_case c = {0};

		c.w.class = limited[i].cls;
		c.w.egress_bps = limited[i].egress_bps;
		c.p = profile_resolve(set, &c.w, NULL, 0);
		str_copy(c.name, sizeof(c.name), limited[i].label);
		probe_one(r, &c, &stop);
	}
	kernel_first(r, first);
}

/* ---- CNI: primary, chain, coexisting shapers ---- */

static bool has_type(const char *types, const char *t)
{
	size_t n = strlen(t);
	for (const char *p = types; (p = strstr(p, t)); p += n)
		if ((p == types || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

const char *doctor_cni_name(const char *types)
{
	static const struct {
		const char *type, *name;
	} known[] = {{"cilium-cni", "Cilium"},
	             {"calico", "Calico"},
	             {"multus", "Multus"},
	             {"multus-shim", "Multus"},
	             {"flannel", "Flannel"},
	             {"aws-cni", "AWS VPC CNI"},
	             {"weave-net", "Weave"},
	             {"antrea", "Antrea"},
	             {"kube-ovn", "Kube-OVN"},
	             {"ovn-k8s-cni-overlay", "OVN-Kubernetes"},
	             {"ptp", "ptp (kindnet or plain CNI plugins)"},
	             {"bridge", "bridge (plain CNI plugins)"}};
	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		if (has_type(types, known[i].type))
			return known[i].name;
	return "unknown";
}

static void check_cni(const struct doctor_options *o, struct doctor_report *r, char *primary_types, size_t size)
{
	struct chain_view v;
	struct error e = {0};
	const char *name;

	primary_types[0] = '\0';
	if (chain_inspect(o->cni_conf_dir, &v, &e) < 0) {
		add(r, DOCTOR_ERROR, "cni", "cni.unreadable", "cannot read %s: %s", o->cni_conf_dir, e.msg);
		return;
	}
	if (!v.primary[0]) {
		add(r, DOCTOR_WARN, "cni", "cni.no-primary", "no primary network config in %s%s: nothing to chain yet",
		    o->cni_conf_dir, v.dir_missing ? " (no such dir)" : "");
		fix(r, "install the cluster's CNI first; aiqos chains as soon as its file appears");
		return;
	}
	if (v.primary_load_r < 0) {
		add(r, DOCTOR_ERROR, "cni", "cni.primary-broken", "primary %s cannot be used: %s", v.primary,
		    v.primary_load_msg);
		fix(r, "fix or remove the file: the runtime reads it too, and aiqos writes nothing while it is broken");
		return;
	}
	str_copy(primary_types, size, v.primary_types);
	name = doctor_cni_name(v.primary_types);
	add(r, DOCTOR_OK, "cni", "cni.primary", "primary %s/%s: %s, chain %s", o->cni_conf_dir, v.primary, name,
	    v.primary_types[0] ? v.primary_types : "(no plugins)");
	if (has_type(v.loaded_types, "aiqos"))
		add(r, DOCTOR_OK, "cni", "cni.chained", "aiqos chained in %s, the file the runtime loads (chain %s)",
		    v.loaded, v.loaded_types);
	else
		add(r, DOCTOR_INFO, "cni", "cni.not-chained",
		    "aiqos not chained yet (the runtime loads %s); aiqos-agent install chains it", v.loaded);
	if (has_type(v.primary_types, "bandwidth")) {
		add(r, DOCTOR_WARN, "cni", "cni.bandwidth-plugin",
		    "the chain already has the bandwidth plugin%s: it shapes kubernetes.io/ingress-bandwidth and "
		    "egress-bandwidth with a tbf (and an IFB) before aiqos runs, a second shaper with a deep queue "
		    "under aiqos's HTB and AQM",
		    streq(name, "Calico") ? " (Calico's default chain includes it)" : "");
		fix(r, "remove the bandwidth entry from the primary's plugins (Calico: the CNI config template of the "
		       "operator/calico-config) or leave those annotations off the pods aiqos tunes; "
		       "docs/operations/coexistence.md");
	}
	if (streq(name, "Multus"))
		add(r, DOCTOR_INFO, "cni", "cni.multus",
		    "Multus: aiqos runs after Multus and tunes the interface Multus returns (the cluster network's "
		    "eth0); secondary networks are tuned only if their own configs chain aiqos "
		    "(docs/operations/coexistence.md)");
	if (strstr(v.primary, "aiqos"))
		add(r, DOCTOR_WARN, "cni", "cni.primary-named-aiqos",
		    "the primary's name contains \"aiqos\" (%s): is it a leftover copy?", v.primary);
}

/* ---- uplink: foreign trees and Cilium's bandwidth manager ---- */

static void check_uplink(const struct doctor_options *o, struct doctor_report *r, const char *primary_types)
{
	_cleanup_nl_ struct nl_sock *sk = NULL;
	struct error e = {0};
	struct uplink u;
	struct tc_qdisc_raw root;
	struct uplink_record captured;
	char rec[PATH_MAX] = "";
	bool ours = false, cilium = has_type(primary_types, "cilium-cni");
	int q;

	if (nl_open(&sk, &e) < 0) {
		add(r, DOCTOR_ERROR, "uplink", "uplink.rtnetlink", "rtnetlink: %s", e.msg);
		return;
	}
	if (uplink_discover(sk, o->uplink, &u, &e) < 0) {
		add(r, DOCTOR_WARN, "uplink", "uplink.not-found", "%s", e.msg);
		fix(r, "set \"uplink\" in the agent config to the device that carries pod traffic");
		return;
	}
	if (o->state_dir && uplink_record_path(o->state_dir, rec, sizeof(rec)) >= 0 && access(rec, F_OK) == 0)
		ours = true;
	q = nl_qdisc_root_get(sk, u.ifindex, &root, &e);
	if (q < 0) {
		add(r, DOCTOR_WARN, "uplink", "uplink.root-unreadable", "%s: cannot read the root qdisc: %s", u.ifname,
		    e.msg);
		return;
	}
	if (cilium && (streq(root.kind, "mq") || streq(root.kind, "fq")) && root.handle != 0) {
		add(r, DOCTOR_ERROR, "uplink", "uplink.cilium-bandwidth-manager",
		    "%s: root qdisc %s set by Cilium's bandwidth manager, which owns the uplink's queues and the "
		    "kubernetes.io/egress-bandwidth annotation: aiqos would replace its tree and both would fight",
		    u.ifname, root.kind);
		fix(r, "disable it (helm upgrade cilium --set bandwidthManager.enabled=false, then restart the Cilium "
		       "agents) or do not run aiqos on these nodes (the chart's nodeSelector); "
		       "docs/operations/coexistence.md");
		return;
	}
	if (cilium)
		add(r, DOCTOR_INFO, "uplink", "uplink.cilium",
		    "Cilium: keep its bandwidth manager off (kubectl -n kube-system exec ds/cilium -- cilium-dbg "
		    "status "
		    "| grep BandwidthManager: Disabled); "
		    "aiqos's classifier runs first on %s's egress hook and hands on to Cilium's programs",
		    u.ifname);
	if (root.handle == 0) {
		add(r, DOCTOR_OK, "uplink", "uplink.root-default", "%s (%s%s): root qdisc %s, the kernel's default",
		    u.ifname, u.kind[0] ? u.kind : "device", u.facts.is_virtual ? ", virtual" : "", root.kind);
	} else if (ours) {
		add(r, DOCTOR_OK, "uplink", "uplink.root-aiqos",
		    "%s: root qdisc %s %x: set by aiqos (original recorded in %s)", u.ifname, root.kind,
		    root.handle >> 16, rec);
	} else if (uplink_record_capture(sk, u.ifindex, u.ifname, &captured, &e) == -EEXIST) {
		add(r, DOCTOR_WARN, "uplink", "uplink.foreign-tree",
		    "%s: a foreign qdisc tree (root %s %x:) set by someone else, which aiqos cannot re-create: aiqos "
		    "leaves it alone and does not shape this uplink (UplinkForeignTree): %s",
		    u.ifname, root.kind, root.handle >> 16, e.msg);
		fix(r,
		    "remove the other tree (tc qdisc del dev %s root) and stop whatever installs it, if aiqos is to "
		    "shape %s; or point \"uplink\" at another device",
		    u.ifname, u.ifname);
	} else {
		add(r, DOCTOR_WARN, "uplink", "uplink.foreign-root",
		    "%s: a root qdisc %s %x: set by someone else: aiqos records it, replaces it while it shapes and "
		    "puts it back when idle or uninstalled; another tool that re-applies it will fight",
		    u.ifname, root.kind, root.handle >> 16);
		fix(r,
		    "stop the other shaper on %s (tc scripts, traffic-control daemons), or point \"uplink\" at "
		    "another device",
		    u.ifname);
	}
}

/* ---- datapath: tunnels, pod CIDRs (node/datapath.h) ---- */

/* Can the classifiers (shared/bpf/parse.h) find the pod inside what this
 * tunnel puts around its packets? NULL: yes; else why not. */
static const char *tunnel_unparsed(const struct dp_tunnel *t)
{
	if (streq(t->kind, "vxlan"))
		return t->port == 8472 || t->port == 4789 || t->port == 0 ? NULL
		                                                          : "a UDP port other than 8472 and 4789";
	if (streq(t->kind, "geneve"))
		return t->port == 6081 || t->port == 0 ? NULL : "a UDP port other than 6081";
	if (streq(t->kind, "ipip") || streq(t->kind, "sit") || streq(t->kind, "ip6tnl"))
		return NULL;
	if (streq(t->kind, "wireguard"))
		return "encrypted: the inner header cannot be read";
	return "an encapsulation the classifiers do not parse (GRE)";
}

static void check_datapath(const struct doctor_options *o, struct doctor_report *r, struct nl_sock *sk,
                           const struct uplink *u)
{
	struct datapath dp = {0};
	struct error e = {0};
	char cidrs[DP_CIDRS_MAX * DP_CIDR_LEN] = "";

	if (datapath_discover(sk, u->ifindex, o->cni_conf_dir, &dp, &e) < 0) {
		add(r, DOCTOR_WARN, "datapath", "datapath.unreadable", "tunnel devices not read: %s", e.msg);
		fix(r, "run doctor as root in the node's network namespace");
		return;
	}
	if (!strcmp(datapath_encap(&dp), "none"))
		add(r, DOCTOR_OK, "datapath", "datapath.routed",
		    "no tunnel device sends by %s: pod packets cross it as they are (routed)%s", u->ifname,
		    dp.n_tunnels ? "; other tunnels listed below" : "");
	else
		add(r, DOCTOR_OK, "datapath", "datapath.encapsulated",
		    "pod packets leave by %s encapsulated (%s, %u bytes a packet): classified by the inner header; "
		    "uplinkOverhead, when not set, counts %u bytes",
		    u->ifname, datapath_encap(&dp), datapath_tunnel_bytes(&dp), datapath_overhead(false, 0, &dp));
	for (unsigned i = 0; i < dp.n_tunnels; i++) {
		const struct dp_tunnel *t = &dp.tunnels[i];
		const char *why = tunnel_unparsed(t);

		if (why && t->via_uplink) {
			add(r, DOCTOR_WARN, "datapath", "datapath.tunnel-unparsed",
			    "%s (%s, port %u) sends pod packets by %s, %s: every pod's packets land in the default "
			    "class",
			    t->ifname, t->kind, t->port, u->ifname, why);
			fix(r,
			    "use VXLAN on 8472/4789, Geneve on 6081 or IPIP for the pod network, or classify by DSCP "
			    "with a tunnel that copies it (tos inherit)");
		} else {
			add(r, DOCTOR_INFO, "datapath", "datapath.tunnel",
			    "%s: %s, port %u, on %s, over %s, %u bytes a packet%s%s", t->ifname, t->kind, t->port,
			    t->link[0] ? t->link : "any device", t->outer6 ? "IPv6" : "IPv4", t->header_bytes,
			    t->via_uplink ? ", via the uplink" : "", t->up ? "" : ", down");
		}
	}
	for (unsigned i = 0; i < dp.n_cidrs; i++) {
		size_t n = strlen(cidrs);
		snprintf(cidrs + n, sizeof(cidrs) - n, "%s%s", i ? " " : "", dp.pod_cidrs[i]);
	}
	if (dp.n_cidrs)
		add(r, DOCTOR_INFO, "datapath", "datapath.pod-cidrs", "pod CIDRs %s (from %s)", cidrs, dp.cidrs_from);
	else
		add(r, DOCTOR_INFO, "datapath", "datapath.pod-cidrs",
		    "pod CIDRs unknown (no host-local ranges in the primary CNI config, no /run/flannel/subnet.env)");
}

/* The datapath against the uplink (not found: check_uplink said so). */
static void check_datapath_at_uplink(const struct doctor_options *o, struct doctor_report *r)
{
	_cleanup_nl_ struct nl_sock *sk = NULL;
	struct uplink u;

	if (nl_open(&sk, NULL) < 0 || uplink_discover(sk, o->uplink, &u, NULL) < 0)
		return;
	check_datapath(o, r, sk, &u);
}

/* Other tools' filters on the uplink's clsact hooks: aiqos keeps them and
 * never replaces them; said where they sit relative to aiqos's. */
static void check_hooks(const struct doctor_options *o, struct doctor_report *r)
{
	_cleanup_nl_ struct nl_sock *sk = NULL;
	struct tc_dump_list d = {0};
	struct uplink u;
	unsigned n = 0;

	if (nl_open(&sk, NULL) < 0 || uplink_discover(sk, o->uplink, &u, NULL) < 0 ||
	    nl_tc_dump_alloc(sk, u.ifindex, 0, &d, NULL) < 0)
		return;
	for (unsigned i = 0; i < d.n; i++) {
		const struct tc_spec *f = &d.tc[i];
		bool egress = TC_H_MIN(f->parent) == TC_H_MIN_EGRESS;
		char line[TC_FORMAT_MAX];

		if (f->type != TC_FILTER || TC_H_MAJ(f->parent) != TC_H_MAJ(TC_H_CLSACT) || uplink_filter_ours(sk, f))
			continue;
		n++;
		uplink_filter_describe(f, d.kind_name[i], line, sizeof(line));
		add(r, DOCTOR_INFO, "uplink", "uplink.foreign-filter",
		    "%s: another tool's filter at %s: aiqos keeps it and never replaces it; %s", u.ifname, line,
		    egress && f->prio <= NODE_FILTER_PRIO_CLS
		            ? "aiqos's classifier joins its slot and runs first (a verdict but TC_ACT_UNSPEC there "
		              "would end the hook before aiqos's)"
		            : "filters at lower prefs run before it");
	}
	tc_dump_list_free(&d);
	if (n)
		fix(r, "nothing to do when the other tool hands packets on; aiqos status lists them (foreignFilters)");
	/* Calico's eBPF dataplane (its tc programs are cali_*): it hands
	 * stack-bound packets on, but redirects established flows to local pods
	 * with bpf_redirect_peer, past aiqos's download redirect and the pods'
	 * host-side veths */
	{
		bool calico = false;
		struct bpf_tcx_prog p[16];
		unsigned np = 0;

		for (unsigned i = 0; i < d.n; i++)
			calico |= d.tc[i].type == TC_FILTER && d.tc[i].kind == TC_KIND_BPF &&
			          !strncmp(d.tc[i].u.bpf.name, "cali", 4);
		if (bpf_tcx_query(u.ifindex, false, p, ARRAY_SIZE(p), &np, NULL) == 0)
			for (unsigned i = 0; i < np && i < ARRAY_SIZE(p); i++)
				calico |= !strncmp(p[i].name, "cali", 4);
		if (calico) {
			add(r, DOCTOR_WARN, "uplink", "uplink.calico-redirect-peer",
			    "%s: Calico's eBPF dataplane: it redirects established flows toward local pods straight "
			    "into "
			    "them (bpf_redirect_peer, BPFRedirectToPeer Enabled by default), past aiqos's download "
			    "redirect "
			    "and the pods' host-side veths: those packets are not shaped on the download tree",
			    u.ifname);
			fix(r, "kubectl patch felixconfiguration default --type merge -p "
			       "'{\"spec\":{\"bpfRedirectToPeer\":\"Disabled\"}}' keeps them off that shortcut; then "
			       "check "
			       "that the download tree's classes count (tc -s class show dev aiqos-ifb0)");
		}
	}
	/* tcx (kernel >= 6.6): programs there run before every clsact filter */
	for (int h = 0; h < 2; h++) {
		struct bpf_tcx_prog p[16];
		unsigned np = 0;

		if (bpf_tcx_query(u.ifindex, h, p, ARRAY_SIZE(p), &np, NULL) < 0)
			break; /* no tcx: nothing runs ahead of clsact */
		for (unsigned i = 0; i < np && i < ARRAY_SIZE(p); i++) {
			if (!strncmp(p[i].name, UPLINK_PROG_PREFIX, strlen(UPLINK_PROG_PREFIX)))
				continue;
			add(r, DOCTOR_WARN, "uplink", "uplink.tcx-foreign",
			    "%s %s: another tool's tcx program %s (id %u) runs before every clsact filter; if it ends "
			    "the hook (any verdict but TCX_NEXT: Cilium's cil_%s_netdev returns TC_ACT_OK) %s",
			    u.ifname, h ? "egress" : "ingress", p[i].name[0] ? p[i].name : "?", p[i].id,
			    h ? "to" : "from",
			    h ? "aiqos's upload gate and redirect (gated HTB) never see a packet; its classifier runs "
			        "first "
			        "as a tcx link and hands on"
			      : "aiqos's download filters at the uplink never see a packet: the agent measures it and "
			        "feeds the download tree at the pods' host-side interfaces instead");
			fix(r, "%s",
			    h ? "nothing for the classifier; the gated upload tree is not used next to it (HTB at the "
			        "root)"
			      : "nothing while the CNI hands packets to the stack (aiqos status: downlink fedAt "
			        "\"pods\"); "
			        "where it puts them straight into the pods (Cilium's BPF host routing or netkit: "
			        "bpf.hostLegacyRouting=true and veth devices restore the path) the agent reports the "
			        "download not shaped (DownloadNotShaped)");
		}
	}
}

void doctor_run(const struct doctor_options *o, struct doctor_report *ret)
{
	char primary_types[CHAIN_TYPES_MAX] = "";

	memset(ret, 0, sizeof(*ret));
	check_kernel(o, ret);
	if (o->cni_conf_dir)
		check_cni(o, ret, primary_types, sizeof(primary_types));
	if (o->uplink) {
		check_uplink(o, ret, primary_types);
		check_datapath_at_uplink(o, ret);
		check_hooks(o, ret);
	}
}

void doctor_print_text(const struct doctor_report *r, FILE *out)
{
	unsigned warn = 0, errs = 0;
	const char *last = "";

	for (unsigned i = 0; i < r->n; i++) {
		const struct doctor_finding *f = &r->f[i];

		if (!streq(f->section, last)) {
			fprintf(out, "%s\n", f->section);
			last = f->section;
		}
		fprintf(out, "  %-5s %s  [%s]\n", doctor_level_name(f->level), f->text, f->id);
		if (f->fix[0])
			fprintf(out, "        fix: %s\n", f->fix);
		warn += f->level == DOCTOR_WARN;
		errs += f->level == DOCTOR_ERROR;
	}
	fprintf(out, "%u warning%s, %u error%s (exit %d)\n", warn, warn == 1 ? "" : "s", errs, errs == 1 ? "" : "s",
	        doctor_exit_code(r));
}

char *doctor_json(const struct doctor_report *r)
{
	_cleanup_json_ cJSON *o = cJSON_CreateObject();
	cJSON *arr = o ? cJSON_AddArrayToObject(o, "findings") : NULL;

	if (!arr)
		return NULL;
	for (unsigned i = 0; i < r->n; i++) {
		const struct doctor_finding *f = &r->f[i];
		cJSON *j = cJSON_CreateObject();

		if (!j || !cJSON_AddItemToArray(arr, j) || !cJSON_AddStringToObject(j, "id", f->id) ||
		    !cJSON_AddStringToObject(j, "level", doctor_level_name(f->level)) ||
		    !cJSON_AddStringToObject(j, "section", f->section) ||
		    !cJSON_AddStringToObject(j, "text", f->text) || !cJSON_AddStringToObject(j, "fix", f->fix))
			return NULL;
	}
	if (!cJSON_AddNumberToObject(o, "exitCode", doctor_exit_code(r)))
		return NULL;
	return cJSON_PrintUnformatted(o);
}
