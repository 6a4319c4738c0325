/* test_profile.c — built-in profiles (docs/design.md §2), merging the operator's
 * "profiles" config (override, add, exact errors, atomicity) and the choice
 * of a profile for a workload. */
#include <cjson/cJSON.h>

#include "json.h"
#include "plan.h"
#include "profile.h"
#include "t.h"

/* The expected built-ins, field by field. */
static const struct {
	const char *name;
	enum workload_class class;
	unsigned n_cc;
	const char *cc0, *cc1;
	int tcp_ecn;
	uint32_t notsent_lowat, rmem_max, wmem_max;
	int dscp;
	uint32_t target_us, interval_us, limit_pkts, ce_threshold_us, queue_ms;
	bool pod_qdisc;
} want[] = {
        {"inference", CLASS_INFERENCE, 2, "bbr", "cubic", 1, 16384, 0, 0, 46, 1000, 10000, 1024, 0, 2, true},
        {"inference-strict", CLASS_INFERENCE, 2, "bbr", "cubic", 1, 8192, 0, 0, 46, 500, 5000, 256, 0, 1, true},
        {"training", CLASS_TRAINING, 2, "bbr", "cubic", 1, 0, 0, 0, 10, 0, 0, 10000, 0, 20, true},
        {"training-dctcp", CLASS_TRAINING, 2, "dctcp", "cubic", 1, 0, 0, 0, 10, 0, 0, 10000, 1000, 20, true},
        {"default", CLASS_DEFAULT, 0, "", "", -1, 0, 0, 0, -1, 0, 0, 0, 0, 5, false},
};

TEST(builtin_profiles)
{
	struct profile_set set;

	profile_set_builtin(&set);
	CHECK_INT(set.n, ARRAY_SIZE(want));
	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		const struct profile *p = profile_find(&set, want[i].name);

		CHECK(p != NULL);
		if (!p)
			continue;
		CHECK_STR(p->name, want[i].name);
		CHECK_INT(p->class, want[i].class);
		CHECK_INT(p->n_cc, want[i].n_cc);
		CHECK_STR(p->cc[0], want[i].cc0);
		CHECK_STR(p->cc[1], want[i].cc1);
		CHECK_STR(p->cc[2], "");
		CHECK_INT(p->tcp_ecn, want[i].tcp_ecn);
		CHECK_INT(p->notsent_lowat, want[i].notsent_lowat);
		CHECK_INT(p->rmem_max, want[i].rmem_max);
		CHECK_INT(p->wmem_max, want[i].wmem_max);
		CHECK_INT(p->dscp, want[i].dscp);
		CHECK_INT(p->target_us, want[i].target_us);
		CHECK_INT(p->interval_us, want[i].interval_us);
		CHECK_INT(p->limit_pkts, want[i].limit_pkts);
		CHECK_INT(p->ce_threshold_us, want[i].ce_threshold_us);
		CHECK_INT(p->queue_ms, want[i].queue_ms);
		CHECK_INT(p->pod_qdisc, want[i].pod_qdisc);
	}
	CHECK(profile_find(&set, "nope") == NULL);
	CHECK(profile_find(&set, NULL) == NULL);
	CHECK(profile_find(NULL, "inference") == NULL);
}

static const struct {
	enum workload_class class;
	const char *profile;
	const char *got;
	const char *warn;
} resolves[] = {
        {CLASS_DEFAULT, "", "default", ""},
        {CLASS_INFERENCE, "", "inference", ""},
        {CLASS_TRAINING, "", "training", ""},
        {CLASS_INFERENCE, "inference-strict", "inference-strict", ""},
        {CLASS_TRAINING, "training-dctcp", "training-dctcp", ""},
        {CLASS_TRAINING, "inference", "training",
         "profile \"inference\" is for class inference, not training; using \"training\""},
        {CLASS_INFERENCE, "training-dctcp", "inference",
         "profile \"training-dctcp\" is for class training, not inference; using \"inference\""},
        /* a pod without ai.workload cannot borrow a class through its profile */
        {CLASS_DEFAULT, "inference-strict", "default",
         "profile \"inference-strict\" is for class inference, not default; using \"default\""},
        {CLASS_INFERENCE, "no-such", "inference", "profile \"no-such\" not found; using \"inference\""},
};

