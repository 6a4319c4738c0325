/* doctor.c — node preflight (see doctor.h). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json.h"
#include "agent.h"
#include "apply.h"
#include "install/chain.h"
#include "doctor.h"
#include "nl.h"
#include "reason.h"
#include "workload.h"

_printf_(4, 5) static void add(struct doctor_report *r, enum doctor_level l, const char *section, const char *fmt, ...)
{
	struct doctor_finding *f;
	va_list ap;

	if (r->n >= DOCTOR_FINDINGS_MAX)
		return;
	f = &r->f[r->n++];
	memset(f, 0, sizeof(*f));
	f->level = l;
	str_copy(f->section, sizeof(f->section), section);
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
	int code = 0;

	for (unsigned i = 0; i < r->n; i++) {
		if (r->f[i].level == DOCTOR_ERROR)
			return 2;
		if (r->f[i].level == DOCTOR_WARN)
			code = 1;
	}
	return code;
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
	char section[sizeof(((struct doctor_finding *)0)->section) + sizeof(c->name)], applied[DOCTOR_TEXT_MAX] = "";
	_cleanup_plan_ struct plan probe = {0};
	struct plan *plan = &probe;
	unsigned n_fallback = 0;
	int q;

	snprintf(section, sizeof(section), "profile %s", c->name);
	q = plan_pod(&c->w, c->p, &ifs, &none, plan);
	if (q >= 0)
		q = probe_plan(plan);
	if (q < 0) {
		if (q == -EPERM) {
			add(r, DOCTOR_WARN, "kernel",
			    "not probed: creating a scratch network namespace needs CAP_SYS_ADMIN (%s)", strerror(-q));
			fix(r, "run as root, or in the agent container: kubectl aiqos doctor");
			*stop = true;
		} else
			add(r, DOCTOR_ERROR, section, "probe failed: %s", strerror(-q));
		return;
	}
	for (unsigned i = 0; i < plan->n; i++) {
		const struct plan_item *it = &plan->items[i];
		char why[REASON_MAX];

		switch (it->status) {
		case ITEM_APPLIED:
			str_append_sep(applied, sizeof(applied), ',', " %s=%s", it->id, alt_name(it, it->chosen));
			break;
		case ITEM_DEGRADED:
			add(r, DOCTOR_WARN, section, "%s falls back to %s instead of %s: %s", it->id,
			    alt_name(it, it->chosen), alt_name(it, 0), reason_item(it, why, sizeof(why)));
			n_fallback++;
			break;
		case ITEM_SKIPPED:
			add(r, DOCTOR_WARN, section, "%s (%s) is not applied: %s", it->id, alt_name(it, 0),
			    reason_item(it, why, sizeof(why)));
			n_fallback++;
			break;
		default:
			break;
		}
	}
	if (n_fallback)
		fix(r, "load or build the missing kernel features (README \"Kernel support\"); aiqos runs degraded "
		       "meanwhile (pods start, TuneDegraded Events name the same features)");
	add(r, DOCTOR_OK, section, "applies:%s", applied[0] ? applied : " nothing (class left untouched)");
}

static void check_kernel(const struct doctor_options *o, struct doctor_report *r)
{
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
		add(r, DOCTOR_INFO, "kernel",
		    "Linux %s (%s); each profile's plan applied by the real applier to the "
		    "loopback device of a scratch network namespace",
		    u.release, u.machine);
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

static const char *cni_name(const char *types)
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
		add(r, DOCTOR_ERROR, "cni", "cannot read %s: %s", o->cni_conf_dir, e.msg);
		return;
	}
	if (!v.primary[0]) {
		add(r, DOCTOR_WARN, "cni", "no primary network config in %s%s: nothing to chain yet", o->cni_conf_dir,
		    v.dir_missing ? " (no such dir)" : "");
		fix(r, "install the cluster's CNI first; aiqos chains as soon as its file appears");
		return;
	}
	if (v.primary_load_r < 0) {
		add(r, DOCTOR_ERROR, "cni", "primary %s cannot be used: %s", v.primary, v.primary_load_msg);
		fix(r, "fix or remove the file: the runtime reads it too, and aiqos writes nothing while it is broken");
		return;
	}
	str_copy(primary_types, size, v.primary_types);
	name = cni_name(v.primary_types);
	add(r, DOCTOR_OK, "cni", "primary %s/%s: %s, chain %s", o->cni_conf_dir, v.primary, name,
	    v.primary_types[0] ? v.primary_types : "(no plugins)");
	if (has_type(v.loaded_types, "aiqos"))
		add(r, DOCTOR_OK, "cni", "aiqos chained in %s, the file the runtime loads (chain %s)", v.loaded,
		    v.loaded_types);
	else
		add(r, DOCTOR_INFO, "cni",
		    "aiqos not chained yet (the runtime loads %s); aiqos-agent install chains it", v.loaded);
	if (has_type(v.primary_types, "bandwidth")) {
		add(r, DOCTOR_WARN, "cni",
		    "the chain already has the bandwidth plugin%s: it shapes kubernetes.io/ingress-bandwidth and "
		    "egress-bandwidth with a tbf (and an IFB) before aiqos runs, a second shaper with a deep queue "
		    "under aiqos's HTB and AQM",
		    streq(name, "Calico") ? " (Calico's default chain includes it)" : "");
		fix(r,
		    "remove the bandwidth entry from the primary's plugins (Calico: the CNI config template of the "
		    "operator/calico-config) or leave those annotations off the pods aiqos tunes; docs/coexistence.md");
	}
	if (streq(name, "Multus"))
		add(r, DOCTOR_INFO, "cni",
		    "Multus: aiqos runs after Multus and tunes the interface Multus returns (the cluster network's "
		    "eth0); secondary networks are tuned only if their own configs chain aiqos (docs/coexistence.md)");
	if (strstr(v.primary, "aiqos"))
		add(r, DOCTOR_WARN, "cni", "the primary's name contains \"aiqos\" (%s): is it a leftover copy?",
		    v.primary);
}

/* ---- uplink: foreign trees and Cilium's bandwidth manager ---- */

