/* test_agent_reconcile.c — the agent's pure decisions, with a fake clock and
 * no kernel: scheduling (debounce window, mixed hold, retries, drift repair,
 * backoff), the pod cache (API view joined with the plugin's attachment
 * records, relists, deletions), "what changed" (re-tune an attachment? does
 * the node plan change?), the node planner's input, adoption of the kernel's
 * uplink objects (in force / orphans / duplicates / stable handles), and the
 * uplink record's JSON. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>

#include "../../agent/agent.h"
#include "../../agent/node/trust.h"
#include "../../agent/reconcile/reconcile.h"
#include "../../agent/status.h"
#include "nl.h"
#include "t.h"

/* ---- scheduling ---- */

TEST(sched_debounce_window_starts_at_the_first_event)
{
	struct agent_sched s;

	sched_init(&s, 200, 0, 1000);
	CHECK_INT(sched_next(&s), -1); /* idle: no timer */
	sched_kick(&s, 1000);
	CHECK_INT(sched_next(&s), 1200);
	sched_kick(&s, 1150); /* a burst: later events do not push the pass back */
	sched_kick(&s, 1199);
	CHECK_INT(sched_next(&s), 1200);
	CHECK_INT(sched_take_due(&s, 1199), 0);
	CHECK_INT(sched_take_due(&s, 1200), SCHED_PASS);
	CHECK_INT(sched_next(&s), -1);
	CHECK_INT(sched_take_due(&s, 5000), 0); /* one pass per burst */
	sched_kick(&s, 5000);
	CHECK_INT(sched_next(&s), 5200);
}

TEST(sched_kick_now_and_zero_debounce)
{
	struct agent_sched s;

	sched_init(&s, 200, 0, 0);
	sched_kick(&s, 100);
	sched_kick_now(&s, 150); /* urgent (first LIST): earlier than the window */
	CHECK_INT(sched_next(&s), 150);
	sched_configure(&s, 0, 0, 150);
	sched_take_due(&s, 150);
	sched_kick(&s, 300);
	CHECK_INT(sched_next(&s), 300); /* debounceMs 0: at once */
}

TEST(sched_shorter_debounce_applies_to_pending_work)
{
	struct agent_sched s;

	sched_init(&s, 5000, 0, 0);
	sched_kick(&s, 0);
	CHECK_INT(sched_next(&s), 5000);
	sched_configure(&s, 100, 0, 10); /* config reload */
	CHECK_INT(sched_next(&s), 110);
}

TEST(sched_hold_retry_and_drift)
{
	struct agent_sched s;
	unsigned due;

	sched_init(&s, 200, 60, 0);
	CHECK_INT(sched_next(&s), 60000); /* drift repair armed */
	sched_set_hold(&s, 30000);
	sched_set_retry(&s, 2000);
	CHECK_INT(sched_next(&s), 2000);
	CHECK_INT(sched_take_due(&s, 2000), SCHED_RETRY);
	CHECK_INT(sched_next(&s), 30000);
	due = sched_take_due(&s, 70000); /* late: both at once */
	CHECK_INT(due, SCHED_HOLD | SCHED_DRIFT);
	CHECK_INT(sched_next(&s), 130000); /* a period after now, no catch-up */
	sched_configure(&s, 200, 0, 70000);
	CHECK_INT(sched_next(&s), -1); /* drift off */
}

TEST(sched_backoff)
{
	static const struct {
		unsigned n;
		int64_t ms;
	} cases[] = {{1, 1000}, {2, 2000}, {3, 4000}, {9, 256000}, {10, 300000}, {40, 300000}};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		CHECK_INT(sched_backoff_ms(cases[i].n, 0), cases[i].ms);
	CHECK_INT(sched_backoff_ms(1, 1000), 1250);    /* at most +25 % */
	CHECK_INT(sched_backoff_ms(10, 5000), 375000); /* jitter clamped to 1000 per mille */
}

/* ---- pod cache ---- */

static struct profile_set profiles;

static void setup(void)
{
	profile_set_builtin(&profiles);
}

static struct kube_pod kpod(const char *ns, const char *name, const char *uid, const char *workload, const char *ip)
{
	struct kube_pod p;

	memset(&p, 0, sizeof(p));
	str_copy(p.namespace_, sizeof(p.namespace_), ns);
	str_copy(p.name, sizeof(p.name), name);
	str_copy(p.uid, sizeof(p.uid), uid);
	str_copy(p.resource_version, sizeof(p.resource_version), "1");
	str_copy(p.node_name, sizeof(p.node_name), "n1");
	p.phase = KUBE_POD_PHASE_RUNNING;
	if (workload) {
		p.annotations = cJSON_CreateObject();
		cJSON_AddStringToObject(p.annotations, ANNOT_WORKLOAD, workload);
	}
	if (ip) {
		p.n_ips = 1;
		p.ips[0].family = AF_INET;
		inet_pton(AF_INET, ip, &p.ips[0].addr.v4);
	}
	return p;
}

