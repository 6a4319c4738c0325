/* reason.c — fallback reasons in words (see reason.h). */
#include <sys/socket.h>

#include "apply.h"
#include "reason.h"

#define SYSCTL_CC_KEY "net/ipv4/tcp_congestion_control"

static bool spec_uses_pedit(const struct tc_spec *s)
{
	return s->type == TC_FILTER && s->kind == TC_KIND_U32 && s->u.u32.dscp >= 0;
}

/* Kconfig option of a kind (the kernel's Kconfig names). */
static const char *kind_config(enum tc_kind_id k)
{
	static const char *const cfg[_TC_KIND_MAX] = {
	        [TC_KIND_HTB] = "CONFIG_NET_SCH_HTB",           [TC_KIND_HTB_CLASS] = "CONFIG_NET_SCH_HTB",
	        [TC_KIND_TBF] = "CONFIG_NET_SCH_TBF",           [TC_KIND_FQ] = "CONFIG_NET_SCH_FQ",
	        [TC_KIND_FQ_CODEL] = "CONFIG_NET_SCH_FQ_CODEL", [TC_KIND_BFIFO] = "CONFIG_NET_SCHED",
	        [TC_KIND_PFIFO] = "CONFIG_NET_SCHED",           [TC_KIND_PRIO] = "CONFIG_NET_SCH_PRIO",
	        [TC_KIND_CLSACT] = "CONFIG_NET_SCH_INGRESS",    [TC_KIND_U32] = "CONFIG_NET_CLS_U32",
	};
	if ((int)k < 0 || k >= _TC_KIND_MAX || !cfg[k])
		return "CONFIG_NET_SCHED";
	return cfg[k];
}

static const char *kind_name(enum tc_kind_id k)
{
	const struct tc_kind *t = tc_kind_get(k);
	return t && t->name ? t->name : "?";
}

/* "qdisc" for a class too: an htb class exists when the htb qdisc does. */
static const char *kind_object(enum tc_kind_id k)
{
	const struct tc_kind *t = tc_kind_get(k);
	if (!t || t->type == TC_CLASS)
		return "qdisc";
	return tc_type_name(t->type);
}

const char *reason_tc_feature(const struct tc_spec *s, char *buf, size_t size)
{
	if (spec_uses_pedit(s))
		snprintf(buf, size, "the pedit action for DSCP rewrite (CONFIG_NET_ACT_PEDIT%s)",
		         s->u.u32.family == AF_INET6 ? "" : ", CONFIG_NET_ACT_CSUM");
	else
		snprintf(buf, size, "the %s %s (%s)", kind_name(s->kind), kind_object(s->kind), kind_config(s->kind));
	return buf;
}

const char *reason_cc_feature(const char *cc, char *buf, size_t size)
{
	char up[32];
	size_t i;

	for (i = 0; cc[i] && i + 1 < sizeof(up); i++)
		up[i] = (char)((cc[i] >= 'a' && cc[i] <= 'z') ? cc[i] - 'a' + 'A' : cc[i]);
	up[i] = '\0';
	snprintf(buf, size, "the %s congestion control (CONFIG_TCP_CONG_%s)", cc, up);
	return buf;
}

static void sysctl_dotted(const char *key, char *buf, size_t size)
{
	size_t i;
	for (i = 0; key[i] && i + 1 < size; i++)
		buf[i] = key[i] == '/' ? '.' : key[i];
	buf[i] = '\0';
}

static bool key_is_cc(const char *key)
{
	return streq(key, SYSCTL_CC_KEY) || streq(key, "net.ipv4.tcp_congestion_control");
}

static const char *reason_tc(const struct plan_item *it, char *buf, size_t size)
{
	const struct tc_spec *want = &it->tc[0];
	const struct tc_spec *got = plan_item_effective_tc(it);
	char f[REASON_MAX];

	if (!it->err)
		snprintf(buf, size, it->status == ITEM_SKIPPED ? "not applicable" : "refused");
	else if (apply_errno_is_missing_feature(it->err) || (it->err == EINVAL && spec_uses_pedit(want))) {
		/* The same kind taken with other parameters: an option is what is
		 * missing, not the kind (pedit aside, which is an action). */
		if (got && got->kind == want->kind && spec_uses_pedit(got) == spec_uses_pedit(want))
			snprintf(buf, size, "kernel refused these %s parameters (an option newer than this kernel)",
			         kind_name(want->kind));
		else if (it->unknown)
			snprintf(buf, size, "kernel lacks %s", reason_tc_feature(want, f, sizeof(f)));
		else /* ENOENT without "unknown": a device or netns gone, a parent missing */
			snprintf(buf, size,
			         "the kernel refused to add the %s %s on the %s side: %s (not a missing feature)",
			         kind_name(want->kind), kind_object(want->kind), plan_dev_name(it->dev) ?: "?",
			         strerror(it->err));
	} else
		snprintf(buf, size, "the kernel refused %s: %s", kind_name(want->kind), strerror(it->err));
	return buf;
}

static const char *reason_sysctl(const struct plan_item *it, char *buf, size_t size)
{
	char k[SYSCTL_KEY_MAX], f[REASON_MAX];

	sysctl_dotted(it->key, k, sizeof(k));
	if (!it->err)
		snprintf(buf, size, it->status == ITEM_SKIPPED ? "not applicable" : "refused");
	else if (key_is_cc(it->key) && it->n_alt > 0 && it->err == EOPNOTSUPP)
		snprintf(buf, size,
		         "%s left out: it paces with the fq qdisc, which the pod did not get (TCP's own "
		         "pacing costs CPU per packet at line rate)",
		         it->val[0]);
	else if (key_is_cc(it->key) && it->n_alt > 0 && it->err == ENOENT)
		snprintf(buf, size, "kernel lacks %s", reason_cc_feature(it->val[0], f, sizeof(f)));
	else if (it->err == ENOENT)
		snprintf(buf, size, "kernel has no sysctl %s", k);
	else if (it->err == EACCES || it->err == EPERM || it->err == EROFS)
		snprintf(buf, size, "sysctl %s is not writable here (%s)", k, strerror(it->err));
	else if (it->err == EINVAL && it->n_alt > 0)
		snprintf(buf, size, "kernel refused %s=%s (value out of range)", k, it->val[0]);
	else
		snprintf(buf, size, "the kernel refused %s: %s", k, strerror(it->err));
	return buf;
}

const char *reason_item(const struct plan_item *it, char *buf, size_t size)
{
	if (!size)
		return buf;
	buf[0] = '\0';
	if (it->status != ITEM_DEGRADED && it->status != ITEM_SKIPPED)
		return buf;
	if (it->err == ESRCH && it->depends[0]) {
		snprintf(buf, size, "depends on %s, which was not applied", it->depends);
		return buf;
	}
	if (it->type == ITEM_TC && it->n_alt > 0)
		return reason_tc(it, buf, size);
	if (it->type == ITEM_SYSCTL)
		return reason_sysctl(it, buf, size);
	snprintf(buf, size, "%s", it->err ? strerror(it->err) : "not applicable");
	return buf;
}
