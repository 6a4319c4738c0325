/* apply.c — the applier (plan -> kernel), the remover and the observer
 * (kernel -> struct observed). Mechanism only: it walks the planner's items in
 * order, tries each item's alternatives best first, tells "this kernel lacks
 * the feature" (fall back) from real failures (stop), and records the outcome
 * in the items and in the learned capabilities. */
#include <fcntl.h>
#include <limits.h>
#include <linux/if_ether.h>
#include <sys/file.h>

#include "apply.h"
#include "failpoint.h"
#include "netns.h"
#include "nl.h"

#define SYSCTL_CC_KEY "net/ipv4/tcp_congestion_control"

bool apply_errno_is_missing_feature(int errnum)
{
	if (errnum < 0)
		errnum = -errnum;
	/* ENOTSUP == EOPNOTSUPP on Linux; keep both for other libcs. */
	return errnum == ENOENT || errnum == EOPNOTSUPP || errnum == ENOTSUP; // NOLINT(misc-redundant-expression)
}

static const char *dev_label(enum plan_dev d)
{
	const char *s = plan_dev_name(d);
	return s ? s : "?";
}

/* The socket and ifindex of a device, or a hard error when the caller did not
 * provide them. */
static int target_for(const struct apply_target *t, enum plan_dev dev, struct nl_sock **ret_sk, int *ret_ifindex,
                      struct error *err)
{
	struct nl_sock *sk = NULL;
	int ifindex = 0;

	switch (dev) {
	case DEV_POD:
		sk = t->pod_sk;
		ifindex = t->pod_ifindex;
		break;
	case DEV_HOST:
		sk = t->host_sk;
		ifindex = t->host_ifindex;
		break;
	case DEV_UPLINK:
		sk = t->host_sk;
		ifindex = t->uplink_ifindex;
		break;
	case DEV_IFB:
		sk = t->host_sk;
		ifindex = t->ifb_ifindex;
		break;
	case DEV_IFB_UP:
		sk = t->host_sk;
		ifindex = t->ifb_up_ifindex;
		break;
	default:
		return error_set(err, EINVAL, "invalid device %d", (int)dev);
	}
	if (!sk)
		return error_set(err, EBADF, "no netlink socket for the %s device", dev_label(dev));
	if (ifindex <= 0)
		return error_set(err, ENODEV, "no %s device (ifindex %d)", dev_label(dev), ifindex);
	*ret_sk = sk;
	*ret_ifindex = ifindex;
	return 0;
}

static bool spec_uses_pedit(const struct tc_spec *s)
{
	return s->type == TC_FILTER && s->kind == TC_KIND_U32 && s->u.u32.dscp >= 0;
}

static const char *spec_kind_name(const struct tc_spec *s)
{
	const struct tc_kind *k = tc_kind_get(s->kind);
	return k && k->name ? k->name : "?";
}

static bool spec_is_root_qdisc(const struct tc_spec *s)
{
	/* TC_H_CLSACT == TC_H_INGRESS */
	return s->type == TC_QDISC && (s->parent == TC_H_ROOT || s->parent == TC_H_CLSACT);
}

/* Can ENOENT (or EOPNOTSUPP) for this object only mean "unknown
 * kind/action"? A root-level qdisc has no parent that could be missing; a
 * filter attached to a qdisc (minor 0) or a clsact hook gets EINVAL, not
 * ENOENT, for a missing parent. Below a class, ENOENT is also the kernel's
 * answer for a missing class, EOPNOTSUPP for a parent that is classless. */
static bool enoent_means_missing_feature(const struct tc_spec *s)
{
	if (s->type == TC_QDISC)
		return spec_is_root_qdisc(s);
	if (s->type == TC_FILTER)
		return TC_H_MIN(s->parent) == 0 || TC_H_MAJ(s->parent) == TC_H_MAJ(TC_H_CLSACT);
	return false;
}

/* The kernel's own words for "this kind is not here" (extack of sch_api,
 * cls_api and act_api): a qdisc kind, a classifier or an action module. Any
 * other ENOENT (a device or namespace gone meanwhile, a missing parent) is
 * not a missing feature. */
bool apply_extack_says_unknown(const char *msg)
{
	return msg && (strstr(msg, "kind is unknown") || strstr(msg, "TC classifier not found") ||
	               strstr(msg, "Failed to load TC action module"));
}

/* Does this refusal mean "the kernel lacks a feature the alternative uses"? */
static bool tc_refusal_is_missing_feature(const struct tc_spec *s, int errnum)
{
	if (apply_errno_is_missing_feature(errnum))
		return true;
	/* A missing act_pedit/act_csum can come back as EINVAL. */
	return errnum == EINVAL && spec_uses_pedit(s);
}

/* Record the feature an alternative failed on as missing in caps, with the
 * kernel's errno. */