TEST(resolve)
{
	struct profile_set set;

	profile_set_builtin(&set);
	for (size_t i = 0; i < ARRAY_SIZE(resolves); i++) {
		struct workload w = {.class = resolves[i].class};
		char warn[256] = "garbage";
		const struct profile *p;

		str_copy(w.profile, sizeof(w.profile), resolves[i].profile);
		p = profile_resolve(&set, &w, warn, sizeof(warn));
		CHECK(p != NULL);
		CHECK_STR(p ? p->name : NULL, resolves[i].got);
		CHECK_STR(warn, resolves[i].warn);
		/* ret_warn is optional */
		CHECK(profile_resolve(&set, &w, NULL, 0) == p);
	}
}

TEST(resolve_never_null)
{
	struct profile_set empty = {0};
	struct workload w = {.class = CLASS_TRAINING};
	const struct profile *p = profile_resolve(&empty, &w, NULL, 0);

	/* an empty set still yields the built-in of the class */
	CHECK(p != NULL);
	CHECK_STR(p ? p->name : NULL, "training");
	p = profile_resolve(NULL, &w, NULL, 0);
	CHECK_STR(p ? p->name : NULL, "training");
	w.class = (enum workload_class)77;
	p = profile_resolve(NULL, &w, NULL, 0);
	CHECK_STR(p ? p->name : NULL, "default");
}

