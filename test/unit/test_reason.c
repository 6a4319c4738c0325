/* test_reason.c — fallback reasons in words (shared/reason.c): the missing
 * feature and its kernel option, never the bare errno text, for qdiscs,
 * the pedit action, congestion controls and sysctls. */
#include <errno.h>
#include <sys/socket.h>

#include "apply.h"
#include "reason.h"
#include "t.h"

static struct plan_item tc_item(enum tc_kind_id want, enum tc_kind_id fallback, enum item_status st, int err)
{
	struct plan_item it;

	memset(&it, 0, sizeof(it));
	it.type = ITEM_TC;
	it.n_alt = 2;
	it.tc[0].type = TC_QDISC;
	it.tc[0].kind = want;
	it.tc[1].type = TC_QDISC;
	it.tc[1].kind = fallback;
	it.status = st;
	it.chosen = st == ITEM_DEGRADED ? 1 : -1;
	it.err = err;
	return it;
}

static struct plan_item sysctl_item(const char *key, const char *v0, const char *v1, enum item_status st, int err)
{
	struct plan_item it;

	memset(&it, 0, sizeof(it));
	it.type = ITEM_SYSCTL;
	snprintf(it.key, sizeof(it.key), "%s", key);
	snprintf(it.val[0], sizeof(it.val[0]), "%s", v0);
	it.n_alt = 1;
	if (v1) {
		snprintf(it.val[1], sizeof(it.val[1]), "%s", v1);
		it.n_alt = 2;
	}
	it.status = st;
	it.chosen = st == ITEM_DEGRADED ? 1 : -1;
	it.err = err;
	return it;
}

/* tc_item() that the kernel said is unknown (or learnt missing): apply.c
 * sets it->unknown only then. */
static struct plan_item tc_item_unknown(enum tc_kind_id want, enum tc_kind_id got, enum item_status st, int err)
{
	struct plan_item it = tc_item(want, got, st, err);

	it.unknown = true;
	return it;
}

TEST(missing_qdisc_names_kind_and_option)
{
	char b[REASON_MAX];
	struct plan_item it = tc_item_unknown(TC_KIND_FQ_CODEL, TC_KIND_BFIFO, ITEM_DEGRADED, ENOENT);

	CHECK_STR(reason_item(&it, b, sizeof(b)), "kernel lacks the fq_codel qdisc (CONFIG_NET_SCH_FQ_CODEL)");
	it = tc_item_unknown(TC_KIND_FQ, TC_KIND_BFIFO, ITEM_DEGRADED, EOPNOTSUPP);
	CHECK_STR(reason_item(&it, b, sizeof(b)), "kernel lacks the fq qdisc (CONFIG_NET_SCH_FQ)");
	it = tc_item_unknown(TC_KIND_HTB, TC_KIND_TBF, ITEM_SKIPPED, ENOENT);
	CHECK_STR(reason_item(&it, b, sizeof(b)), "kernel lacks the htb qdisc (CONFIG_NET_SCH_HTB)");
	it = tc_item_unknown(TC_KIND_HTB_CLASS, TC_KIND_HTB_CLASS, ITEM_SKIPPED, ENOENT);
	CHECK_STR(reason_item(&it, b, sizeof(b)), "kernel lacks the htb qdisc (CONFIG_NET_SCH_HTB)");
	it = tc_item_unknown(TC_KIND_CLSACT, TC_KIND_CLSACT, ITEM_SKIPPED, ENOENT);
	CHECK_CONTAINS(reason_item(&it, b, sizeof(b)), "CONFIG_NET_SCH_INGRESS");
	CHECK(!strstr(b, "No such file"));
}

TEST(pedit_is_named_not_u32)
{
	char b[REASON_MAX];
	struct plan_item it;

	memset(&it, 0, sizeof(it));
	it.type = ITEM_TC;
	it.n_alt = 1;
	it.tc[0].type = TC_FILTER;
	it.tc[0].kind = TC_KIND_U32;
	it.tc[0].u.u32.dscp = 46;
	it.tc[0].u.u32.family = AF_INET;
	it.status = ITEM_SKIPPED;
	it.chosen = -1;
	it.err = ENOENT;
	it.unknown = true; /* "Failed to load TC action module" */
	CHECK_STR(reason_item(&it, b, sizeof(b)),
	          "kernel lacks the pedit action for DSCP rewrite (CONFIG_NET_ACT_PEDIT, CONFIG_NET_ACT_CSUM)");
	/* a missing act_pedit can come back as EINVAL */
	it.err = EINVAL;
	CHECK_CONTAINS(reason_item(&it, b, sizeof(b)), "CONFIG_NET_ACT_PEDIT");
	it.tc[0].u.u32.family = AF_INET6;
	CHECK_STR(reason_item(&it, b, sizeof(b)),
	          "kernel lacks the pedit action for DSCP rewrite (CONFIG_NET_ACT_PEDIT)");
	/* a u32 filter without rewrite: the classifier itself */
	it.tc[0].u.u32.dscp = -1;
	it.err = ENOENT;
	CHECK_STR(reason_item(&it, b, sizeof(b)), "kernel lacks the u32 filter (CONFIG_NET_CLS_U32)");
}