static void caps_mark_refused(struct plan_caps *caps, const struct tc_spec *refused, const struct tc_spec *accepted,
                              int errnum)
{
	if (!caps)
		return;
	if (spec_uses_pedit(refused) && (!accepted || !spec_uses_pedit(accepted))) {
		caps->missing_pedit = true;
		caps->missing_pedit_errno = errnum;
		return;
	}
	if (accepted && accepted->kind == refused->kind)
		return; /* same kind worked with other parameters: not a missing kind */
	if (refused->kind >= 0 && refused->kind < _TC_KIND_MAX) {
		plan_caps_mark_missing(caps, refused->kind);
		caps->missing_errno[refused->kind] = errnum;
	}
}

/* 0 when caps do not know s to be unsupported, else the errno to record for
 * skipping it (the one the kernel refused it with when learned). */
static int caps_known_missing(const struct plan_caps *caps, const struct tc_spec *s)
{
	int e = 0;

	if (!caps)
		return 0;
	if (s->kind >= 0 && s->kind < _TC_KIND_MAX && !plan_caps_has(caps, s->kind))
		e = caps->missing_errno[s->kind];
	else if (spec_uses_pedit(s) && caps->missing_pedit)
		e = caps->missing_pedit_errno;
	else
		return 0;
	return e > 0 ? e : EOPNOTSUPP;
}

/* Filters without an explicit handle get a kernel-chosen one, so a second
 * "replace" would add a duplicate. The first such filter of a
 * (device, parent, prio, protocol) in one apply run deletes what is at that
 * prio/protocol first; later ones of the same key just add to it. */
struct flushed_key {
	enum plan_dev dev;
	uint32_t parent;
	uint16_t prio;
	uint16_t protocol;
};

#define APPLY_FLUSH_MAX 64 /* a pod plan has 2 such filters */

struct apply_run {
	struct flushed_key flushed[APPLY_FLUSH_MAX];
	unsigned n_flushed;
};

static bool run_take_flush(struct apply_run *run, enum plan_dev dev, const struct tc_spec *s)
{
	for (unsigned i = 0; i < run->n_flushed; i++) {
		const struct flushed_key *k = &run->flushed[i];
		if (k->dev == dev && k->parent == s->parent && k->prio == s->prio && k->protocol == s->protocol)
			return false;
	}
	if (run->n_flushed < ARRAY_SIZE(run->flushed))
		run->flushed[run->n_flushed++] =
		        (struct flushed_key){.dev = dev, .parent = s->parent, .prio = s->prio, .protocol = s->protocol};
	return true;
}

/* Objects that are already absent: not an error when deleting. */
static bool delete_errno_is_absent(int errnum)
{
	if (errnum < 0)
		errnum = -errnum;
	return errnum == ENOENT || errnum == EINVAL || errnum == ENODEV;
}

/* The kernel refuses (EINVAL, "Invalid qdisc name: must match existing
 * qdisc") to replace a qdisc by one of another kind under the same handle
 * (e.g. our bfifo 10: by fq_codel 10:, or after someone put pfifo there).
 * Find the qdisc holding s's handle; if it is of another kind aiqos knows,
 * delete it (its children go with it) so the caller can retry. 0 = retry,
 * -EINVAL = no such conflict (the refusal was about s itself). */
static int qdisc_clear_handle(struct nl_sock *sk, int ifindex, const struct tc_spec *s, struct error *err)
{
	_cleanup_free_ struct tc_dump *d = calloc(1, sizeof(*d));
	char h[32];
	int r;

	if (!d)
		return error_set(err, ENOMEM, "out of memory");
	r = nl_tc_dump(sk, ifindex, d, err);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < d->n && i < ARRAY_SIZE(d->tc); i++) {
		const struct tc_spec *o = &d->tc[i];

		if (o->type != TC_QDISC || o->handle != s->handle || o->kind == s->kind)
			continue;
		tc_handle_format(s->handle, h, sizeof(h));
		if (o->kind < 0 || o->kind >= _TC_KIND_MAX || !tc_kind_get(o->kind))
			return error_set(err, EEXIST,
			                 "qdisc handle %s is held by a %s qdisc that aiqos does not manage", h,
			                 d->kind_name[i][0] ? d->kind_name[i] : "foreign");
		r = nl_tc_delete(sk, ifindex, o, err);
		if (r < 0 && !delete_errno_is_absent(r))
			return r;
		error_clear(err);
		return 0;
	}
	return -EINVAL;
}

/* A qdisc kind without a change operation (pfifo_fast, mq) refuses a
 * replace of itself with EOPNOTSUPP: when the slot already holds that kind
 * under that handle, there is nothing to change. */
static bool qdisc_already_there(struct nl_sock *sk, int ifindex, const struct tc_spec *s)
{
	_cleanup_free_ struct tc_dump *d = calloc(1, sizeof(*d));

	if (!d || s->type != TC_QDISC || !s->handle || nl_tc_dump(sk, ifindex, d, NULL) < 0)
		return false;
	for (unsigned i = 0; i < d->n && i < ARRAY_SIZE(d->tc); i++)
		if (d->tc[i].type == TC_QDISC && d->tc[i].handle == s->handle && d->tc[i].kind == s->kind &&
		    d->tc[i].parent == s->parent)
			return true;
	return false;
}