static void kpod_annotate(struct kube_pod *p, const char *key, const char *val)
{
	if (!p->annotations)
		p->annotations = cJSON_CreateObject();
	cJSON_DeleteItemFromObjectCaseSensitive(p->annotations, key);
	if (val)
		cJSON_AddStringToObject(p->annotations, key, val);
}

static struct agent_attach attachment(const char *cid, const char *ns, const char *name, const char *uid,
                                      enum workload_class c, const char *profile, const char *ip)
{
	struct agent_attach a;

	memset(&a, 0, sizeof(a));
	str_copy(a.container_id, sizeof(a.container_id), cid);
	str_copy(a.ifname, sizeof(a.ifname), "eth0");
	str_copy(a.pod_namespace, sizeof(a.pod_namespace), ns);
	str_copy(a.pod_name, sizeof(a.pod_name), name);
	str_copy(a.pod_uid, sizeof(a.pod_uid), uid);
	a.class = c;
	str_copy(a.profile, sizeof(a.profile), profile);
	if (ip) {
		a.n_ips = 1;
		a.ips[0].family = AF_INET;
		inet_pton(AF_INET, ip, a.ips[0].addr);
	}
	a.seen = true;
	return a;
}

TEST(cache_what_changed)
{
	struct pod_cache c;
	struct kube_pod p = kpod("ns", "web", "u1", "inference", "10.0.0.5");
	struct agent_pod *e;
	unsigned ch;

	setup();
	pod_cache_init(&c);
	e = pod_cache_api_upsert(&c, &p, &profiles, &ch);
	CHECK(e != NULL);
	CHECK_INT(ch, POD_CHANGED_NEW | POD_CHANGED_NODE | POD_CHANGED_TUNING);
	CHECK_INT(e->want.class, CLASS_INFERENCE);
	CHECK_STR(e->want.profile, "inference");
	CHECK(e->dirty);
	e->dirty = false;

	/* the same object again (a resync or a label change): nothing */
	pod_cache_api_upsert(&c, &p, &profiles, &ch);
	CHECK_INT(ch, 0);
	CHECK(!e->dirty);

	/* IPs: only the node plan */
	inet_pton(AF_INET, "10.0.0.6", &p.ips[0].addr.v4);
	pod_cache_api_upsert(&c, &p, &profiles, &ch);
	CHECK_INT(ch, POD_CHANGED_NODE);
	CHECK(!e->dirty);

	/* a bandwidth annotation: re-tune and node (egress is a weight) */
	kpod_annotate(&p, ANNOT_EGRESS_BW, "10M");
	pod_cache_api_upsert(&c, &p, &profiles, &ch);
	CHECK_INT(ch, POD_CHANGED_TUNING | POD_CHANGED_NODE);
	CHECK_INT(e->want.egress_bps, 10000000);
	CHECK(e->dirty);

	/* class change */
	kpod_annotate(&p, ANNOT_WORKLOAD, "training");
	pod_cache_api_upsert(&c, &p, &profiles, &ch);
	CHECK(ch & POD_CHANGED_TUNING);
	CHECK_STR(e->want.profile, "training");

	/* a profile of the class */
	kpod_annotate(&p, ANNOT_PROFILE, "training-dctcp");
	pod_cache_api_upsert(&c, &p, &profiles, &ch);
	CHECK(ch & POD_CHANGED_TUNING);
	CHECK_STR(e->want.profile, "training-dctcp");
	CHECK(e->want.ce_marking);

	/* an invalid value: class default + a warning to post once */
	kpod_annotate(&p, ANNOT_PROFILE, NULL);
	kpod_annotate(&p, ANNOT_WORKLOAD, "batch");
	pod_cache_api_upsert(&c, &p, &profiles, &ch);
	CHECK(ch & POD_CHANGED_INVALID);
	CHECK_INT(e->want.class, CLASS_DEFAULT);
	CHECK_CONTAINS(e->want.invalid, "batch");
	str_copy(e->invalid_warned, sizeof(e->invalid_warned), e->want.invalid);
	pod_cache_api_upsert(&c, &p, &profiles, &ch);
	CHECK(!(ch & POD_CHANGED_INVALID));

	/* finished pods leave the node plan */
	p.phase = KUBE_POD_PHASE_SUCCEEDED;
	pod_cache_api_upsert(&c, &p, &profiles, &ch);
	CHECK(ch & POD_CHANGED_NODE);
	CHECK(!pod_counts_for_node(e, true));

	kube_pod_done(&p);
	pod_cache_done(&c);
}

