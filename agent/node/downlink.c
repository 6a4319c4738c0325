/* downlink.c — the download direction's own kernel state (downlink.h): the
 * ifb, its record, the ingress hook's ownership, and the per-device split of
 * adoption. The planning is node_plan()'s (down.* items), the applying the
 * node reconcile's. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_ether.h>
#include <linux/pkt_sched.h>
#include <sys/stat.h>

#include <netlink/route/link.h>

#include "file.h"
#include "agent.h"
#include "node/downlink.h"
#include "node/ifb.h"
#include "node/podside.h"
#include "nl.h"

#define RECORD_MAX_BYTES 4096

/* ---- the record ---- */

static void record_path(const char *state_dir, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/%s", state_dir, AGENT_DOWNLINK_RECORD);
	if (n < 0 || (size_t)n >= size)
		buf[0] = '\0';
}

static int record_save(const char *state_dir, const char *uplink, struct error *err)
{
	char path[AGENT_PATH_MAX];
	cJSON *j = cJSON_CreateObject();

	record_path(state_dir, path, sizeof(path));
	if (j && (!cJSON_AddNumberToObject(j, "version", 1) || !cJSON_AddStringToObject(j, "ifb", PLAN_IFB_NAME) ||
	          !cJSON_AddStringToObject(j, "uplink", uplink) || !cJSON_AddStringToObject(j, "hook", "clsact"))) {
		cJSON_Delete(j);
		j = NULL;
	}
	return uplink_record_write_json(path, "downlink record", j, err);
}

/* -ENOENT when there is none */
static int record_load(const char *state_dir, char uplink[IFNAME_LEN], struct error *err)
{
	char path[AGENT_PATH_MAX];
	_cleanup_free_ char *buf = NULL;
	struct error e = {0};
	const cJSON *u;
	cJSON *j;
	size_t len = 0;
	int r;

	record_path(state_dir, path, sizeof(path));
	r = file_read_bounded(path, RECORD_MAX_BYTES, FILE_READ_NOFOLLOW, &buf, &len, NULL, &e);
	if (r == -ENOENT)
		return r;
	if (r < 0 && r != -EFBIG) {
		error_propagate(err, &e);
		error_prefix(err, "read %s", path);
		return r;
	}
	j = r < 0 ? NULL : cJSON_ParseWithLength(buf, len);
	u = j ? cJSON_GetObjectItemCaseSensitive(j, "uplink") : NULL;
	if (!u || !cJSON_IsString(u) || strlen(u->valuestring) >= IFNAME_LEN) {
		cJSON_Delete(j);
		return error_set(err, EINVAL, "%s: not a downlink record", path);
	}
	str_copy(uplink, IFNAME_LEN, u->valuestring);
	cJSON_Delete(j);
	return 0;
}

static int record_remove(const char *state_dir, struct error *err)
{
	char path[AGENT_PATH_MAX];

	record_path(state_dir, path, sizeof(path));
	return uplink_record_remove(path, err);
}

/* ---- the ingress hook ---- */

/* A hook aiqos did not create: an ingress qdisc, or a clsact unless the
 * uplink's record says aiqos made it (the egress classifier's). */
static int hook_present(struct nl_sock *sk, int ifindex, bool clsact_ours, bool *ret, struct error *err)
{
	struct tc_dump_list d = {0};
	int r = nl_tc_dump_alloc(sk, ifindex, 0, &d, err);

	if (r < 0)
		return r;
	*ret = false;
	for (unsigned i = 0; i < d.n; i++)
		if (d.tc[i].type == TC_QDISC && d.tc[i].parent == TC_H_CLSACT &&
		    !(clsact_ours && d.tc[i].kind == TC_KIND_CLSACT))
			*ret = true;
	tc_dump_list_free(&d);
	return 0;
}

/* Our filters at the ingress hook (node.h DOWNLOAD: down.classifier,
 * down.gate, down.redirect); the clsact with them when nothing else is on
 * it (the egress classifier, another tool's filters keep it). */