static int tc_put(struct apply_run *run, struct nl_sock *sk, int ifindex, enum plan_dev dev, const struct tc_spec *s,
                  struct error *err)
{
	int r;

	if (s->type == TC_FILTER && s->prio != 0) {
		if (s->handle == 0 && run_take_flush(run, dev, s)) {
			struct tc_spec del = *s;
			del.handle = 0; /* whole prio/protocol */
			r = nl_tc_delete(sk, ifindex, &del, err);
			if (r < 0 && !delete_errno_is_absent(r))
				return r;
			error_clear(err);
		}
		r = nl_tc_replace(sk, ifindex, s, err);
		if (r == -EEXIST && s->handle != 0) {
			/* an exclusive create met our own filter: replace it */
			r = nl_tc_delete(sk, ifindex, s, err);
			if (r < 0 && !delete_errno_is_absent(r))
				return r;
			error_clear(err);
			r = nl_tc_replace(sk, ifindex, s, err);
		}
		return r;
	}
	r = nl_tc_replace(sk, ifindex, s, err);
	if (r == -EOPNOTSUPP && qdisc_already_there(sk, ifindex, s)) {
		error_clear(err);
		return 0;
	}
	if (r == -EINVAL && s->type == TC_QDISC && s->handle != 0) {
		struct error e = {0};
		int q = qdisc_clear_handle(sk, ifindex, s, &e);
		if (q == 0) {
			error_clear(err);
			r = nl_tc_replace(sk, ifindex, s, err);
		} else if (q != -EINVAL) {
			error_propagate(err, &e);
			r = q;
		}
	}
	return r;
}

static int apply_tc_item(struct apply_run *run, struct plan_item *it, const struct apply_target *t,
                         struct plan_caps *caps, struct error *err)
{
	struct nl_sock *sk = NULL;
	int ifindex = 0, r;
	int refused_errno[PLAN_ALT_MAX] = {0};
	bool tried[PLAN_ALT_MAX] = {false};
	bool unknown_kind[PLAN_ALT_MAX] = {false}; /* the kernel said so (extack) */

	it->unknown = false;
	if (it->dev == DEV_HOST && t->host_ifindex <= 0) {
		/* no host-side veth (a macvlan/ipvlan primary): nothing to
		 * shape ingress on; skipped, with that reason */
		it->status = ITEM_SKIPPED;
		it->chosen = -1;
		it->err = ENODEV;
		return 0;
	}
	r = target_for(t, it->dev, &sk, &ifindex, err);
	if (r < 0) {
		it->err = -r;
		error_prefix(err, "apply %s", it->id);
		return r;
	}
	for (unsigned i = 0; i < it->n_alt; i++) {
		const struct tc_spec *s = &it->tc[i];
		int known = caps_known_missing(caps, s);
		struct error e = {0};

		if (known) {
			it->err = known; /* known missing: not tried, no syscall */
			if (i == 0)
				it->unknown = true;
			continue;
		}
		r = tc_put(run, sk, ifindex, it->dev, s, &e);
		if (r == 0) {
			it->chosen = (int)i;
			it->status = i == 0 ? ITEM_APPLIED : ITEM_DEGRADED;
			/* what refused before this success is a missing feature for sure
			 * (the device and parent took this one) */
			for (unsigned j = 0; j < i; j++)
				if (tried[j]) {
					caps_mark_refused(caps, &it->tc[j], s, refused_errno[j]);
					if (j == 0 && (s->kind != it->tc[0].kind ||
					               spec_uses_pedit(s) != spec_uses_pedit(&it->tc[0])))
						it->unknown = true;
				}
			return 0;
		}
		if (!tc_refusal_is_missing_feature(s, -r)) {
			it->err = -r;
			if (e.msg[0])
				error_propagate(err, &e);
			else
				error_set(err, -r, "%s %s: %s", tc_type_name(s->type), spec_kind_name(s), strerror(-r));
			error_prefix(err, "apply %s on %s (ifindex %d)", it->id, dev_label(it->dev), ifindex);
			return r;
		}
		it->err = -r;
		tried[i] = true;
		refused_errno[i] = -r;
		unknown_kind[i] = apply_extack_says_unknown(e.msg);
		if (i == 0)
			it->unknown = unknown_kind[0];
	}
	/* Nothing accepted. Learn only what is unambiguous (it is kept for the
	 * later runs of this boot, caps.h): the kernel said the kind is
	 * unknown, or EOPNOTSUPP where no parent can explain it — below a
	 * class, EOPNOTSUPP is a classless parent ("not classful"). A bare
	 * ENOENT is not learnt: a device or netns that went away meanwhile
	 * answers the same. */
	for (unsigned j = 0; j < it->n_alt; j++)
		if (tried[j] &&
		    (refused_errno[j] == EOPNOTSUPP || refused_errno[j] == ENOTSUP || refused_errno[j] == ENOENT) &&
		    (unknown_kind[j] || (refused_errno[j] != ENOENT && enoent_means_missing_feature(&it->tc[j])))) {
			caps_mark_refused(caps, &it->tc[j], NULL, refused_errno[j]);
			if (j == 0)
				it->unknown = true; /* learnt missing: reported so */
		}
	it->status = ITEM_SKIPPED;
	it->chosen = -1;
	return 0;
}

