/* test_attach.c — the crash protocol of shared/attach.h against a real
 * kernel: the test process moves into a fresh network namespace (its "host")
 * with a veth pair into a "pod" namespace, tunes and tears the attachment
 * down through attach_tune()/attach_teardown(), and a forked child is killed
 * (SIGKILL, a failpoint) between the protocol's steps. Then the parent, as
 * the next lock holder would, reads the pending record and recovers
 * (attach_recover_action): the kernel and the record must converge to what
 * the recovery wanted, with nothing of the crashed step left. The kernel is
 * read back with tc(8). Needs root; without it every case is skipped. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "attach.h"
#include "failpoint.h"
#include "netns.h"
#include "t.h"

static struct {
	bool ready;
	char ns_pod[32], netns[64], host_if[IFNAME_LEN], dir[128];
	int host_ifindex;
	struct profile_set set;
} fx;

static void fixture_down(void)
{
	if (fx.ns_pod[0])
		t_sh("ip netns del %s 2>/dev/null", fx.ns_pod);
	if (fx.dir[0])
		t_sh("rm -rf '%s'", fx.dir);
}

/* Once per process: a private host netns (nothing on the real host is
 * touched), the pod netns and the veth; a fresh state dir per case. */
static void fixture_up(void)
{
	static bool done;
	char tmpl[] = "/tmp/aiqos-test-attach.XXXXXX";

	if (geteuid() != 0) {
		printf("test_attach: skipped: needs root for network namespaces and tc (euid %u)\n",
		       (unsigned)geteuid());
		printf("0 passed, 0 failed, %u skipped\n", t_n_cases);
		exit(0);
	}
	if (fx.dir[0])
		t_sh("rm -rf '%s'", fx.dir);
	snprintf(fx.dir, sizeof(fx.dir), "%s", mkdtemp(tmpl) ?: "/tmp/aiqos-test-attach");
	if (done)
		return;
	done = true;
	profile_set_builtin(&fx.set);
	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "  fixture: unshare(CLONE_NEWNET): %m\n");
		return;
	}
	snprintf(fx.ns_pod, sizeof(fx.ns_pod), "aqt-att-%d", (int)getpid());
	snprintf(fx.netns, sizeof(fx.netns), "/run/netns/%s", fx.ns_pod);
	snprintf(fx.host_if, sizeof(fx.host_if), "aqa%dh", (int)getpid() % 100000);
	if (t_sh("ip link set lo up && ip netns add %s", fx.ns_pod) ||
	    t_sh("ip link add %s type veth peer name eth0 netns %s", fx.host_if, fx.ns_pod) ||
	    t_sh("ip link set %s up && ip -n %s link set eth0 up", fx.host_if, fx.ns_pod)) {
		fprintf(stderr, "  fixture: cannot create the pod netns and veth\n");
		return;
	}
	atexit(fixture_down);
	fx.host_ifindex = (int)if_nametoindex(fx.host_if);
	fx.ready = fx.host_ifindex > 0;
}

/* The record of the attachment, identity and interfaces only. */
static void record_identity(struct attach_state *s)
{
	memset(s, 0, sizeof(*s));
	str_copy(s->container_id, sizeof(s->container_id), "c0ffee");
	str_copy(s->ifname, sizeof(s->ifname), "eth0");
	str_copy(s->netns, sizeof(s->netns), fx.netns);
	str_copy(s->ifs.pod_ifname, sizeof(s->ifs.pod_ifname), "eth0");
	str_copy(s->ifs.host_ifname, sizeof(s->ifs.host_ifname), fx.host_if);
	s->ifs.mtu = 1500;
	s->host_ifindex = fx.host_ifindex;
}

/* Host qdisc kinds as "htb,bfifo" (tc's order), "" for none of ours. */
static bool host_has(const char *kind)
{
	return t_sh("tc qdisc show dev %s | grep -qw %s", fx.host_if, kind) == 0;
}

static bool pod_has(const char *kind)
{
	return t_sh("ip netns exec %s tc qdisc show dev eth0 | grep -qw %s", fx.ns_pod, kind) == 0;
}

static bool host_class_rate(const char *rate)
{
	return t_sh("tc class show dev %s | grep -q 'rate %s'", fx.host_if, rate) == 0;
}

/* Tune s (ADD or re-tune) to class/ingress under the attachment lock, as
 * every caller does; fp: failpoints "<before>=kill" etc. Returns attach_tune's. */