static int hook_release(struct nl_sock *sk, const char *uplink, struct error *err)
{
	struct link_info li;
	int r;

	if (!uplink[0] || nl_link_get(sk, uplink, 0, &li, NULL) < 0)
		return 0; /* the device is gone, and its hook with it */
	r = uplink_hooks_release(sk, li.ifindex, UPLINK_HOOK_INGRESS, false, err);
	return r == -ENODEV ? 0 : r;
}

/* ---- the agent's side ---- */

static void plan_drop_down(struct plan *p)
{
	unsigned k = 0;

	for (unsigned i = 0; i < p->n; i++)
		if (strncmp(p->items[i].id, "down.", 5) != 0)
			p->items[k++] = p->items[i];
	p->n = k;
}

int downlink_give_back(struct agent *ag, struct error *err)
{
	struct downlink *d = &ag->down;
	char uplink[IFNAME_LEN] = "";
	int r, q;

	plan_drop_down(&ag->in_force);
	if (d->have_record)
		str_copy(uplink, sizeof(uplink), d->uplink);
	else if (record_load(ag->state_dir, uplink, NULL) < 0)
		return 0; /* nothing of ours */
	/* the pods' redirects to the ifb first (podside.h); the hook shared
	 * with the egress classifier (or another tool) stays */
	(void)podside_sync(ag, 0, NULL);
	r = hook_release(ag->sk, uplink, err);
	q = ifb_delete(ag->sk, PLAN_IFB_NAME, r < 0 ? NULL : err);
	if (r < 0 || q < 0)
		return r < 0 ? r : q;
	log_msg(LOG_LVL_INFO, "download shaping removed", "uplink", uplink, "ifb", PLAN_IFB_NAME, (char *)NULL);
	d->have_record = false;
	d->ifb_ifindex = 0;
	d->uplink[0] = '\0';
	return record_remove(ag->state_dir, err);
}

int downlink_prepare(struct agent *ag, bool wanted, struct error *err)
{
	struct downlink *d = &ag->down;
	bool renewed = false;
	int r;

	ag->up.facts.ifb_ifindex = 0;
	ag->up.facts.ingress_foreign = false;
	d->foreign_hook = false;
	if (!d->have_record) {
		char uplink[IFNAME_LEN] = "";

		/* a record from an earlier run (restart: adopt; another uplink: give back) */
		if (record_load(ag->state_dir, uplink, NULL) == 0) {
			d->have_record = true;
			str_copy(d->uplink, sizeof(d->uplink), uplink);
		}
	}
	if (d->have_record && !streq(d->uplink, ag->up.ifname)) {
		r = downlink_give_back(ag, err);
		if (r < 0)
			return r;
	}
	if (!wanted) {
		if (d->have_record || ag->in_force.n)
			return downlink_give_back(ag, err);
		return 0;
	}
	if (!d->have_record) {
		bool present;

		r = hook_present(ag->sk, ag->up.ifindex, ag->up.have_record && !ag->up.record.clsact_before, &present,
		                 err);
		if (r < 0)
			return r;
		if (present) {
			/* never take over an ingress qdisc we did not create */
			d->foreign_hook = true;
			ag->up.facts.ingress_foreign = true;
			return 0;
		}
		r = record_save(ag->state_dir, ag->up.ifname, err);
		if (r < 0)
			return r; /* never change what we could not record */
		d->have_record = true;
		str_copy(d->uplink, sizeof(d->uplink), ag->up.ifname);
		log_msg(LOG_LVL_INFO, "download shaping recorded", "uplink", ag->up.ifname, "ifb", PLAN_IFB_NAME,
		        (char *)NULL);
	}
	r = ifb_ensure(ag->sk, PLAN_IFB_NAME, ag->up.facts.mtu, &d->ifb_ifindex, &renewed, err);
	if (r < 0)
		return r;
	if (renewed)
		ag->up_need_observe = true; /* it was deleted behind our back: its tree with it */
	ag->up.facts.ifb_ifindex = d->ifb_ifindex;
	return 0;
}