TEST(cache_join_by_uid_and_by_name)
{
	struct pod_cache c;
	struct agent_attach a1 = attachment("c1", "ns", "a", "u-a", CLASS_DEFAULT, "default", "10.0.0.1");
	struct agent_attach a2 = attachment("c2", "ns", "b", "", CLASS_INFERENCE, "inference", "10.0.0.2");
	struct kube_pod pa = kpod("ns", "a", "u-a", "training", "10.0.0.1");
	struct kube_pod pb = kpod("ns", "b", "u-b", "inference", NULL);
	struct agent_pod *e;
	bool is_new;
	unsigned ch;

	setup();
	pod_cache_init(&c);
	/* the plugin's records arrive before the API (agent restart, API down) */
	CHECK(pod_cache_attach_upsert(&c, &a1, &is_new) != NULL);
	CHECK(is_new);
	CHECK(pod_cache_attach_upsert(&c, &a2, &is_new) != NULL);
	CHECK_INT(c.n, 2);
	CHECK(pod_cache_find(&c, "u-a") != NULL);
	CHECK(pod_cache_find(&c, "plugin:ns/b") != NULL);
	/* not synced with the API: plugin-only pods count, with their recorded class */
	e = pod_cache_find(&c, "plugin:ns/b");
	CHECK(pod_counts_for_node(e, false));
	CHECK(!pod_counts_for_node(e, true));
	CHECK_INT(pod_node_class(e), CLASS_INFERENCE);
	CHECK(!pod_attach_needs_retune(e, &e->att[0])); /* the API is the truth; none yet */

	/* the API view joins by UID ... */
	e = pod_cache_api_upsert(&c, &pa, &profiles, &ch);
	CHECK_INT(e->n_att, 1);
	CHECK(ch & POD_CHANGED_TUNING);
	CHECK(pod_attach_needs_retune(e, &e->att[0])); /* recorded default, wants training */
	/* ... and by namespace/name for records without a UID */
	e = pod_cache_api_upsert(&c, &pb, &profiles, &ch);
	CHECK_INT(e->n_att, 1);
	CHECK_STR(e->key, "u-b");
	CHECK(pod_cache_find(&c, "plugin:ns/b") == NULL);
	CHECK_INT(c.n, 2);
	CHECK(!pod_attach_needs_retune(e, &e->att[0])); /* recorded inference = wanted */
	CHECK(pod_cache_lookup(&c, "ns", "b", NULL) == e);
	CHECK(pod_cache_lookup(&c, "ns", "b", "u-b") == e);

	/* a failed record is re-tried */
	e->att[0].failed = true;
	CHECK(pod_attach_needs_retune(e, &e->att[0]));
	e->att[0].failed = false;

	/* a second interface of the same pod */
	a2 = attachment("c2", "ns", "b", "u-b", CLASS_INFERENCE, "inference", "10.0.0.2");
	str_copy(a2.ifname, sizeof(a2.ifname), "net1");
	pod_cache_attach_upsert(&c, &a2, &is_new);
	CHECK(is_new);
	CHECK_INT(e->n_att, 2);

	kube_pod_done(&pa);
	kube_pod_done(&pb);
	pod_cache_done(&c);
}

TEST(cache_relist_delete_and_gc)
{
	struct pod_cache c;
	struct kube_pod p1 = kpod("ns", "a", "u1", "training", "10.0.0.1");
	struct kube_pod p2 = kpod("ns", "b", "u2", "inference", "10.0.0.2");
	struct agent_attach a2 = attachment("c2", "ns", "b", "u2", CLASS_INFERENCE, "inference", "10.0.0.2");
	struct agent_pod *e;
	bool is_new, found;
	unsigned ch;

	setup();
	pod_cache_init(&c);
	pod_cache_api_upsert(&c, &p1, &profiles, &ch);
	pod_cache_api_upsert(&c, &p2, &profiles, &ch);
	pod_cache_attach_upsert(&c, &a2, &is_new);
	CHECK_INT(c.n, 2);

	/* a relist that delivers only p1: p2's API view goes, its record stays */
	pod_cache_list_begin(&c);
	pod_cache_api_upsert(&c, &p1, &profiles, &ch);
	CHECK_INT(ch, 0);
	CHECK_INT(pod_cache_list_end(&c), 1);
	e = pod_cache_find(&c, "u2");
	CHECK(e != NULL && !e->in_api && e->n_att == 1);
	CHECK(!pod_counts_for_node(e, true)); /* deleted in the API: not counted any more */

	/* DEL removes the record: the entry is gone */
	pod_cache_attach_remove(&c, "c2", "eth0", &found);
	CHECK(found);
	CHECK(pod_cache_find(&c, "u2") == NULL);
	pod_cache_attach_remove(&c, "c2", "eth0", &found);
	CHECK(!found);

	/* DELETED without records: gone at once */
	CHECK(pod_cache_api_delete(&c, "u1"));
	CHECK_INT(c.n, 0);
	CHECK(!pod_cache_api_delete(&c, "u1"));

	/* a state dir rescan sweeps records that vanished */
	pod_cache_attach_upsert(&c, &a2, &is_new);
	a2 = attachment("c3", "ns", "c", "u3", CLASS_TRAINING, "training", NULL);
	pod_cache_attach_upsert(&c, &a2, &is_new);
	pod_cache_attach_mark(&c);
	a2 = attachment("c3", "ns", "c", "u3", CLASS_TRAINING, "training", NULL);
	pod_cache_attach_upsert(&c, &a2, &is_new);
	CHECK(!is_new);
	CHECK_INT(pod_cache_attach_sweep(&c), 1);
	CHECK_INT(c.n, 1);
	CHECK(pod_cache_find(&c, "u3") != NULL);

	kube_pod_done(&p1);
	kube_pod_done(&p2);
	pod_cache_done(&c);
}