static int tune(struct attach_state *s, enum attach_op op, enum workload_class cls, uint64_t ingress_bps,
                const char *fp_before, const char *fp_after)
{
	struct workload w = {.class = cls, .ingress_bps = ingress_bps};
	const struct profile *p = profile_resolve(&fx.set, &w, NULL, 0);
	struct plan *plan = calloc(1, sizeof(*plan));
	struct plan_caps caps = {0};
	struct attach_ifaces ifs = s->ifs;
	struct attach_tune_res res;
	struct attach a;
	struct error e = {0};
	int r, lock;

	lock = state_lock_attachment(fx.dir, s->container_id, s->ifname, 500, &e);
	attach_init(&a);
	r = attach_open_host(&a, s, &e);
	CHECK_INT(r, 1);
	r = attach_open_pod(&a, s->netns, s, &e);
	CHECK_INT(r, 1);
	CHECK_INT(plan_pod(&w, p, &ifs, &caps, plan), 0);
	const struct attach_tune_req req = {
	        .op = op,
	        .workload = &w,
	        .profile = p,
	        .ifs = &ifs,
	        .plan = plan,
	        .intent_required = true,
	        .failpoint_before = fp_before,
	        .failpoint_after = fp_after,
	};
	r = attach_tune(fx.dir, s, &a, &caps, &req, &res);
	if (r < 0)
		fprintf(stderr, "  tune: %s%s%s\n", res.intent_err.msg, res.apply_err.msg, res.commit_err.msg);
	attach_close(&a);
	state_unlock_attachment(lock, fx.dir, s->container_id, s->ifname);
	plan_free(plan);
	free(plan);
	return r;
}

/* Load the record as the next lock holder does (plan rebuilt). 0, or -ENOENT. */
static int load(struct attach_state *s, cJSON **choices)
{
	struct error e = {0};
	int r = state_load(fx.dir, "c0ffee", "eth0", s, choices, &e);

	if (r < 0 && r != -ENOENT)
		fprintf(stderr, "  load: %s\n", e.msg);
	return r;
}