int downlink_cleanup(struct nl_sock *sk, const char *state_dir, struct error *err)
{
	char uplink[IFNAME_LEN] = "";
	int r = record_load(state_dir, uplink, err);

	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	r = hook_release(sk, uplink, err);
	if (r < 0)
		return r;
	r = ifb_delete(sk, PLAN_IFB_NAME, err);
	if (r < 0)
		return r;
	log_msg(LOG_LVL_INFO, "download shaping removed", "uplink", uplink, "ifb", PLAN_IFB_NAME, (char *)NULL);
	return record_remove(state_dir, err);
}

/* ---- adoption per device ---- */

int downlink_adopt_match_dev(struct plan *plan, enum plan_dev dev, const struct tc_dump_list *dump, bool root_is_ours,
                             unsigned **ret_orphans, unsigned *ret_n_orphans)
{
	_cleanup_free_ unsigned *map = calloc(plan->n ? plan->n : 1, sizeof(*map));
	struct plan sub = {0};
	int r;

	if (!map)
		return -ENOMEM;
	sub.items = calloc(plan->n ? plan->n : 1, sizeof(*sub.items));
	if (!sub.items)
		return -ENOMEM;
	sub.cap = plan->n ? plan->n : 1;
	for (unsigned i = 0; i < plan->n; i++)
		if (plan->items[i].dev == dev) {
			map[sub.n] = i;
			sub.items[sub.n++] = plan->items[i];
		}
	r = uplink_adopt_match(&sub, dump, root_is_ours, ret_orphans, ret_n_orphans);
	if (r >= 0)
		for (unsigned k = 0; k < sub.n; k++) {
			struct plan_item *it = &plan->items[map[k]];

			it->status = sub.items[k].status;
			it->chosen = sub.items[k].chosen;
			it->err = sub.items[k].err;
			it->unknown = sub.items[k].unknown;
		}
	plan_free(&sub);
	return r;
}

int downlink_delete_orphans(struct nl_sock *sk, const struct tc_dump_list *dump, const unsigned *orph, unsigned n,
                            const char *ifname, int ifindex, const char *what)
{
	char failed[64], deleted_msg[64];
	int deleted = 0;

	snprintf(failed, sizeof(failed), "cannot delete a stale %s object", what);
	snprintf(deleted_msg, sizeof(deleted_msg), "stale %s object deleted", what);
	for (unsigned i = 0; i < n; i++) {
		struct error e = {0};
		char line[TC_FORMAT_MAX];
		int r;

		tc_spec_format(&dump->tc[orph[i]], ifname, "delete", line, sizeof(line));
		r = nl_tc_delete(sk, ifindex, &dump->tc[orph[i]], &e);
		if (r < 0 && r != -ENOENT) {
			log_msg(LOG_LVL_WARN, failed, "object", line, "error", e.msg, (char *)NULL);
			continue;
		}
		log_msg(LOG_LVL_INFO, deleted_msg, "object", line, (char *)NULL);
		deleted++;
	}
	return deleted;
}

int downlink_observe_ifb(struct agent *ag, struct plan *plan, enum plan_dev dev, const char *ifname, int ifindex,
                         const char *what, struct error *err)
{
	_cleanup_free_ unsigned *orph = NULL;
	struct tc_dump_list dump = {0};
	unsigned n_orph = 0;
	int r, deleted;

	if (!ifindex)
		return 0;
	r = nl_tc_dump_alloc(ag->sk, ifindex, 0, &dump, err);
	if (r == -ENODEV) {
		error_clear(err);
		return 0; /* gone: its items stay pending, the next pass re-creates it */
	}
	if (r < 0)
		return r;
	/* the ifb is ours whole: its root and everything under it */
	r = downlink_adopt_match_dev(plan, dev, &dump, true, &orph, &n_orph);
	if (r < 0) {
		tc_dump_list_free(&dump);
		return error_set(err, -r, "match %s: %s", ifname, strerror(-r));
	}
	deleted = downlink_delete_orphans(ag->sk, &dump, orph, n_orph, ifname, ifindex, what);
	tc_dump_list_free(&dump);
	return deleted;
}

int downlink_observe(struct agent *ag, struct plan *plan, struct error *err)
{
	return downlink_observe_ifb(ag, plan, DEV_IFB, PLAN_IFB_NAME, ag->down.ifb_ifindex, "download", err);
}
