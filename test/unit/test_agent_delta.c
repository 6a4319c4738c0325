/* test_agent_delta.c — the order the agent applies the node's delta in
 * (agent/reconcile/delta.c): added and changed items merged into plan order,
 * added ones flagged absent; and that order for a real delta of two node
 * plans (node_plan_delta). */
#include <string.h>
#include <sys/socket.h>

#include "../../agent/reconcile/delta.h"
#include "node.h"
#include "t.h"

/* "a3 c5 a7": the order as text, absent items "a", changed "c". */
static const char *order_text(const struct node_plan_delta *d)
{
	static char buf[512];
	unsigned idx[64], n;
	bool absent[64];
	size_t len = 0;

	memset(absent, 0xff, sizeof(absent)); /* not zeroed: every entry must be written */
	n = node_delta_apply_order(d, idx, absent);
	buf[0] = '\0';
	for (unsigned k = 0; k < n; k++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%c%u", k ? " " : "", absent[k] ? 'a' : 'c',
		                        idx[k]);
	return buf;
}

TEST(empty_delta_applies_nothing)
{
	struct node_plan_delta d = {0};

	CHECK_STR(order_text(&d), "");
}

TEST(only_added_or_only_changed_keep_their_order)
{
	unsigned added[] = {0, 2, 9}, changed[] = {1, 4};
	struct node_plan_delta a = {.n_added = 3, .added = added};
	struct node_plan_delta c = {.n_changed = 2, .changed = changed};

	CHECK_STR(order_text(&a), "a0 a2 a9");
	CHECK_STR(order_text(&c), "c1 c4");
}

TEST(added_and_changed_merge_in_plan_order)
{
	unsigned added[] = {0, 3, 4, 10}, changed[] = {1, 2, 5, 11, 12};
	struct node_plan_delta d = {.n_added = 4, .added = added, .n_changed = 5, .changed = changed};

	/* parents first: a root added before its changed classes, a filter
	 * added after the class it points to */
	CHECK_STR(order_text(&d), "a0 c1 c2 a3 a4 c5 a10 c11 c12");
}

TEST(removed_and_same_items_are_not_applied)
{
	unsigned removed[] = {0, 1, 2}, changed[] = {7};
	struct node_plan_delta d = {
	        .n_removed = 3, .removed = removed, .n_changed = 1, .changed = changed, .n_same = 5};

	CHECK_STR(order_text(&d), "c7");
}

static unsigned pod_ips(struct node_pod *p, const char *uid, enum workload_class cls, uint8_t last)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->uid, sizeof(p->uid), "%s", uid);
	p->class = cls;
	p->n_ips = 1;
	p->ips[0].family = AF_INET;
	p->ips[0].addr[0] = 10;
	p->ips[0].addr[3] = last;
	return 1;
}

TEST(a_new_pod_adds_its_filters_after_the_tree)
{
	struct node_config cfg;
	struct uplink_facts facts = {.speed_bps = 10000000000ull};
	struct plan_caps caps = {0};
	struct plan a = {0}, b = {0};
	struct node_plan_info info;
	struct node_plan_delta d = {0};
	struct node_pod pods[3];
	struct error e = {0};
	unsigned idx[256];
	bool absent[256];
	unsigned n;

	node_config_defaults(&cfg);
	pod_ips(&pods[0], "u-train", CLASS_TRAINING, 1);
	pod_ips(&pods[1], "u-inf", CLASS_INFERENCE, 2);
	pod_ips(&pods[2], "u-inf2", CLASS_INFERENCE, 3);
	CHECK_INT(node_plan(pods, 2, &cfg, &facts, &caps, MODE_MIXED, NULL, &a, &info, &e), 0);
	CHECK_INT(node_plan(pods, 3, &cfg, &facts, &caps, MODE_MIXED, &a, &b, &info, &e), 0);
	CHECK_INT(node_plan_delta(&a, &b, &d), 0);
	CHECK(d.n_added > 0);
	CHECK(d.n_added + d.n_changed < 256);
	n = node_delta_apply_order(&d, idx, absent);
	CHECK_INT(n, d.n_added + d.n_changed);
	for (unsigned k = 0; k < n; k++) {
		CHECK(idx[k] < b.n);
		if (k)
			CHECK(idx[k - 1] < idx[k]); /* plan order */
		/* changed items are in the old plan; added ones are absent */
		if (!absent[k])
			CHECK(plan_find_const(&a, b.items[idx[k]].id) != NULL);
	}
	node_plan_delta_free(&d);
	plan_free(&a);
	plan_free(&b);
}