static void check_uplink(const struct doctor_options *o, struct doctor_report *r, const char *primary_types)
{
	_cleanup_nl_ struct nl_sock *sk = NULL;
	struct error e = {0};
	struct uplink u;
	struct tc_qdisc_raw root;
	char rec[PATH_MAX] = "";
	bool ours = false, cilium = has_type(primary_types, "cilium-cni");
	int q;

	if (nl_open(&sk, &e) < 0) {
		add(r, DOCTOR_ERROR, "uplink", "rtnetlink: %s", e.msg);
		return;
	}
	if (uplink_discover(sk, o->uplink, &u, &e) < 0) {
		add(r, DOCTOR_WARN, "uplink", "%s", e.msg);
		fix(r, "set \"uplink\" in the agent config to the device that carries pod traffic");
		return;
	}
	if (o->state_dir && uplink_record_path(o->state_dir, rec, sizeof(rec)) >= 0 && access(rec, F_OK) == 0)
		ours = true;
	q = nl_qdisc_root_get(sk, u.ifindex, &root, &e);
	if (q < 0) {
		add(r, DOCTOR_WARN, "uplink", "%s: cannot read the root qdisc: %s", u.ifname, e.msg);
		return;
	}
	if (cilium && (streq(root.kind, "mq") || streq(root.kind, "fq")) && root.handle != 0) {
		add(r, DOCTOR_ERROR, "uplink",
		    "%s: root qdisc %s set by Cilium's bandwidth manager, which owns the uplink's queues and the "
		    "kubernetes.io/egress-bandwidth annotation: aiqos would replace its tree and both would fight",
		    u.ifname, root.kind);
		fix(r, "disable it (helm upgrade cilium --set bandwidthManager.enabled=false, then restart the Cilium "
		       "agents) or do not run aiqos on these nodes (the chart's nodeSelector); docs/coexistence.md");
		return;
	}
	if (cilium)
		add(r, DOCTOR_INFO, "uplink",
		    "Cilium: keep its bandwidth manager off (cilium status | grep BandwidthManager: Disabled); "
		    "aiqos's u32 filters run alongside Cilium's BPF programs on %s",
		    u.ifname);
	if (root.handle == 0) {
		add(r, DOCTOR_OK, "uplink", "%s (%s%s): root qdisc %s, the kernel's default", u.ifname,
		    u.kind[0] ? u.kind : "device", u.facts.is_virtual ? ", virtual" : "", root.kind);
	} else if (ours) {
		add(r, DOCTOR_OK, "uplink", "%s: root qdisc %s %x: set by aiqos (original recorded in %s)", u.ifname,
		    root.kind, root.handle >> 16, rec);
	} else {
		add(r, DOCTOR_WARN, "uplink",
		    "%s: a foreign qdisc tree (root %s %x:) set by someone else: aiqos records it, replaces it while "
		    "it shapes and puts it back when idle or uninstalled; another tool that re-applies it will fight",
		    u.ifname, root.kind, root.handle >> 16);
		fix(r,
		    "stop the other shaper on %s (tc scripts, traffic-control daemons), or point \"uplink\" at "
		    "another device",
		    u.ifname);
	}
}

void doctor_run(const struct doctor_options *o, struct doctor_report *ret)
{
	char primary_types[CHAIN_TYPES_MAX] = "";

	memset(ret, 0, sizeof(*ret));
	check_kernel(o, ret);
	if (o->cni_conf_dir)
		check_cni(o, ret, primary_types, sizeof(primary_types));
	if (o->uplink)
		check_uplink(o, ret, primary_types);
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
		fprintf(out, "  %-5s %s\n", doctor_level_name(f->level), f->text);
		if (f->fix[0])
			fprintf(out, "        way out: %s\n", f->fix);
		warn += f->level == DOCTOR_WARN;
		errs += f->level == DOCTOR_ERROR;
	}
	fprintf(out, "%u warnings, %u errors (exit %d)\n", warn, errs, doctor_exit_code(r));
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

		if (!j || !cJSON_AddItemToArray(arr, j) ||
		    !cJSON_AddStringToObject(j, "level", doctor_level_name(f->level)) ||
		    !cJSON_AddStringToObject(j, "section", f->section) ||
		    !cJSON_AddStringToObject(j, "text", f->text) || !cJSON_AddStringToObject(j, "fix", f->fix))
			return NULL;
	}
	if (!cJSON_AddNumberToObject(o, "exitCode", doctor_exit_code(r)))
		return NULL;
	return cJSON_PrintUnformatted(o);
}