/* A transient ENOENT (the device or its netns went away, a parent missing)
 * is the kernel's answer, not a missing feature: "kernel lacks" only when
 * the kernel said the kind is unknown (issue 32: clsact reported missing on
 * a kernel that has it). */
TEST(transient_enoent_is_not_a_missing_feature)
{
	char b[REASON_MAX];
	struct plan_item it = tc_item(TC_KIND_CLSACT, TC_KIND_CLSACT, ITEM_SKIPPED, ENOENT);

	CHECK_STR(reason_item(&it, b, sizeof(b)),
	          "the kernel refused to add the clsact qdisc on the pod side: No such file or directory (not a "
	          "missing feature)");
	CHECK(!strstr(b, "lacks") && !strstr(b, "CONFIG_"));
	it = tc_item(TC_KIND_FQ_CODEL, TC_KIND_BFIFO, ITEM_DEGRADED, ENOENT);
	CHECK(!strstr(reason_item(&it, b, sizeof(b)), "kernel lacks"));
	/* the kernel's own words for a missing kind, classifier or action */
	CHECK(apply_extack_says_unknown("qdisc fq: No such file or directory (Specified qdisc kind is unknown.)"));
	CHECK(apply_extack_says_unknown("filter u32: No such file or directory (TC classifier not found.)"));
	CHECK(apply_extack_says_unknown("filter u32: No such file or directory (Failed to load TC action module.)"));
	CHECK(!apply_extack_says_unknown("qdisc clsact: No such file or directory"));
	CHECK(!apply_extack_says_unknown("qdisc fq_codel: No such file or directory (Failed to find specified qdisc)"));
	CHECK(!apply_extack_says_unknown(NULL));
}

TEST(same_kind_other_parameters_is_not_a_missing_kind)
{
	char b[REASON_MAX];
	struct plan_item it = tc_item(TC_KIND_FQ, TC_KIND_FQ, ITEM_DEGRADED, EOPNOTSUPP);

	CHECK_CONTAINS(reason_item(&it, b, sizeof(b)), "kernel refused these fq parameters");
	CHECK(!strstr(b, "lacks"));
}

TEST(other_refusals_keep_the_errno_text)
{
	char b[REASON_MAX];
	struct plan_item it = tc_item(TC_KIND_FQ_CODEL, TC_KIND_BFIFO, ITEM_SKIPPED, EBUSY);

	CHECK_STR(reason_item(&it, b, sizeof(b)), "the kernel refused fq_codel: Device or resource busy");
	it = tc_item(TC_KIND_FQ_CODEL, TC_KIND_BFIFO, ITEM_SKIPPED, 0);
	CHECK_STR(reason_item(&it, b, sizeof(b)), "not applicable");
	it = tc_item(TC_KIND_FQ_CODEL, TC_KIND_BFIFO, ITEM_APPLIED, 0);
	CHECK_STR(reason_item(&it, b, sizeof(b)), "");
}

TEST(sysctls)
{
	char b[REASON_MAX];
	struct plan_item it = sysctl_item("net/ipv4/tcp_congestion_control", "bbr", "cubic", ITEM_DEGRADED, ENOENT);

	CHECK_STR(reason_item(&it, b, sizeof(b)), "kernel lacks the bbr congestion control (CONFIG_TCP_CONG_BBR)");
	it = sysctl_item("net/ipv4/tcp_ecn_fallback", "1", NULL, ITEM_SKIPPED, ENOENT);
	CHECK_STR(reason_item(&it, b, sizeof(b)), "kernel has no sysctl net.ipv4.tcp_ecn_fallback");
	it = sysctl_item("net/ipv4/tcp_ecn", "1", NULL, ITEM_SKIPPED, EROFS);
	CHECK_STR(reason_item(&it, b, sizeof(b)),
	          "sysctl net.ipv4.tcp_ecn is not writable here (Read-only file system)");
	it = sysctl_item("net/ipv4/tcp_notsent_lowat", "16384", NULL, ITEM_SKIPPED, EINVAL);
	CHECK_STR(reason_item(&it, b, sizeof(b)),
	          "kernel refused net.ipv4.tcp_notsent_lowat=16384 (value out of range)");
}

TEST(dependency_not_applied)
{
	char b[REASON_MAX];
	struct plan_item it = tc_item(TC_KIND_U32, TC_KIND_U32, ITEM_SKIPPED, ESRCH);

	snprintf(it.depends, sizeof(it.depends), "dscp.clsact");
	CHECK_STR(reason_item(&it, b, sizeof(b)), "depends on dscp.clsact, which was not applied");
}

TEST(truncation_is_safe)
{
	char b[8];
	struct plan_item it = tc_item(TC_KIND_FQ_CODEL, TC_KIND_BFIFO, ITEM_DEGRADED, ENOENT);

	CHECK_INT(strlen(reason_item(&it, b, sizeof(b))), 7);
	CHECK_STR(reason_item(&it, b, 0), b); /* size 0: nothing written */
}
