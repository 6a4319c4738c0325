/* reason.h — why a plan item fell back, in words an operator can act on:
 * the kernel feature that is missing and the config option that provides it
 * ("kernel lacks the fq_codel qdisc (CONFIG_NET_SCH_FQ_CODEL)"), never the
 * bare errno text the kernel answered with ("No such file or directory").
 * The one wording of Events, aiqosctl status/explain, the agent's logs and
 * aiqosctl doctor. Pure: no syscalls, no globals. */
#ifndef AIQOS_REASON_H
#define AIQOS_REASON_H

#include "plan.h"

#define REASON_MAX 160

/* The feature an alternative needs, in words: "the fq_codel qdisc
 * (CONFIG_NET_SCH_FQ_CODEL)", "the pedit action for DSCP rewrite
 * (CONFIG_NET_ACT_PEDIT)". */
const char *reason_tc_feature(const struct tc_spec *s, char *buf, size_t size);
/* "the bbr congestion control (CONFIG_TCP_CONG_BBR)" */
const char *reason_cc_feature(const char *cc, char *buf, size_t size);

/* Why the item is degraded or skipped (it->err is the kernel's answer to
 * the wanted alternative, 0 = none recorded): "kernel lacks the fq_codel
 * qdisc (CONFIG_NET_SCH_FQ_CODEL)", "kernel lacks the bbr congestion
 * control (CONFIG_TCP_CONG_BBR)", "kernel has no sysctl
 * net.ipv4.tcp_ecn_fallback", "the kernel refused fq_codel: Invalid
 * argument" (a refusal that is not a missing feature), "not applicable"
 * (skipped by the planner). "" for an applied or pending item. */
const char *reason_item(const struct plan_item *it, char *buf, size_t size);

#endif