TEST(cache_recreated_pod_is_another_pod)
{
	struct pod_cache c;
	struct kube_pod p = kpod("ns", "a", "u-new", "training", NULL);
	struct agent_attach old = attachment("c-old", "ns", "a", "u-old", CLASS_TRAINING, "training", "10.0.0.9");
	bool is_new;
	unsigned ch;

	setup();
	pod_cache_init(&c);
	pod_cache_api_upsert(&c, &p, &profiles, &ch);
	pod_cache_attach_upsert(&c, &old, &is_new);
	/* same name, another UID: the record belongs to the old incarnation */
	CHECK_INT(pod_cache_find(&c, "u-new")->n_att, 0);
	CHECK(pod_cache_find(&c, "u-old") != NULL);
	kube_pod_done(&p);
	pod_cache_done(&c);
}

TEST(node_pods_input)
{
	struct pod_cache c;
	struct kube_pod p1 = kpod("ns", "a", "u1", "training", NULL); /* no podIPs yet */
	struct kube_pod p2 = kpod("ns", "b", "u2", "inference", "10.0.0.2");
	struct kube_pod p3 = kpod("ns", "h", "u3", "inference", "192.168.1.1");
	struct agent_attach a1 = attachment("c1", "ns", "a", "u1", CLASS_TRAINING, "training", "10.0.0.1");
	struct node_pod *np = NULL;
	unsigned n = 0, ch;
	bool is_new;

	setup();
	pod_cache_init(&c);
	p3.host_network = true;
	kpod_annotate(&p1, "nvidia.com/x", "1");
	p1.gpus = 4;
	pod_cache_api_upsert(&c, &p1, &profiles, &ch);
	pod_cache_api_upsert(&c, &p2, &profiles, &ch);
	pod_cache_api_upsert(&c, &p3, &profiles, &ch);
	pod_cache_attach_upsert(&c, &a1, &is_new);
	CHECK_INT(pod_cache_node_pods(&c, true, &np, &n), 0);
	CHECK_INT(n, 2); /* host-network pods are the node's own addresses */
	CHECK_STR(np[0].uid, "u1");
	CHECK_INT(np[0].class, CLASS_TRAINING);
	CHECK_INT(np[0].gpus, 4);
	CHECK_INT(np[0].n_ips, 1); /* from the plugin's record until the API has them */
	CHECK_INT(np[0].ips[0].addr[3], 1);
	CHECK_STR(np[1].uid, "u2");
	CHECK_INT(np[1].ips[0].addr[3], 2);
	free(np);
	kube_pod_done(&p1);
	kube_pod_done(&p2);
	kube_pod_done(&p3);
	pod_cache_done(&c);
}

TEST(rewant_after_config_reload)
{
	struct pod_cache c;
	struct kube_pod p = kpod("ns", "a", "u1", "inference", NULL);
	struct profile_set custom;
	cJSON *prof = cJSON_Parse("{\"inference-strict\": {\"class\": \"inference\", \"targetUs\": 300}}");
	struct agent_pod *e;
	unsigned ch;

	setup();
	pod_cache_init(&c);
	kpod_annotate(&p, ANNOT_PROFILE, "my-inference");
	e = pod_cache_api_upsert(&c, &p, &profiles, &ch);
	CHECK_STR(e->want.profile, "inference"); /* unknown profile: the class default */
	e->dirty = false;
	CHECK_INT(pod_cache_rewant(&c, &profiles), 0);
	custom = profiles;
	cJSON_Delete(prof);
	prof = cJSON_Parse("{\"my-inference\": {\"class\": \"inference\", \"targetUs\": 300}}");
	CHECK_INT(profile_set_merge_json(&custom, prof, NULL), 0);
	CHECK_INT(pod_cache_rewant(&c, &custom), 1);
	CHECK_STR(e->want.profile, "my-inference");
	CHECK(e->dirty);
	cJSON_Delete(prof);
	kube_pod_done(&p);
	pod_cache_done(&c);
}