/* Run fn in a child with AIQOS_TEST_FAILPOINTS=fp; true when it died of SIGKILL. */
static bool killed_in_child(const char *fp, void (*fn)(void *), void *ud)
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0) {
		setenv(FAILPOINT_ENV, fp, 1);
		fn(ud);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return false;
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

static int teardown(const char *netns)
{
	struct attach_state *s = calloc(1, sizeof(*s));
	struct attach_teardown_res res;
	cJSON *choices = NULL;
	struct error e = {0};
	int r, lock;

	lock = state_lock_attachment(fx.dir, "c0ffee", "eth0", 500, &e);
	r = load(s, &choices);
	if (r == 0) {
		r = attach_teardown(fx.dir, &fx.set, s, choices, netns, &res);
		if (r < 0)
			fprintf(stderr, "  teardown: %s%s%s%s\n", res.plan_err.msg, res.open_err.msg,
			        res.remove_err.msg, res.record_err.msg);
	}
	state_unlock_attachment(lock, fx.dir, "c0ffee", "eth0");
	cJSON_Delete(choices);
	attach_state_free(s);
	return r;
}

/* ---- ADD ---- */

struct add_args {
	const char *before, *after;
};

static void child_add(void *ud)
{
	const struct add_args *a = ud;
	struct attach_state *s = calloc(1, sizeof(*s));

	record_identity(s);
	tune(s, ATTACH_OP_ADD, CLASS_INFERENCE, 40000000, a->before, a->after);
}

TEST(add_killed_between_steps_is_undone)
{
	static const struct {
		const char *fp;
		bool tc;
	} points[] = {{"t-before=kill", false}, {"t-after=kill", true}};

	fixture_up();
	CHECK(fx.ready);
	for (unsigned i = 0; fx.ready && i < ARRAY_SIZE(points); i++) {
		struct add_args args = {"t-before", "t-after"};
		struct attach_state *s = calloc(1, sizeof(*s));
		cJSON *choices = NULL;

		CHECK(killed_in_child(points[i].fp, child_add, &args));
		/* the intent is on disk, the kernel as far as the step got */
		CHECK_INT(load(s, &choices), 0);
		CHECK(s->pending);
		CHECK_INT(s->intent.op, ATTACH_OP_ADD);
		CHECK_CONTAINS(s->failure, "ADD did not finish");
		CHECK_INT(attach_recover_action(s), ATTACH_RECOVER_TEARDOWN);
		CHECK(host_has("htb") == points[i].tc);
		/* recovery (DEL, GC or the agent): nothing left, record gone */
		CHECK_INT(teardown(fx.netns), 0);
		CHECK(!host_has("htb") && !host_has("bfifo"));
		CHECK(!pod_has("htb") && !pod_has("fq") && !pod_has("fq_codel"));
		CHECK_INT(load(s, NULL), -ENOENT);
		cJSON_Delete(choices);
		attach_state_free(s);
	}
}

/* ---- re-tune ---- */

static void child_retune(void *ud)
{
	struct attach_state *s = calloc(1, sizeof(*s));
	struct error e = {0};
	cJSON *choices = NULL;

	(void)ud;
	if (load(s, &choices) == 0 && attach_plan_restore(&fx.set, s, choices, NULL, &e) == 0)
		tune(s, ATTACH_OP_RETUNE, CLASS_INFERENCE, 80000000, NULL, "t-after");
}

TEST(retune_killed_after_apply_rolls_forward)
{
	struct attach_state *s = calloc(1, sizeof(*s));
	struct error e = {0};
	cJSON *choices = NULL;

	fixture_up();
	CHECK(fx.ready);
	if (!fx.ready)
		return;
	/* committed: inference without limits (nothing on the host side) */
	record_identity(s);
	CHECK_INT(tune(s, ATTACH_OP_ADD, CLASS_INFERENCE, 0, NULL, NULL), 0);
	CHECK(!host_has("htb"));
	/* a re-tune to an 80 Mbit/s ingress shaper dies after its apply */
	CHECK(killed_in_child("t-after=kill", child_retune, NULL));
	CHECK(host_has("htb") && host_class_rate("80Mbit"));
	CHECK_INT(load(s, &choices), 0);
	CHECK(s->pending);
	CHECK_INT(s->intent.op, ATTACH_OP_RETUNE);
	CHECK_INT(s->workload.ingress_bps, 0); /* the committed tuning stays the record's */
	CHECK_INT(s->intent.workload.ingress_bps, 80000000);
	CHECK_INT(attach_recover_action(s), ATTACH_RECOVER_RETUNE);
	/* recovery tunes to what is wanted now (no limit again): the crashed
	 * target's shaper goes although the committed plan never had it */
	CHECK_INT(attach_plan_restore(&fx.set, s, choices, NULL, &e), 0);
	CHECK_INT(tune(s, ATTACH_OP_RETUNE, CLASS_INFERENCE, 0, NULL, NULL), 0);
	CHECK(!host_has("htb") && !host_has("bfifo"));
	cJSON_Delete(choices);
	choices = NULL;
	CHECK_INT(load(s, &choices), 0);
	CHECK(!s->pending);
	CHECK_INT(s->intent.op, ATTACH_OP_NONE);
	CHECK_STR(s->failure, "");
	CHECK_INT(s->workload.ingress_bps, 0);
	/* a crashed re-tune torn down instead (DEL): both plans' objects go */
	CHECK(killed_in_child("t-after=kill", child_retune, NULL));
	CHECK(host_has("htb"));
	CHECK_INT(teardown(fx.netns), 0);
	CHECK(!host_has("htb") && !host_has("bfifo"));
	CHECK_INT(load(s, NULL), -ENOENT);
	cJSON_Delete(choices);
	attach_state_free(s);
}

/* ---- teardown ---- */

static void child_teardown(void *ud)
{
	(void)ud;
	teardown(fx.netns);
}

TEST(teardown_killed_between_steps_is_finished)
{
	static const char *const points[] = {"teardown-before-remove=kill", "teardown-after-remove=kill"};

	fixture_up();
	CHECK(fx.ready);
	for (unsigned i = 0; fx.ready && i < ARRAY_SIZE(points); i++) {
		struct attach_state *s = calloc(1, sizeof(*s));
		cJSON *choices = NULL;

		record_identity(s);
		CHECK_INT(tune(s, ATTACH_OP_ADD, CLASS_INFERENCE, 40000000, NULL, NULL), 0);
		CHECK(host_has("htb") && host_class_rate("40Mbit"));
		CHECK(killed_in_child(points[i], child_teardown, NULL));
		CHECK_INT(load(s, &choices), 0);
		CHECK(s->pending);
		CHECK_INT(s->intent.op, ATTACH_OP_TEARDOWN);
		CHECK_INT(attach_recover_action(s), ATTACH_RECOVER_TEARDOWN);
		CHECK(host_has("htb") == (i == 0));
		/* GC (host side only) finishes it */
		cJSON_Delete(choices);
		CHECK_INT(teardown(NULL), 0);
		CHECK(!host_has("htb") && !host_has("bfifo"));
		CHECK_INT(load(s, NULL), -ENOENT);
		attach_state_free(s);
	}
}

/* The kernel step refused without an intent on disk: nothing changes. */
TEST(tune_without_intent_changes_nothing)
{
	struct attach_state *s = calloc(1, sizeof(*s));

	fixture_up();
	CHECK(fx.ready);
	if (!fx.ready)
		return;
	record_identity(s);
	t_sh("rm -rf '%s' && mkdir -p '%s' && chmod 0500 '%s'", fx.dir, fx.dir, fx.dir);
	/* root ignores the mode: make the directory a file instead */
	t_sh("rmdir '%s' && touch '%s'", fx.dir, fx.dir);
	CHECK(tune(s, ATTACH_OP_ADD, CLASS_INFERENCE, 40000000, NULL, NULL) < 0);
	CHECK(!host_has("htb"));
	CHECK(!s->pending);
	t_sh("rm -f '%s'", fx.dir);
	attach_state_free(s);
}