static bool sysctl_key_is(const char *key, const char *want)
{
	char norm[SYSCTL_KEY_MAX];
	bool slashes = strchr(key, '/') != NULL;
	size_t i;

	for (i = 0; key[i] && i + 1 < sizeof(norm); i++)
		norm[i] = (key[i] == '.' && !slashes) ? '/' : key[i];
	norm[i] = '\0';
	return streq(norm, want);
}

/* Is name a word of the space-separated list? */
static bool word_in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p = list;

	while (*p) {
		while (*p == ' ' || *p == '\t')
			p++;
		const char *w = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		if ((size_t)(p - w) == n && strncmp(w, name, n) == 0)
			return true;
	}
	return false;
}

#define SYSCTL_CC_ALLOWED_KEY "net/ipv4/tcp_allowed_congestion_control"

/* Outside the initial netns only the algorithms listed in the host's
 * tcp_allowed_congestion_control may be chosen (EPERM otherwise; the list
 * holds reno and the host default). That list is host-global: aiqos leaves
 * it as it found it. It adds the algorithm only for the moment of the pod's
 * write and takes it out again: the pod netns keeps the default it was given
 * (the list restricts choosing an algorithm, not using it). Writers of the
 * list (plugins, the agent) serialize on a flock of the sysctl file itself,
 * held for microseconds; only what was added is taken out again, so an
 * operator's own change meanwhile stays. Called in the host netns. */
static int cc_host_lock(void)
{
	char path[PATH_MAX];
	unsigned tries = 0;
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s%s", sysctl_get_root(), SYSCTL_CC_ALLOWED_KEY) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if ((errno != EWOULDBLOCK && errno != EINTR) || ++tries > 200) { /* ~100 ms */
			close(fd);
			return -EBUSY;
		}
		usleep(500);
	}
	return fd;
}

static int cc_allow_in_host(const char *cc, bool *ret_added)
{
	char list[SYSCTL_WRITE_MAX + 1], val[SYSCTL_WRITE_MAX + 1];
	int r;

	*ret_added = false;
	r = sysctl_read(SYSCTL_CC_ALLOWED_KEY, list, sizeof(list), NULL);
	if (r < 0)
		return r;
	if (word_in_list(list, cc))
		return 0;
	if ((size_t)snprintf(val, sizeof(val), "%s %s", list, cc) >= sizeof(val))
		return -ENAMETOOLONG;
	r = sysctl_write(SYSCTL_CC_ALLOWED_KEY, val, NULL);
	*ret_added = r == 0;
	return r;
}

/* Take cc (only it) out of the host's list again. */
static int cc_disallow_in_host(const char *cc)
{
	char list[SYSCTL_WRITE_MAX + 1], val[SYSCTL_WRITE_MAX + 1];
	size_t n = strlen(cc), o = 0;
	const char *p;
	int r;

	r = sysctl_read(SYSCTL_CC_ALLOWED_KEY, list, sizeof(list), NULL);
	if (r < 0)
		return r;
	for (p = list; *p;) {
		const char *w;

		while (*p == ' ' || *p == '\t')
			p++;
		w = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		if (p == w || ((size_t)(p - w) == n && strncmp(w, cc, n) == 0))
			continue;
		o += (size_t)snprintf(val + o, sizeof(val) - o, "%s%.*s", o ? " " : "", (int)(p - w), w);
		if (o >= sizeof(val))
			return -ENAMETOOLONG;
	}
	val[o] = '\0';
	return sysctl_write(SYSCTL_CC_ALLOWED_KEY, val, NULL);
}

/* From inside the pod netns (*saved: the host netns): write val to key with
 * cc made selectable in the host for that moment (see above). Returns what
 * the pod's write returned; *ret_hard when we could not get back into the
 * pod netns (then that error). */
static int cc_write_allowed_from_pod(const char *key, const char *val, int pod_nsfd, int *saved, bool *ret_hard,
                                     struct error *e, struct error *err)
{
	_cleanup_close_ int lock = -1;
	bool added = false;
	int r, q, w;

	*ret_hard = false;
	if (pod_nsfd < 0 || *saved < 0)
		return -EPERM;
	r = netns_leave(*saved, err);
	*saved = -1;
	if (r < 0) {
		*ret_hard = true;
		return r;
	}
	lock = cc_host_lock();
	q = lock >= 0 ? cc_allow_in_host(val, &added) : lock;
	r = netns_enter(pod_nsfd, saved, err);
	if (r < 0) {
		if (added)
			(void)cc_disallow_in_host(val);
		*ret_hard = true;
		return r;
	}
	w = q == 0 ? sysctl_write(key, val, e) : -EPERM;
	if (!added)
		return w;
	r = netns_leave(*saved, err);
	*saved = -1;
	if (r == 0)
		(void)cc_disallow_in_host(val);
	q = r == 0 ? netns_enter(pod_nsfd, saved, err) : r;
	if (q < 0) {
		*ret_hard = true;
		return q;
	}
	return w;
}