/* ---- adoption ---- */

static struct node_pod npod(const char *uid, enum workload_class c, const char *ip)
{
	struct node_pod p;

	memset(&p, 0, sizeof(p));
	str_copy(p.uid, sizeof(p.uid), uid);
	str_copy(p.namespace_, sizeof(p.namespace_), "ns");
	str_copy(p.name, sizeof(p.name), uid);
	p.class = c;
	p.n_ips = 1;
	p.ips[0].family = AF_INET;
	inet_pton(AF_INET, ip, p.ips[0].addr);
	return p;
}

static void dump_add(struct tc_dump_list *d, const struct tc_spec *s, const char *kind)
{
	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 16;
		d->tc = realloc(d->tc, d->cap * sizeof(*d->tc));
		d->kind_name = realloc(d->kind_name, d->cap * sizeof(*d->kind_name));
	}
	d->tc[d->n] = *s;
	str_copy(d->kind_name[d->n], sizeof(d->kind_name[0]), kind);
	d->n++;
}

static const char *kind_of(const struct tc_spec *s)
{
	return tc_kind_get(s->kind)->name;
}

/* What the kernel reports for a plan's effective (chosen) alternatives:
 * filters with the htid the kernel assigns (800:). */
static void dump_of_plan(const struct plan *p, int chosen, struct tc_dump_list *d)
{
	for (unsigned i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		int a = chosen < (int)it->n_alt ? chosen : (int)it->n_alt - 1;
		struct tc_spec s = it->tc[it->tc[0].type == TC_QDISC && it->tc[0].parent != TC_H_ROOT ? a : 0];

		if (s.type == TC_FILTER && s.kind == TC_KIND_U32)
			s.handle |= 0x80000000u; /* u32 keys live in hash table 800: */
		if (s.type == TC_CLASS && s.parent == 0x10000u)
			s.parent = TC_H_ROOT; /* the kernel reports the top class as root */
		dump_add(d, &s, kind_of(&s));
	}
}

static void plan_mixed(const struct node_pod *pods, unsigned n, const struct plan *prev, struct plan *ret)
{
	struct node_config cfg;
	struct uplink_facts up = {.ifname = "up0", .speed_bps = 0, .is_virtual = true, .mtu = 1500};
	struct plan_caps caps = {0};
	struct error e = {0};

	node_config_defaults(&cfg);
	cfg.uplink_rate_bps = 500000000;
	cfg.downlink = false; /* the uplink's adoption; the download tree's is below */
	plan_caps_mark_missing(&caps, TC_KIND_FQ);
	plan_caps_mark_missing(&caps, TC_KIND_FQ_CODEL);
	CHECK_INT(node_plan(pods, n, &cfg, &up, &caps, MODE_MIXED, prev, ret, NULL, &e), 0);
}

/* The node plan holds the uplink's and the ifb's items, whose tc handles
 * overlap (htb 1: on both): each device's dump adopts only its items. */
TEST(adopt_per_device_with_the_download_tree)
{
	struct node_pod pods[] = {npod("u1", CLASS_TRAINING, "10.0.0.1"), npod("u2", CLASS_INFERENCE, "10.0.0.2")};
	struct uplink_facts up = {.ifname = "up0", .is_virtual = true, .mtu = 1500, .ifb_ifindex = 7};
	struct plan plan = {0}, ifb_only = {0};
	struct tc_dump_list d = {0};
	struct plan_caps caps = {0};
	struct node_config cfg;
	struct error e = {0};
	unsigned *orph = NULL, n_orph = 9, n_ifb = 0, n_up = 0;

	node_config_defaults(&cfg);
	cfg.uplink_rate_bps = 500000000;
	plan_caps_mark_missing(&caps, TC_KIND_FQ);
	plan_caps_mark_missing(&caps, TC_KIND_FQ_CODEL);
	CHECK_INT(node_plan(pods, 2, &cfg, &up, &caps, MODE_MIXED, NULL, &plan, NULL, &e), 0);
	ifb_only.items = calloc(plan.n, sizeof(*ifb_only.items));
	CHECK(ifb_only.items != NULL);
	if (!ifb_only.items)
		return;
	for (unsigned i = 0; i < plan.n; i++)
		if (plan.items[i].dev == DEV_IFB)
			ifb_only.items[ifb_only.n++] = plan.items[i];
		else
			n_up++;
	CHECK(ifb_only.n >= 8 && n_up >= 8);
	/* the ifb's dump: every ifb item in force, no uplink item */
	dump_of_plan(&ifb_only, 1, &d);
	CHECK_INT(downlink_adopt_match_dev(&plan, DEV_IFB, &d, true, &orph, &n_orph), (int)ifb_only.n);
	CHECK_INT(n_orph, 0);
	for (unsigned i = 0; i < plan.n; i++) {
		if (plan.items[i].dev == DEV_IFB) {
			CHECK(plan.items[i].status != ITEM_PENDING);
			n_ifb++;
		} else {
			CHECK_INT(plan.items[i].status, ITEM_PENDING);
		}
	}
	CHECK_INT(n_ifb, ifb_only.n);
	free(orph);
	orph = NULL;
	/* the same objects seen on the uplink are not the uplink items' (only
	 * the uplink tree is matched there: its root 1: is found, the rest
	 * differs or is missing) */
	CHECK(downlink_adopt_match_dev(&plan, DEV_UPLINK, &d, true, &orph, &n_orph) < (int)n_up);
	CHECK_INT(plan.items[0].dev, DEV_UPLINK);
	free(orph);
	tc_dump_list_free(&d);
	plan_free(&ifb_only);
	plan_free(&plan);
}

