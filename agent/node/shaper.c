/* shaper.c — the gated upload tree's ifb, its record and its adoption
 * (shaper.h). The planning is node_plan()'s (SHAPE_HTB_IFB), the applying
 * the node reconcile's. */
#include <cjson/cJSON.h>
#include <linux/pkt_cls.h>

#include "agent.h"
#include "node/ifb.h"
#include "node/shaper.h"
#include "nl.h"

static void record_path(const char *state_dir, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/%s", state_dir, AGENT_SHAPER_RECORD);
	if (n < 0 || (size_t)n >= size)
		buf[0] = '\0';
}

static bool record_exists(const char *state_dir)
{
	char path[AGENT_PATH_MAX];

	record_path(state_dir, path, sizeof(path));
	return path[0] && access(path, F_OK) == 0;
}

static int record_save(const char *state_dir, struct error *err)
{
	char path[AGENT_PATH_MAX];
	cJSON *j = cJSON_CreateObject();

	record_path(state_dir, path, sizeof(path));
	if (j && (!cJSON_AddNumberToObject(j, "version", 1) || !cJSON_AddStringToObject(j, "ifb", PLAN_IFB_UP_NAME))) {
		cJSON_Delete(j);
		j = NULL;
	}
	return uplink_record_write_json(path, "shaper record", j, err);
}

static int record_remove(const char *state_dir, struct error *err)
{
	char path[AGENT_PATH_MAX];

	record_path(state_dir, path, sizeof(path));
	return uplink_record_remove(path, err);
}

int shaper_prepare(struct agent *ag, bool wanted, struct error *err)
{
	struct shaper *s = &ag->shaper;
	bool renewed = false;
	int r;

	s->wanted = wanted;
	ag->up.facts.ifb_up_ifindex = 0;
	ag->up.facts.ifb_up_failed = false;
	if (!wanted)
		return 0;
	if (!s->have_record && !record_exists(ag->state_dir)) {
		r = record_save(ag->state_dir, err);
		if (r < 0)
			goto failed; /* never create what we could not record */
		log_msg(LOG_LVL_INFO, "upload shaper recorded", "uplink", ag->up.ifname, "ifb", PLAN_IFB_UP_NAME,
		        (char *)NULL);
	}
	s->have_record = true;
	r = ifb_ensure(ag->sk, PLAN_IFB_UP_NAME, ag->up.facts.mtu, &s->ifb_ifindex, &renewed, err);
	if (r < 0)
		goto failed;
	if (renewed)
		ag->up_need_observe = true; /* it was deleted behind our back: its tree with it */
	ag->up.facts.ifb_up_ifindex = s->ifb_ifindex;
	return 0;
failed:
	ag->up.facts.ifb_up_failed = true;
	return r;
}

static bool in_force_uses_ifb(const struct plan *p)
{
	for (unsigned i = 0; i < p->n; i++)
		if (p->items[i].dev == DEV_IFB_UP || streq(p->items[i].id, "uplink.redirect"))
			return true;
	return false;
}

int shaper_settle(struct agent *ag, struct error *err)
{
	struct shaper *s = &ag->shaper;
	int r;

	if (s->wanted || in_force_uses_ifb(&ag->in_force))
		return 0;
	if (!s->have_record && !record_exists(ag->state_dir))
		return 0; /* nothing of ours */
	r = ifb_delete(ag->sk, PLAN_IFB_UP_NAME, err);
	if (r < 0)
		return r;
	log_msg(LOG_LVL_INFO, "upload shaper removed", "ifb", PLAN_IFB_UP_NAME, (char *)NULL);
	s->have_record = false;
	s->ifb_ifindex = 0;
	return record_remove(ag->state_dir, err);
}

int shaper_cleanup(struct nl_sock *sk, const char *state_dir, struct error *err)
{
	int r;

	if (!record_exists(state_dir))
		return 0;
	r = ifb_delete(sk, PLAN_IFB_UP_NAME, err);
	if (r < 0)
		return r;
	log_msg(LOG_LVL_INFO, "upload shaper removed", "ifb", PLAN_IFB_UP_NAME, (char *)NULL);
	return record_remove(state_dir, err);
}

int shaper_observe(struct agent *ag, struct plan *plan, struct error *err)
{
	return downlink_observe_ifb(ag, plan, DEV_IFB_UP, PLAN_IFB_UP_NAME, ag->shaper.ifb_ifindex, "upload shaper",
	                            err);
}