/* Learn that the kernel does not know congestion control cc. */
static void caps_mark_cc_missing(struct plan_caps *caps, const char *cc)
{
	size_t n, k;

	if (!caps || !*cc || strchr(cc, ' ') || word_in_list(caps->cc_missing, cc))
		return;
	n = strlen(caps->cc_missing);
	k = strlen(cc);
	if (n + 1 + k + 1 > sizeof(caps->cc_missing))
		return; /* full: it is tried again next time */
	if (n > 0)
		caps->cc_missing[n++] = ' ';
	memcpy(caps->cc_missing + n, cc, k + 1);
}

/* bbr paces with fq. Without fq TCP paces each packet itself, which cost
 * 72 % of the goodput at line rate here (docs/benchmarks.md P6): where the
 * plan asked for fq on the pod and did not get it, bbr is left out. */
static bool cc_needs_fq(const char *cc)
{
	return streq(cc, "bbr");
}

/* The plan puts fq on the pod (a training profile's root, or its leaf under a
 * shaper) and fq is not there: skipped, another kind taken, or known missing
 * before it is tried (the tc items are planned before the sysctls). */
static bool pod_fq_missing(const struct plan_item *items, unsigned n_items, const struct plan_caps *caps)
{
	for (unsigned i = 0; i < n_items; i++) {
		const struct plan_item *it = &items[i];
		const struct tc_spec *got;
		bool wants = false;

		if (it->type != ITEM_TC || it->dev != DEV_POD)
			continue;
		for (unsigned a = 0; a < it->n_alt; a++)
			wants = wants || it->tc[a].kind == TC_KIND_FQ;
		if (!wants)
			continue;
		if (it->status == ITEM_PENDING)
			return !plan_caps_has(caps, TC_KIND_FQ);
		got = it->status == ITEM_SKIPPED ? NULL : plan_item_effective_tc(it);
		return !got || got->kind != TC_KIND_FQ;
	}
	return false;
}

/* Called with the thread already in the right netns; for pod sysctls
 * *saved is the host netns (see cc_allow_from_pod). The previous value is
 * read through the same open as the first write (sysctl_exchange).
 * no_fq: the pod's planned fq is missing (pod_fq_missing). */
static int apply_sysctl_item(struct plan_item *it, struct plan_caps *caps, bool no_fq, int pod_nsfd, int *saved,
                             struct error *err)
{
	bool is_cc = sysctl_key_is(it->key, SYSCTL_CC_KEY);
	bool have_prev = false, key_present = false;
	char cur[SYSCTL_VAL_MAX];

	/* what to put back if the pod leaves its class or ADD is undone */
	it->prev[0] = '\0';
	for (unsigned i = 0; i < it->n_alt; i++) {
		const char *val = it->val[i];
		struct error e = {0};
		int r;

		if (is_cc && caps && caps->cc_available[0] && !word_in_list(caps->cc_available, val)) {
			it->err = ENOENT; /* not in tcp_available_congestion_control */
			continue;
		}
		if (is_cc && caps && word_in_list(caps->cc_missing, val)) {
			it->err = ENOENT; /* refused as unknown before: not tried again */
			continue;
		}
		if (is_cc && no_fq && cc_needs_fq(val)) {
			it->err = EOPNOTSUPP; /* reason.c: it would pace without fq */
			continue;
		}
		if (!have_prev) {
			int q;

			r = sysctl_exchange(it->key, val, cur, sizeof(cur), &q, &e);
			have_prev = true;
			key_present = q == 0;
			if (key_present)
				str_copy(it->prev, sizeof(it->prev), cur);
		} else {
			r = sysctl_write(it->key, val, &e);
		}
		if (r == -EPERM && is_cc && it->dev == DEV_POD) {
			bool hard;
			int q = cc_write_allowed_from_pod(it->key, val, pod_nsfd, saved, &hard, &e, err);
			if (hard)
				return q; /* could not get back into the pod netns */
			r = q;
		}
		if (r == 0) {
			it->chosen = (int)i;
			it->status = i == 0 ? ITEM_APPLIED : ITEM_DEGRADED;
			return 0;
		}
		it->err = -r;
		if (r == -ENOENT) {
			/* the key itself may be absent: no alternative can help */
			if (!key_present && sysctl_read(it->key, cur, sizeof(cur), NULL) == -ENOENT)
				break;
			/* the value was refused (e.g. unknown congestion control) */
			if (is_cc)
				caps_mark_cc_missing(caps, val);
			continue;
		}
		if (r == -EINVAL || r == -ERANGE)
			continue;
		/* outside the initial netns only tcp_allowed_congestion_control may be set (EPERM) */
		if (is_cc && (r == -EPERM || r == -EBUSY))
			continue;
		error_propagate(err, &e);
		error_prefix(err, "apply %s", it->id);
		return r;
	}
	if (!have_prev && sysctl_read(it->key, cur, sizeof(cur), NULL) == 0)
		str_copy(it->prev, sizeof(it->prev), cur);
	it->status = ITEM_SKIPPED;
	it->chosen = -1;
	return 0;
}