TEST(adopt_kernel_that_matches)
{
	struct node_pod pods[] = {npod("u1", CLASS_TRAINING, "10.0.0.1"), npod("u2", CLASS_INFERENCE, "10.0.0.2")};
	struct plan plan = {0};
	struct tc_dump_list d = {0};
	unsigned *orph = NULL, n_orph = 9;

	plan_mixed(pods, 2, NULL, &plan);
	dump_of_plan(&plan, 0, &d);
	CHECK_INT(uplink_adopt_match(&plan, &d, true, &orph, &n_orph), (int)plan.n);
	CHECK_INT(n_orph, 0);
	for (unsigned i = 0; i < plan.n; i++)
		CHECK(plan.items[i].status == ITEM_APPLIED);
	free(orph);
	plan_free(&plan);
	tc_dump_list_free(&d);
}

/* A BPF program attached under our filter's name but with another tag
 * (another version's code: the agent knows its own programs' tags) is not
 * in force, so the delta attaches this version's; the same tag is. */
TEST(adopt_bpf_program_by_tag)
{
	struct node_pod pods[] = {npod("u1", CLASS_TRAINING, "10.0.0.1"), npod("u2", CLASS_INFERENCE, "10.0.0.2")};
	static const uint8_t ours[TC_BPF_TAG_LEN] = {1, 2, 3, 4, 5, 6, 7, 8}, old[TC_BPF_TAG_LEN] = {9, 9, 9};
	struct plan plan = {0};
	unsigned n_bpf = 0;

	plan_mixed(pods, 2, NULL, &plan);
	for (int version = 0; version < 2; version++) {
		struct tc_dump_list d = {0};
		unsigned *orph = NULL, n_orph = 9;

		for (unsigned i = 0; i < plan.n; i++)
			if (plan.items[i].type == ITEM_TC && plan.items[i].tc[0].kind == TC_KIND_BPF)
				for (unsigned a = 0; a < plan.items[i].n_alt; a++) {
					memcpy(plan.items[i].tc[a].u.bpf.tag, ours, TC_BPF_TAG_LEN);
					plan.items[i].tc[a].u.bpf.tag_set = true;
				}
		dump_of_plan(&plan, 0, &d);
		for (unsigned i = 0; i < d.n; i++)
			if (d.tc[i].kind == TC_KIND_BPF)
				memcpy(d.tc[i].u.bpf.tag, version ? ours : old, TC_BPF_TAG_LEN);
		CHECK_INT(uplink_adopt_match(&plan, &d, true, &orph, &n_orph), (int)plan.n - (version ? 0 : 1));
		for (unsigned i = 0; i < plan.n; i++) {
			if (plan.items[i].type != ITEM_TC || plan.items[i].tc[0].kind != TC_KIND_BPF)
				continue;
			n_bpf++;
			CHECK_INT(plan.items[i].status, version ? ITEM_APPLIED : ITEM_PENDING);
		}
		free(orph);
		tc_dump_list_free(&d);
	}
	CHECK_INT(n_bpf, 2); /* the classifier, once per version */
	plan_free(&plan);
}