TEST(merge_override_keeps_other_fields)
{
	struct profile_set set, before;
	_cleanup_json_ cJSON *j = t_json("{\"inference\": {\"targetUs\": 800, \"dscp\": 34, \"podQdisc\": false}}");
	struct error e = {0};
	const struct profile *p;
	struct profile expect;

	profile_set_builtin(&set);
	before = set;
	CHECK_INT(profile_set_merge_json(&set, j, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK_INT(set.n, before.n);
	p = profile_find(&set, "inference");
	expect = *profile_find(&before, "inference");
	expect.target_us = 800;
	expect.dscp = 34;
	expect.pod_qdisc = false;
	CHECK(p && memcmp(p, &expect, sizeof(expect)) == 0);
	/* other profiles untouched */
	CHECK(memcmp(profile_find(&set, "inference-strict"), profile_find(&before, "inference-strict"),
	             sizeof(struct profile)) == 0);
}

TEST(merge_add_starts_from_class_builtin)
{
	struct profile_set set;
	_cleanup_json_ cJSON *j =
	        t_json("{\"bulk\": {\"class\": \"training\", \"congestionControl\": [\"cubic\"], "
	               "\"dscp\": null, \"tcpEcn\": null, \"rmemMax\": 0},"
	               " \"lowlat\": {\"class\": \"inference\", \"limitPkts\": 128, \"ceThresholdUs\": 300}}");
	struct error e = {0};
	const struct profile *p, *base;
	struct profile_set builtins;

	profile_set_builtin(&set);
	profile_set_builtin(&builtins);
	CHECK_INT(profile_set_merge_json(&set, j, &e), 0);
	CHECK_STR(e.msg, "");
	CHECK_INT(set.n, 7);

	p = profile_find(&set, "bulk");
	base = profile_find(&builtins, "training");
	CHECK(p != NULL);
	if (p) {
		CHECK_STR(p->name, "bulk");
		CHECK_INT(p->class, CLASS_TRAINING);
		CHECK_INT(p->n_cc, 1);
		CHECK_STR(p->cc[0], "cubic");
		CHECK_STR(p->cc[1], "");
		CHECK_INT(p->dscp, -1);
		CHECK_INT(p->tcp_ecn, -1);
		CHECK_INT(p->rmem_max, 0);
		CHECK_INT(p->wmem_max, base->wmem_max);
		CHECK_INT(p->limit_pkts, base->limit_pkts);
		CHECK_INT(p->ce_threshold_us, 0); /* from "training", not "training-dctcp" */
		CHECK_INT(p->queue_ms, base->queue_ms);
	}
	p = profile_find(&set, "lowlat");
	base = profile_find(&builtins, "inference");
	CHECK(p != NULL);
	if (p) {
		CHECK_INT(p->class, CLASS_INFERENCE);
		CHECK_INT(p->limit_pkts, 128);
		CHECK_INT(p->ce_threshold_us, 300);
		CHECK_INT(p->target_us, base->target_us);
		CHECK_INT(p->dscp, 46);
	}

	/* the new profile resolves for its class */
	{
		struct workload w = {.class = CLASS_INFERENCE, .profile = "lowlat"};
		CHECK_STR(profile_resolve(&set, &w, NULL, 0)->name, "lowlat");
	}
}

TEST(merge_same_class_allowed_and_empty_cc)
{
	struct profile_set set;
	_cleanup_json_ cJSON *j = t_json(
	        "{\"training\": {\"class\": \"training\", \"congestionControl\": [], \"tcpEcn\": 2, \"dscp\": -1}}");
	struct error e = {0};
	const struct profile *p;

	profile_set_builtin(&set);
	CHECK_INT(profile_set_merge_json(&set, j, &e), 0);
	p = profile_find(&set, "training");
	CHECK_INT(p->n_cc, 0);
	CHECK_INT(p->tcp_ecn, 2);
	CHECK_INT(p->dscp, -1);
	CHECK_INT(profile_set_merge_json(&set, NULL, &e), 0);
}

static const struct {
	const char *json;
	int r;
	const char *msg;
} bad[] = {
        {"[]", -EINVAL, "profiles: expected an object, got an array"},
        {"{\"inference-strict\": {\"dscp\": 99}}", -ERANGE, "profiles.inference-strict.dscp: 99 is out of range 0..63"},
        {"{\"inference\": {\"dscp\": -2}}", -ERANGE, "profiles.inference.dscp: -2 is out of range 0..63"},
        {"{\"inference\": {\"dscp\": 4.5}}", -EINVAL, "profiles.inference.dscp: 4.5 is not an integer"},
        {"{\"inference\": {\"dscp\": \"EF\"}}", -EINVAL, "profiles.inference.dscp: expected an integer, got a string"},
        {"{\"inference\": {\"tcpEcn\": 3}}", -ERANGE, "profiles.inference.tcpEcn: 3 is out of range 0..2"},
        {"{\"inference\": {\"targetUs\": 10000001}}", -ERANGE,
         "profiles.inference.targetUs: 10000001 is out of range 1..10000000 (0 = kernel default)"},
        {"{\"inference\": {\"targetUs\": -1}}", -ERANGE,
         "profiles.inference.targetUs: -1 is out of range 1..10000000 (0 = kernel default)"},
        {"{\"inference\": {\"targetUs\": 1e300}}", -ERANGE,
         "profiles.inference.targetUs: 1e+300 is out of range 1..10000000 (0 = kernel default)"},
        {"{\"inference\": {\"intervalUs\": 500}}", -EINVAL,
         "profiles.inference: intervalUs 500 is below targetUs 1000"},
        {"{\"inference\": {\"limitPkts\": 2000000}}", -ERANGE,
         "profiles.inference.limitPkts: 2000000 is out of range 1..1000000 (0 = kernel default)"},
        {"{\"inference\": {\"queueMs\": 0}}", -ERANGE, "profiles.inference.queueMs: 0 is out of range 1..1000"},
        {"{\"inference\": {\"queueMs\": null}}", -EINVAL, "profiles.inference.queueMs: expected an integer, got null"},
        {"{\"training\": {\"rmemMax\": 4096}}", -ERANGE,
         "profiles.training.rmemMax: 4096 is out of range 32768..2147483647 (0 = unchanged)"},
        {"{\"training\": {\"wmemMax\": 4294967296}}", -ERANGE,
         "profiles.training.wmemMax: 4294967296 is out of range 16384..2147483647 (0 = unchanged)"},
        {"{\"training\": {\"notsentLowat\": 2147483648}}", -ERANGE,
         "profiles.training.notsentLowat: 2147483648 is out of range 1..1073741824 (0 = unchanged)"},
        {"{\"training\": {\"ceThresholdUs\": 20000000}}", -ERANGE,
         "profiles.training.ceThresholdUs: 20000000 is out of range 1..10000000 (0 = off)"},
        {"{\"training\": {\"podQdisc\": 1}}", -EINVAL,
         "profiles.training.podQdisc: expected true or false, got a number"},
        {"{\"training\": {\"congestionControl\": \"bbr\"}}", -EINVAL,
         "profiles.training.congestionControl: expected an array of names, got a string"},
        {"{\"training\": {\"congestionControl\": [\"bbr\", \"BBR2\"]}}", -EINVAL,
         "profiles.training.congestionControl[1]: invalid name \"BBR2\" (lowercase letters, digits and '_', 1..15 "
         "characters)"},
        {"{\"training\": {\"congestionControl\": [\"a234567890123456\"]}}", -EINVAL,
         "profiles.training.congestionControl[0]: invalid name \"a234567890123456\" (lowercase letters, digits and "
         "'_', "
         "1..15 characters)"},
        {"{\"training\": {\"congestionControl\": [\"\"]}}", -EINVAL,
         "profiles.training.congestionControl[0]: invalid name \"\" (lowercase letters, digits and '_', 1..15 "
         "characters)"},
        {"{\"training\": {\"congestionControl\": [\"bbr\", 1]}}", -EINVAL,
         "profiles.training.congestionControl[1]: expected a string, got a number"},
        {"{\"training\": {\"congestionControl\": [\"bbr\", \"bbr\"]}}", -EINVAL,
         "profiles.training.congestionControl[1]: \"bbr\" is listed twice"},
        {"{\"training\": {\"congestionControl\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}}", -E2BIG,
         "profiles.training.congestionControl: at most 4 names"},
        {"{\"training\": {\"latency\": 1}}", -EINVAL,
         "profiles.training: unknown key \"latency\" (accepted: class, congestionControl, tcpEcn, notsentLowat, "
         "rmemMax, wmemMax, dscp, targetUs, intervalUs, limitPkts, ceThresholdUs, queueMs, podQdisc)"},
        {"{\"training\": {\"dscp\": 1, \"dscp\": 2}}", -EINVAL, "profiles.training: duplicate key \"dscp\""},
        {"{\"training\": 5}", -EINVAL, "profiles.training: expected an object, got a number"},
        {"{\"training\": {\"class\": \"inference\"}}", -EINVAL,
         "profiles.training.class: cannot change the class of an existing profile (it is training)"},
        {"{\"new-one\": {\"dscp\": 1}}", -EINVAL,
         "profiles.new-one: a new profile needs \"class\" (inference, training or default)"},
        {"{\"new-one\": {\"class\": \"Training\"}}", -EINVAL,
         "profiles.new-one.class: invalid value \"Training\" (accepted: inference, training, default)"},
        {"{\"new-one\": {\"class\": 1}}", -EINVAL,
         "profiles.new-one.class: expected a string (inference, training, default), got a number"},
        {"{\"Bad_Name\": {\"class\": \"training\"}}", -EINVAL,
         "profiles: invalid profile name \"Bad_Name\" (lowercase letters, digits and '-', at most 63 characters)"},
        {"{\"\": {\"class\": \"training\"}}", -EINVAL,
         "profiles: invalid profile name \"\" (lowercase letters, digits and '-', at most 63 characters)"},
        {"{\"x\\u0001\": {\"class\": \"training\"}}", -EINVAL,
         "profiles: invalid profile name \"x?\" (lowercase letters, digits and '-', at most 63 characters)"},
        {"{\"a\": {\"class\": \"training\"}, \"a\": {\"class\": \"training\"}}", -EINVAL,
         "profiles: duplicate profile \"a\""},
        /* the first entry is fine, the second fails: nothing of either is applied */
        {"{\"inference\": {\"targetUs\": 700}, \"extra\": {\"class\": \"inference\", \"dscp\": 64}}", -ERANGE,
         "profiles.extra.dscp: 64 is out of range 0..63"},
};

TEST(merge_invalid_exact_and_atomic)
{
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		_cleanup_json_ cJSON *j = t_json(bad[i].json);
		struct profile_set set, before;
		struct error e = {0};
		int r;

		profile_set_builtin(&set);
		before = set;
		r = profile_set_merge_json(&set, j, &e);
		if (r != bad[i].r)
			fprintf(stderr, "  case %zu: %s -> %s\n", i, bad[i].json, e.msg);
		CHECK_INT(r, bad[i].r);
		CHECK_STR(e.msg, bad[i].msg);
		CHECK_INT(e.errnum, -r); /* the errno, unclassified: CNI codes are cni/'s */
		CHECK_INT(e.code, 0);
		CHECK(memcmp(&set, &before, sizeof(set)) == 0);
	}
}

TEST(merge_too_many_profiles)
{
	_cleanup_json_ cJSON *j = cJSON_CreateObject();
	struct profile_set set, before;
	struct error e = {0};
	char name[32];

	profile_set_builtin(&set);
	before = set;
	for (unsigned i = 0; i < PROFILES_MAX; i++) {
		cJSON *p = cJSON_CreateObject();
		cJSON_AddStringToObject(p, "class", "inference");
		snprintf(name, sizeof(name), "p%u", i);
		cJSON_AddItemToObject(j, name, p);
	}
	CHECK_INT(profile_set_merge_json(&set, j, &e), -E2BIG);
	snprintf(name, sizeof(name), "p%u", PROFILES_MAX - (unsigned)before.n);
	CHECK_CONTAINS(e.msg, name);
	CHECK_CONTAINS(e.msg, ": too many profiles (at most 32)");
	CHECK(memcmp(&set, &before, sizeof(set)) == 0);

	/* exactly up to the limit is fine */
	cJSON_Delete(j);
	j = cJSON_CreateObject();
	for (unsigned i = before.n; i < PROFILES_MAX; i++) {
		cJSON *p = cJSON_CreateObject();
		cJSON_AddStringToObject(p, "class", "default");
		snprintf(name, sizeof(name), "q%u", i);
		cJSON_AddItemToObject(j, name, p);
	}
	CHECK_INT(profile_set_merge_json(&set, j, &e), 0);
	CHECK_INT(set.n, PROFILES_MAX);
}

/* Issue 13 item 4: one profile as JSON and back, exactly; the content hash
 * follows every field and ignores the name. */
TEST(profile_json_round_trip_and_hash)
{
	struct profile_set set;
	struct error e = {0};

	profile_set_builtin(&set);
	for (unsigned i = 0; i < set.n; i++) {
		struct profile back;
		cJSON *j = profile_to_json(&set.p[i]);

		CHECK(j != NULL);
		memset(&back, 0, sizeof(back));
		CHECK_INT(profile_from_json(set.p[i].name, j, &back, &e), 0);
		CHECK_STR(back.name, set.p[i].name);
		CHECK(profile_content_equal(&back, &set.p[i]));
		CHECK(profile_content_hash(&back) == profile_content_hash(&set.p[i]));
		cJSON_Delete(j);
		for (unsigned k = 0; k < set.n; k++)
			if (k != i)
				CHECK(profile_content_hash(&set.p[k]) != profile_content_hash(&set.p[i]));
	}
	{
		struct profile a = set.p[0], b = set.p[0];

		str_copy(b.name, sizeof(b.name), "renamed");
		CHECK(profile_content_hash(&a) == profile_content_hash(&b));
		b.queue_ms++;
		CHECK(profile_content_hash(&a) != profile_content_hash(&b));
		CHECK(!profile_content_equal(&a, &b));
		b = a;
		str_copy(b.cc[1], sizeof(b.cc[1]), "reno");
		CHECK(profile_content_hash(&a) != profile_content_hash(&b));
	}
	{
		struct profile out;
		cJSON *j = cJSON_Parse("{\"targetUs\": 5}");

		CHECK(profile_from_json("x", j, &out, &e) < 0); /* class required */
		cJSON_Delete(j);
	}
}

/* The download tree's training window lowers training profiles' rmemMax
 * (an unset one too), never raises one, leaves other classes alone; the pod
 * plan's tcp_rmem default follows a maximum below 128 KiB. */
TEST(profile_bound_rmem)
{
	struct profile_set set;
	const struct profile *tr, *inf;
	struct workload w = {.class = CLASS_TRAINING};
	_cleanup_plan_ struct plan p = {0};
	const struct plan_item *it;

	profile_set_builtin(&set);
	CHECK(set.n < PROFILES_MAX);
	set.p[set.n] = *profile_find(&set, "training");
	str_copy(set.p[set.n].name, sizeof(set.p[set.n].name), "training-small");
	set.p[set.n].rmem_max = 40000;
	set.n++;
	CHECK(profile_set_bound_rmem(&set, CLASS_TRAINING, 60625, 0) >= 1);
	tr = profile_find(&set, "training");
	inf = profile_find(&set, "inference");
	CHECK_INT(tr->rmem_max, 60625);
	CHECK_INT(profile_find(&set, "training-small")->rmem_max, 40000);
	CHECK(inf->rmem_max != 60625);
	CHECK_INT(profile_set_bound_rmem(&set, CLASS_TRAINING, 0, 0), 0);
	CHECK_INT(tr->rmem_max, 60625);

	CHECK_INT(plan_pod(&w, tr, NULL, NULL, &p), 0);
	it = plan_find_const(&p, "sysctl.rmem");
	CHECK(it != NULL);
	if (it)
		CHECK_STR(it->val[0], "4096 60625 60625");
}

/* L8: an unset rmemMax is the kernel's tcp_rmem maximum: a bound over it
 * (49 MB at 400 Gbit/s with the default RTT) leaves it unset, so the
 * window is never raised; a bound under it lowers it; an explicit value
 * over the bound is lowered whatever the kernel's. */
TEST(profile_bound_rmem_never_raises_the_kernels)
{
	struct profile_set set;

	profile_set_builtin(&set);
	CHECK(set.n < PROFILES_MAX);
	set.p[set.n] = *profile_find(&set, "training");
	str_copy(set.p[set.n].name, sizeof(set.p[set.n].name), "training-big");
	set.p[set.n].rmem_max = 64000000;
	set.n++;
	CHECK_INT(profile_find(&set, "training")->rmem_max, 0);
	/* 49e6 over the kernel's 6291456: only the explicit 64e6 is lowered */
	CHECK_INT(profile_set_bound_rmem(&set, CLASS_TRAINING, 49000000, 6291456), 1);
	CHECK_INT(profile_find(&set, "training")->rmem_max, 0);
	CHECK_INT(profile_find(&set, "training-big")->rmem_max, 49000000);
	/* under it: lowered */
	CHECK(profile_set_bound_rmem(&set, CLASS_TRAINING, 49000, 6291456) >= 2);
	CHECK_INT(profile_find(&set, "training")->rmem_max, 49000);
	CHECK_INT(profile_find(&set, "training-big")->rmem_max, 49000);
}