/* An item's dependency is the item with that id (not itself), applied or
 * degraded. */
static bool depends_satisfied(const struct plan_item *items, unsigned n_items, const struct plan_item *it)
{
	if (!it->depends[0])
		return true;
	for (unsigned i = 0; i < n_items; i++)
		if (&items[i] != it && streq(items[i].id, it->depends))
			return items[i].status == ITEM_APPLIED || items[i].status == ITEM_DEGRADED;
	return false;
}

static int validate_item(const struct plan_item *it, struct error *err)
{
	if (it->n_alt == 0 || it->n_alt > PLAN_ALT_MAX)
		return error_set(err, EINVAL, "plan item %s has %u alternatives (1..%d)", it->id, it->n_alt,
		                 PLAN_ALT_MAX);
	if (it->type != ITEM_TC && it->type != ITEM_SYSCTL)
		return error_set(err, EINVAL, "plan item %s has an invalid type %d", it->id, (int)it->type);
	if (it->dev < 0 || it->dev >= _DEV_MAX)
		return error_set(err, EINVAL, "plan item %s has an invalid device %d", it->id, (int)it->dev);
	return 0;
}

/* Back from the pod netns (saved >= 0: the netns to return to) at the end
 * of a walk that returns `ret`; failing to return is worse than anything
 * else (this thread would stay in the pod netns): that error wins. */
static int netns_return(int saved, int ret, struct error *err)
{
	struct error e = {0};
	int q;

	if (saved < 0)
		return ret;
	q = netns_leave(saved, &e);
	if (q < 0) {
		error_propagate(err, &e);
		return q;
	}
	return ret;
}

/* Enter the netns a sysctl item belongs to (the pod's for DEV_POD, the
 * caller's own otherwise), remembering where we came from in *saved. */
static int sysctl_switch_netns(const struct plan_item *it, const struct apply_target *t, int *saved, struct error *err)
{
	int r;

	if (it->dev == DEV_POD) {
		if (*saved >= 0)
			return 0; /* already in the pod netns */
		if (t->pod_nsfd < 0)
			return error_set(err, EBADF, "apply %s: no pod netns for pod sysctls", it->id);
		r = netns_enter(t->pod_nsfd, saved, err);
		if (r < 0)
			error_prefix(err, "apply %s", it->id);
		return r;
	}
	if (*saved >= 0) {
		r = netns_leave(*saved, err);
		*saved = -1;
		if (r < 0)
			error_prefix(err, "apply %s", it->id);
		return r;
	}
	return 0;
}

/* A hook qdisc (clsact) is worth creating only for filters that can be
 * applied: when every item depending on it is known to be missing (DSCP
 * marking without pedit), it is skipped — no clsact left on the pod. */
static bool hook_useless(const struct plan_item *items, unsigned n_items, const struct plan_item *it,
                         const struct plan_caps *caps)
{
	bool any = false;

	if (!caps || it->type != ITEM_TC || it->n_alt == 0 || it->tc[0].kind != TC_KIND_CLSACT)
		return false;
	for (unsigned i = 0; i < n_items; i++) {
		const struct plan_item *d = &items[i];

		if (!streq(d->depends, it->id))
			continue;
		any = true;
		for (unsigned a = 0; a < d->n_alt; a++)
			if (d->type != ITEM_TC || !caps_known_missing(caps, &d->tc[a]))
				return false;
	}
	return any;
}

/* Errors after which no further item of the same target can succeed. */
static bool apply_errno_is_fatal(int errnum)
{
	if (errnum < 0)
		errnum = -errnum;
	return errnum == ENODEV || errnum == ENXIO || errnum == EBADF || errnum == ENOMEM || errnum == EPERM;
}

/* A filter the caller knows is absent: create it without the lookups of a
 * replace. 0 = done (status set), 1 = use the normal path. */
static int apply_filter_create(struct plan_item *it, const struct apply_target *t, const struct plan_caps *caps)
{
	const struct tc_spec *s = &it->tc[0];
	struct nl_sock *sk = NULL;
	int ifindex = 0;

	if (it->type != ITEM_TC || it->n_alt != 1 || s->type != TC_FILTER || !s->handle || spec_uses_pedit(s) ||
	    (caps && s->kind >= 0 && s->kind < _TC_KIND_MAX && !plan_caps_has(caps, s->kind)) ||
	    target_for(t, it->dev, &sk, &ifindex, NULL) < 0)
		return 1;
	if (nl_tc_create(sk, ifindex, s, NULL) < 0)
		return 1; /* there after all, or refused: the normal path says why */
	it->status = ITEM_APPLIED;
	it->chosen = 0;
	it->err = 0;
	return 0;
}

/* The applier (apply.h): the items it applies have status/chosen/err reset
 * first. */