TEST(adopt_orphans_duplicates_and_differences)
{
	struct node_pod pods[] = {npod("u1", CLASS_TRAINING, "10.0.0.1"), npod("u2", CLASS_INFERENCE, "10.0.0.2")};
	struct plan plan = {0};
	struct tc_dump_list d = {0};
	struct tc_spec s;
	unsigned *orph = NULL, n_orph = 0;
	const struct plan_item *it;
	int found;

	plan_mixed(pods, 2, NULL, &plan);
	dump_of_plan(&plan, 0, &d);
	/* a filter of a pod that left, at our prio (crash before its removal) */
	it = plan_find_const(&plan, "uplink.class.training");
	s = (struct tc_spec){.type = TC_FILTER,
	                     .kind = TC_KIND_U32,
	                     .parent = 0x10000u,
	                     .handle = 0x80000123u,
	                     .prio = NODE_FILTER_PRIO_SRC_V4,
	                     .protocol = ETH_P_IP};
	s.u.u32 = (struct tc_u32){.match = U32_MATCH_SRC,
	                          .family = AF_INET,
	                          .addr = {10, 0, 0, 99},
	                          .prefix_len = 32,
	                          .classid = 0x10030u,
	                          .dscp = -1};
	dump_add(&d, &s, "u32");
	/* a duplicate of u1's filter under another node id (crash mid-update) */
	s.handle = 0x80000124u;
	s.u.u32.addr[3] = 1;
	dump_add(&d, &s, "u32");
	/* a foreign filter at another prio: not ours */
	s.handle = 0x80000125u;
	s.prio = 5;
	dump_add(&d, &s, "u32");
	/* a class of ours the plan does not have */
	s = (struct tc_spec){.type = TC_CLASS, .kind = TC_KIND_HTB_CLASS, .parent = 0x10001u, .handle = 0x10040u};
	dump_add(&d, &s, "htb");
	/* the training class differs (another rate): re-applied, not adopted */
	for (unsigned i = 0; i < d.n; i++)
		if (d.tc[i].type == TC_CLASS && d.tc[i].handle == it->tc[0].handle)
			d.tc[i].u.htb_class.rate_bps /= 2;

	found = uplink_adopt_match(&plan, &d, true, &orph, &n_orph);
	CHECK_INT(found, (int)plan.n - 1);
	CHECK(plan_find_const(&plan, "uplink.class.training")->status == ITEM_PENDING);
	CHECK(plan_find_const(&plan, "uplink.leaf.training")->status == ITEM_APPLIED);
	CHECK_INT(n_orph, 3); /* 2 filters, then the class */
	CHECK_INT(d.tc[orph[0]].handle, 0x80000123u);
	CHECK_INT(d.tc[orph[1]].handle, 0x80000124u);
	CHECK_INT(d.tc[orph[2]].handle, 0x10040u);
	free(orph);

	/* a root that is not ours: nothing is an orphan */
	CHECK(uplink_adopt_match(&plan, &d, false, &orph, &n_orph) >= 0);
	CHECK_INT(n_orph, 0);
	free(orph);
	plan_free(&plan);
	tc_dump_list_free(&d);
}

TEST(adopt_children_of_a_missing_parent_are_not_in_force)
{
	struct node_pod pods[] = {npod("u1", CLASS_TRAINING, "10.0.0.1"), npod("u2", CLASS_INFERENCE, "10.0.0.2")};
	struct plan plan = {0};
	struct tc_dump_list d = {0};
	unsigned *orph = NULL, n_orph;

	plan_mixed(pods, 2, NULL, &plan);
	dump_of_plan(&plan, 0, &d);
	/* the root is another qdisc at 1: (someone replaced it) */
	for (unsigned i = 0; i < d.n; i++)
		if (d.tc[i].type == TC_QDISC && d.tc[i].parent == TC_H_ROOT)
			d.tc[i].kind = TC_KIND_PFIFO;
	/* what hangs under it is not in force; the clsact hook and the
	 * classifier on it are not under the root */
	CHECK_INT(uplink_adopt_match(&plan, &d, true, &orph, &n_orph), 2);
	for (unsigned i = 0; i < plan.n; i++)
		CHECK_INT(plan.items[i].status,
		          streq(plan.items[i].id, "uplink.clsact") || streq(plan.items[i].id, "uplink.classifier")
		                  ? ITEM_APPLIED
		                  : ITEM_PENDING);
	free(orph);
	plan_free(&plan);
	tc_dump_list_free(&d);
}

TEST(adopt_keeps_kernel_filter_handles)
{
	struct node_pod pods[] = {npod("u1", CLASS_TRAINING, "10.0.0.1"), npod("u2", CLASS_INFERENCE, "10.0.0.2")};
	struct plan plan = {0}, prev = {0}, again = {0};
	struct tc_dump_list d = {0};
	unsigned *orph = NULL, n_orph;
	char id[PLAN_ID_MAX];

	plan_mixed(pods, 2, NULL, &plan);
	dump_of_plan(&plan, 0, &d);
	/* the kernel holds u1's filter under another node id (an older
	 * numbering): the re-plan keeps it, so nothing is re-created */
	node_pod_item_id("u1", 0, id, sizeof(id));
	for (unsigned i = 0; i < d.n; i++)
		if (d.tc[i].type == TC_FILTER && d.tc[i].u.u32.addr[3] == 1)
			d.tc[i].handle = 0x80000777u;
	CHECK_INT(uplink_prev_from_dump(&d, pods, 2, &prev), 0);
	CHECK_INT(prev.n, 2);
	CHECK_INT(plan_find_const(&prev, id)->tc[0].handle, 0x777);
	plan_mixed(pods, 2, &prev, &again);
	CHECK_INT(plan_find_const(&again, id)->tc[0].handle, 0x777);
	CHECK_INT(uplink_adopt_match(&again, &d, true, &orph, &n_orph), (int)again.n);
	CHECK_INT(n_orph, 0);
	free(orph);
	plan_free(&plan);
	plan_free(&prev);
	plan_free(&again);
	tc_dump_list_free(&d);
}

/* ---- the uplink record ---- */

TEST(uplink_record_json_roundtrip)
{
	struct uplink_record r = {.ifindex = 7,
	                          .handle = 0x50000u,
	                          .is_default = false,
	                          .options_len = 4,
	                          .options = {1, 2, 0xab, 0xff},
	                          .recorded_unix = 1700000000,
	                          .mode = MODE_MIXED,
	                          .mode_since_unix = 1700000100},
	                     back;
	struct error e = {0};
	cJSON *j;

	str_copy(r.ifname, sizeof(r.ifname), "eth0");
	str_copy(r.kind, sizeof(r.kind), "pfifo");
	str_copy(r.rendered, sizeof(r.rendered), "qdisc add dev eth0 root handle 5: pfifo limit 77");
	j = uplink_record_to_json(&r);
	CHECK(j != NULL);
	CHECK_INT(uplink_record_from_json(j, &back, &e), 0);
	CHECK_STR(back.ifname, "eth0");
	CHECK_STR(back.kind, "pfifo");
	CHECK_INT(back.handle, 0x50000u);
	CHECK(!back.is_default);
	CHECK_INT(back.options_len, 4);
	CHECK_INT(back.options[2], 0xab);
	CHECK_INT(back.mode, MODE_MIXED);
	CHECK_INT(back.mode_since_unix, 1700000100);
	cJSON_Delete(j);

	j = cJSON_Parse("{\"version\":1,\"ifname\":\"eth0\",\"ifindex\":2,\"kind\":\"x\",\"handleRaw\":0,"
	                "\"default\":true,\"options\":\"abc\"}");
	CHECK(uplink_record_from_json(j, &back, &e) < 0);
	CHECK_CONTAINS(e.msg, "options");
	cJSON_Delete(j);
	j = cJSON_Parse("{\"version\":2}");
	CHECK(uplink_record_from_json(j, &back, &e) < 0);
	CHECK_CONTAINS(e.msg, "version");
	cJSON_Delete(j);
}

/* Events' log lines: a specific msg per reason; a warning repeated for the
 * same pod with the same text is logged at warn once per
 * AGENT_EVENT_REPEAT_MS, at debug in between; another pod, reason or text
 * is warned about at once. */
TEST(event_log_msg_and_repeats)
{
	struct agent *ag = calloc(1, sizeof(*ag));
	struct agent_pod a = {0}, b = {0};

	CHECK(ag != NULL);
	if (!ag)
		return;
	str_copy(a.namespace_, sizeof(a.namespace_), "default");
	str_copy(a.name, sizeof(a.name), "wl9-bi");
	str_copy(b.namespace_, sizeof(b.namespace_), "default");
	str_copy(b.name, sizeof(b.name), "wl9-tr");
	CHECK_STR(event_log_msg("TuneDegraded"), "pod tuned with fallbacks");
	CHECK_STR(event_log_msg("Tuned"), "pod tuned");
	CHECK_STR(event_log_msg("UplinkForeignTree"), "uplink condition");
	CHECK_INT(event_log_level(ag, &a, false, "Tuned", "class inference"), LOG_LVL_INFO);
	CHECK_INT(event_log_level(ag, &a, false, "Tuned", "class inference"), LOG_LVL_INFO);
	CHECK_INT(event_log_level(ag, &a, true, "TuneDegraded", "fell back: egress.root"), LOG_LVL_WARN);
	CHECK_INT(event_log_level(ag, &a, true, "TuneDegraded", "fell back: egress.root"), LOG_LVL_DEBUG);
	CHECK_INT(event_log_level(ag, &a, true, "TuneDegraded", "fell back: egress.root"), LOG_LVL_DEBUG);
	CHECK_INT(event_log_level(ag, &b, true, "TuneDegraded", "fell back: egress.root"), LOG_LVL_WARN);
	CHECK_INT(event_log_level(ag, &a, true, "TuneDegraded", "fell back: sysctl.cc"), LOG_LVL_WARN);
	/* after the window, warned again */
	for (size_t i = 0; i < AGENT_EVENT_SEEN_MAX; i++)
		ag->event_seen[i].at_ms -= AGENT_EVENT_REPEAT_MS;
	CHECK_INT(event_log_level(ag, &a, true, "TuneDegraded", "fell back: egress.root"), LOG_LVL_WARN);
	free(ag);
}