int apply_plan(struct plan *p, const struct apply_only *only, const struct apply_target *t, struct plan_caps *caps,
               struct error *err)
{
	struct apply_run run = {.n_flushed = 0};
	struct plan_item *items = p->items;
	unsigned n_items = p->n;
	const unsigned *idx = only ? only->idx : NULL;
	const bool *absent = only ? only->absent : NULL;
	unsigned n = only ? only->n : n_items;
	int saved = -1; /* original netns while inside the pod netns */
	int first = 0;

	for (unsigned k = 0; k < n; k++) {
		unsigned i = idx ? idx[k] : k;

		if (i < n_items) {
			items[i].status = ITEM_PENDING;
			items[i].chosen = -1;
			items[i].err = 0;
		}
	}
	for (unsigned k = 0; k < n; k++) {
		unsigned i = idx ? idx[k] : k;
		struct plan_item *it;
		struct error e = {0};
		int r;

		if (i >= n_items) {
			if (!first)
				first = error_set(err, EINVAL, "item index %u out of range (%u items)", i, n_items);
			continue;
		}
		it = &items[i];
		if (only)
			failpoint_quiet("apply-item"); /* the lab's kill-mid-update test stalls here between items */
		r = validate_item(it, &e);
		if (r == 0 && hook_useless(items, n_items, it, caps)) {
			it->status = ITEM_SKIPPED;
			it->err = caps->missing_pedit_errno > 0 ? caps->missing_pedit_errno : EOPNOTSUPP;
			continue;
		}
		if (r == 0 && !depends_satisfied(items, n_items, it)) {
			int known = it->type == ITEM_TC && it->n_alt ? caps_known_missing(caps, &it->tc[0]) : 0;

			it->status = ITEM_SKIPPED;
			/* the reason is the missing feature when known, else the item it depends on */
			it->err = known ? known : ESRCH;
			continue;
		}
		if (r == 0 && it->type == ITEM_TC) {
			if (!(absent && absent[k]) || apply_filter_create(it, t, caps) != 0)
				r = apply_tc_item(&run, it, t, caps, &e);
		} else if (r == 0) {
			r = sysctl_switch_netns(it, t, &saved, &e);
			if (r == 0)
				r = apply_sysctl_item(it, caps, pod_fq_missing(items, n_items, caps), t->pod_nsfd,
				                      &saved, &e);
		}
		if (r < 0) {
			it->status = ITEM_PENDING;
			it->chosen = -1;
			if (!it->err)
				it->err = -r;
			if (!first) {
				first = r;
				error_propagate(err, &e);
			}
			if (!only || apply_errno_is_fatal(r) || saved >= 0)
				break; /* the whole plan, the target gone, or maybe stuck in the pod netns */
		}
	}
	return netns_return(saved, first, err);
}

int apply_remove(const struct plan *p, enum plan_dev dev, const struct apply_target *t, struct error *err)
{
	struct nl_sock *sk = NULL;
	int ifindex = 0, r;

	r = target_for(t, dev, &sk, &ifindex, NULL);
	if (r < 0)
		return 0; /* no socket or no device: nothing of ours can be there */
	for (unsigned i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		const struct tc_spec *s;
		struct error e = {0};

		if (it->type != ITEM_TC || it->dev != dev)
			continue;
		for (unsigned k = 0; k < it->n_alt && k < PLAN_ALT_MAX; k++) {
			/* known: the effective alternative; unknown: each in turn (the
			 * kernel deletes by our handle and kind, so only ours go) */
			s = p->choices_unknown ? &it->tc[k] : plan_item_effective_tc(it);
			if (!s || !spec_is_root_qdisc(s))
				break; /* children go with their root */
			r = nl_tc_delete(sk, ifindex, s, &e);
			if (r == -ENODEV)
				return 0; /* the device is gone, and everything on it */
			if (r < 0 && !delete_errno_is_absent(r)) {
				error_propagate(err, &e);
				error_prefix(err, "remove %s from %s (ifindex %d)", it->id, dev_label(dev), ifindex);
				return r;
			}
			if (!p->choices_unknown)
				break;
		}
	}
	return 0;
}

static int observe_dev(enum plan_dev dev, const struct apply_target *t, struct observed *ret, struct error *err)
{
	_cleanup_free_ struct tc_dump *d = NULL;
	struct nl_sock *sk = NULL;
	int ifindex = 0, r;

	r = target_for(t, dev, &sk, &ifindex, err);
	if (r < 0)
		goto fail;
	d = calloc(1, sizeof(*d));
	if (!d)
		return error_set(err, ENOMEM, "observe %s: out of memory", dev_label(dev));
	r = nl_tc_dump(sk, ifindex, d, err);
	if (r < 0)
		goto fail;
	for (unsigned i = 0; i < d->n && i < ARRAY_SIZE(d->tc); i++) {
		if (ret->n >= OBSERVED_MAX)
			return error_set(err, ENOBUFS, "observe %s (ifindex %d): more than %d tc objects",
			                 dev_label(dev), ifindex, OBSERVED_MAX);
		ret->dev[ret->n] = dev;
		ret->tc[ret->n] = d->tc[i];
		ret->n++;
	}
	return 0;
fail:
	error_prefix(err, "observe %s", dev_label(dev));
	return r;
}

static bool observed_has_key(const struct observed *o, const char *key)
{
	for (unsigned i = 0; i < o->n_sysctl; i++)
		if (streq(o->sysctl_key[i], key))
			return true;
	return false;
}

static int observe_sysctls(const struct plan *p, bool pod, struct observed *ret, struct error *err)
{
	for (unsigned i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		char val[SYSCTL_WRITE_MAX + 1];
		int r;

		if (it->type != ITEM_SYSCTL || (it->dev == DEV_POD) != pod || observed_has_key(ret, it->key))
			continue;
		r = sysctl_read(it->key, val, sizeof(val), err);
		if (r == -ENOENT)
			continue; /* the kernel lacks it: nothing observed */
		if (r < 0) {
			error_prefix(err, "observe %s", it->id);
			return r;
		}
		if (ret->n_sysctl >= OBSERVED_SYSCTL_MAX)
			return error_set(err, ENOBUFS, "observe: more than %d sysctls", OBSERVED_SYSCTL_MAX);
		str_copy(ret->sysctl_key[ret->n_sysctl], SYSCTL_KEY_MAX, it->key);
		/* longer values cannot match a planned one; keep them truncated */
		str_copy(ret->sysctl_val[ret->n_sysctl], SYSCTL_VAL_MAX, val);
		ret->n_sysctl++;
	}
	return 0;
}

int observe_plan(const struct plan *p, const struct apply_target *t, struct observed *ret, struct error *err)
{
	bool want_dev[_DEV_MAX] = {false};
	bool pod_sysctls = false, other_sysctls = false;
	int r;

	memset(ret, 0, sizeof(*ret));
	for (unsigned i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		if (it->dev < 0 || it->dev >= _DEV_MAX)
			return error_set(err, EINVAL, "plan item %s has an invalid device %d", it->id, (int)it->dev);
		if (it->type == ITEM_TC && (plan_item_effective_tc(it) || it->status == ITEM_PENDING))
			want_dev[it->dev] = true; /* a skipped item is not looked for */
		else if (it->dev == DEV_POD)
			pod_sysctls = true;
		else
			other_sysctls = true;
	}
	for (int d = 0; d < _DEV_MAX; d++) {
		if (!want_dev[d])
			continue;
		r = observe_dev((enum plan_dev)d, t, ret, err);
		if (r < 0)
			return r;
	}
	if (other_sysctls) {
		r = observe_sysctls(p, false, ret, err);
		if (r < 0)
			return r;
	}
	if (pod_sysctls) {
		int saved = -1, q;
		if (t->pod_nsfd < 0)
			return error_set(err, EBADF, "observe: no pod netns for pod sysctls");
		r = netns_enter(t->pod_nsfd, &saved, err);
		if (r < 0)
			return r;
		r = observe_sysctls(p, true, ret, err);
		q = netns_leave(saved, err); /* failing to return beats any other error */
		if (q < 0)
			return q;
		if (r < 0)
			return r;
	}
	return 0;
}

int apply_restore_sysctls(const struct plan *p, const struct apply_target *t, struct error *err)
{
	int saved = -1, first = 0;

	for (unsigned i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		struct error e = {0};
		int r;

		if (it->type != ITEM_SYSCTL || !it->prev[0] || !plan_item_effective_val(it) ||
		    sysctl_value_equal(it->prev, plan_item_effective_val(it)))
			continue;
		r = sysctl_switch_netns(it, t, &saved, &e);
		if (r == 0)
			r = sysctl_write(it->key, it->prev, &e);
		if (r < 0 && !first) {
			first = r;
			error_propagate(err, &e);
			error_prefix(err, "restore %s", it->id);
		}
	}
	return netns_return(saved, first, err);
}

int apply_remove_item(const struct plan_item *it, const struct apply_target *t, struct error *err)
{
	struct nl_sock *sk = NULL;
	int ifindex = 0, r;

	if (it->type == ITEM_SYSCTL) {
		const char *val = plan_item_effective_val(it);
		int saved = -1, q;

		if (!it->prev[0] || !val || sysctl_value_equal(it->prev, val))
			return 0;
		r = sysctl_switch_netns(it, t, &saved, err);
		if (r == 0) {
			r = sysctl_write(it->key, it->prev, err);
			if (r < 0)
				error_prefix(err, "restore %s", it->id);
		}
		if (saved >= 0) {
			q = netns_leave(saved, err);
			if (q < 0)
				return q;
		}
		return r;
	}
	const struct tc_spec *s = plan_item_effective_tc(it);
	if (!s)
		return 0; /* nothing of this item is in the kernel */
	r = target_for(t, it->dev, &sk, &ifindex, NULL);
	if (r < 0)
		return 0; /* no device: nothing of ours can be there */
	r = nl_tc_delete(sk, ifindex, s, err);
	if (r == -ENODEV || (r < 0 && delete_errno_is_absent(r))) {
		error_clear(err);
		return 0;
	}
	if (r < 0)
		error_prefix(err, "remove %s from %s (ifindex %d)", it->id, dev_label(it->dev), ifindex);
	return r;
}
