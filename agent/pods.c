/* pods.c — the agent's pod cache: the API view of the pods on this node
 * (class, profile, limits, IPs, GPUs from the watch) joined with the plugin's
 * attachment records (which veth, which netns, what it was tuned with) by pod
 * UID, else namespace/name. Pure bookkeeping, no I/O: the "what changed"
 * decisions (re-tune an attachment? does the node plan change?) live here so
 * they can be tested without a kernel. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>

#include "agent.h"
#include "node/trust.h"
#include "pods.h"

static const char *const pod_status_names[_POD_STATUS_MAX] = {
        [POD_UNTUNED] = "untuned",
        [POD_TUNED] = "tuned",
        [POD_DEGRADED] = "degraded",
        [POD_FAILED] = "failed",
};

const char *pod_status_name(enum pod_status s)
{
	return s >= 0 && s < _POD_STATUS_MAX ? pod_status_names[s] : "?";
}

void pod_cache_init(struct pod_cache *c)
{
	memset(c, 0, sizeof(*c));
}

static void pod_free(struct agent_pod *p)
{
	if (!p)
		return;
	if (p->annotations)
		cJSON_Delete(p->annotations);
	free(p->att);
	free(p);
}

void pod_cache_done(struct pod_cache *c)
{
	for (unsigned i = 0; i < c->n; i++)
		pod_free(c->v[i]);
	free(c->v);
	pod_cache_init(c);
}

/* Index of key, or where it would go (*ret_found false). */
static unsigned pod_index(const struct pod_cache *c, const char *key, bool *ret_found)
{
	unsigned lo = 0, hi = c->n;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		int cmp = strcmp(c->v[mid]->key, key);

		if (cmp == 0) {
			*ret_found = true;
			return mid;
		}
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*ret_found = false;
	return lo;
}

struct agent_pod *pod_cache_find(const struct pod_cache *c, const char *key)
{
	bool found;
	unsigned i;

	if (!key || !key[0])
		return NULL;
	i = pod_index(c, key, &found);
	return found ? c->v[i] : NULL;
}

static struct agent_pod *find_by_name(const struct pod_cache *c, const char *ns, const char *name, bool in_api_only)
{
	struct agent_pod *fallback = NULL;

	for (unsigned i = 0; i < c->n; i++) {
		struct agent_pod *p = c->v[i];

		if (!streq(p->namespace_, ns) || !streq(p->name, name))
			continue;
		if (p->in_api)
			return p;
		if (!in_api_only && !fallback)
			fallback = p;
	}
	return fallback;
}

struct agent_pod *pod_cache_lookup(const struct pod_cache *c, const char *ns, const char *name, const char *uid)
{
	struct agent_pod *p = uid && uid[0] ? pod_cache_find(c, uid) : NULL;

	if (p)
		return p;
	if (ns && name && ns[0] && name[0])
		return find_by_name(c, ns, name, false);
	return NULL;
}

static struct agent_pod *pod_insert(struct pod_cache *c, const char *key)
{
	struct agent_pod *p;
	bool found;
	unsigned i = pod_index(c, key, &found);

	if (found)
		return c->v[i];
	if (c->n == c->cap) {
		unsigned cap = c->cap ? c->cap * 2 : 16;
		struct agent_pod **v = realloc(c->v, cap * sizeof(struct agent_pod *));
		if (!v)
			return NULL;
		c->v = v;
		c->cap = cap;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	str_copy(p->key, sizeof(p->key), key);
	p->retry_at_ms = -1;
	p->status = POD_UNTUNED;
	memmove(&c->v[i + 1], &c->v[i], (c->n - i) * sizeof(struct agent_pod *));
	c->v[i] = p;
	c->n++;
	return p;
}

static void pod_remove_at(struct pod_cache *c, unsigned i)
{
	pod_free(c->v[i]);
	memmove(&c->v[i], &c->v[i + 1], (c->n - i - 1) * sizeof(struct agent_pod *));
	c->n--;
}

/* ---- the API view ---- */

static void want_compute(const struct cJSON *annotations, const struct profile_set *set, struct pod_want *ret)
{
	struct workload w;

	if (workload_from_annotations(annotations, &w, NULL) < 0)
		workload_from_annotations(NULL, &w, NULL);
	pod_want_from(&w, profile_resolve(set, &w, NULL, 0), ret);
}

static bool want_tuning_equal(const struct pod_want *a, const struct pod_want *b)
{
	return a->class == b->class && streq(a->profile, b->profile) && a->profile_hash == b->profile_hash &&
	       a->egress_bps == b->egress_bps && a->ingress_bps == b->ingress_bps;
}

static bool ips_equal(unsigned na, const struct node_ip *a, unsigned nb, const struct node_ip *b)
{
	if (na != nb)
		return false;
	for (unsigned i = 0; i < na; i++)
		if (a[i].family != b[i].family || memcmp(a[i].addr, b[i].addr, 16) != 0)
			return false;
	return true;
}

static bool phase_done(enum kube_pod_phase ph)
{
	return ph == KUBE_POD_PHASE_SUCCEEDED || ph == KUBE_POD_PHASE_FAILED;
}

/* Move the attachments of a plugin-only entry into p. */
static int attachments_take(struct agent_pod *p, struct agent_pod *from)
{
	for (unsigned i = 0; i < from->n_att; i++) {
		if (p->n_att == p->cap_att) {
			unsigned cap = p->cap_att ? p->cap_att * 2 : 2;
			struct agent_attach *v = realloc(p->att, cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			p->att = v;
			p->cap_att = cap;
		}
		p->att[p->n_att++] = from->att[i];
	}
	from->n_att = 0;
	return 0;
}

void pod_cache_list_begin(struct pod_cache *c)
{
	for (unsigned i = 0; i < c->n; i++)
		c->v[i]->list_seen = false;
}

struct agent_pod *pod_cache_api_upsert(struct pod_cache *c, const struct kube_pod *kp, const struct profile_set *set,
                                       unsigned *ret_changed)
{
	struct agent_pod *p = pod_cache_find(c, kp->uid);
	struct pod_want want;
	struct node_ip ips[NODE_POD_IPS_MAX];
	unsigned n_ips, changed = 0;
	cJSON *ann = NULL;

	*ret_changed = 0;
	if (kp->annotations) {
		ann = cJSON_Duplicate(kp->annotations, true);
		if (!ann)
			return NULL;
	}
	if (!p) {
		char key[sizeof(p->key)];

		p = pod_insert(c, kp->uid);
		if (!p) {
			cJSON_Delete(ann);
			return NULL;
		}
		changed |= POD_CHANGED_NEW | POD_CHANGED_NODE | POD_CHANGED_TUNING;
		/* attachments recorded before the API told us the UID */
		snprintf(key, sizeof(key), "plugin:%s/%s", kp->namespace_, kp->name);
		bool found;
		unsigned j = pod_index(c, key, &found);
		if (found) {
			struct agent_pod *orphan = c->v[j];
			if (attachments_take(p, orphan) == 0 && !orphan->in_api)
				pod_remove_at(c, j);
			p = pod_cache_find(c, kp->uid); /* the array moved */
		}
	} else if (!p->in_api) {
		changed |= POD_CHANGED_NODE | POD_CHANGED_TUNING;
	}
	want_compute(ann, set, &want);
	n_ips = pod_ips_from_kube(kp, ips);

	if (!want_tuning_equal(&want, &p->want))
		changed |= POD_CHANGED_TUNING | POD_CHANGED_NODE;
	if (want.ce_marking != p->want.ce_marking || want.bulk != p->want.bulk ||
	    !ips_equal(n_ips, ips, p->n_ips, p->ips) || kp->gpus != p->gpus || kp->host_network != p->host_network ||
	    phase_done(kp->phase) != phase_done(p->phase))
		changed |= POD_CHANGED_NODE;
	if (want.invalid[0] && !streq(want.invalid, p->invalid_warned))
		changed |= POD_CHANGED_INVALID;

	str_copy(p->uid, sizeof(p->uid), kp->uid);
	str_copy(p->namespace_, sizeof(p->namespace_), kp->namespace_);
	str_copy(p->name, sizeof(p->name), kp->name);
	p->in_api = true;
	p->list_seen = true;
	p->phase = kp->phase;
	p->deleting = kp->deleting;
	p->host_network = kp->host_network;
	if (p->annotations)
		cJSON_Delete(p->annotations);
	p->annotations = ann;
	p->n_ips = n_ips;
	memcpy(p->ips, ips, sizeof(ips));
	p->gpus = kp->gpus;
	p->want = want;
	if (changed & POD_CHANGED_TUNING) {
		p->dirty = true;
		p->retries = 0;
		p->retry_at_ms = -1;
	}
	*ret_changed = changed;
	return p;
}

static void api_view_drop(struct agent_pod *p)
{
	p->in_api = false;
	if (p->annotations)
		cJSON_Delete(p->annotations);
	p->annotations = NULL;
	p->n_ips = 0;
	p->gpus = 0;
	p->retry_at_ms = -1;
	p->retries = 0;
}

unsigned pod_cache_list_end(struct pod_cache *c)
{
	unsigned dropped = 0;

	for (unsigned i = 0; i < c->n; i++) {
		struct agent_pod *p = c->v[i];

		if (p->in_api && !p->list_seen) {
			api_view_drop(p);
			dropped++;
		}
	}
	pod_cache_gc(c);
	return dropped;
}

bool pod_cache_api_delete(struct pod_cache *c, const char *uid)
{
	struct agent_pod *p = pod_cache_find(c, uid);

	if (!p || !p->in_api)
		return false;
	api_view_drop(p);
	pod_cache_gc(c);
	return true;
}

unsigned pod_cache_rewant(struct pod_cache *c, const struct profile_set *set)
{
	unsigned n = 0;

	for (unsigned i = 0; i < c->n; i++) {
		struct agent_pod *p = c->v[i];
		struct pod_want want;

		if (!p->in_api)
			continue;
		want_compute(p->annotations, set, &want);
		if (!want_tuning_equal(&want, &p->want) || want.ce_marking != p->want.ce_marking) {
			p->dirty = true;
			p->retries = 0;
			p->retry_at_ms = -1;
			n++;
		}
		p->want = want;
	}
	return n;
}

void pod_cache_gc(struct pod_cache *c)
{
	for (unsigned i = c->n; i-- > 0;)
		if (!c->v[i]->in_api && c->v[i]->n_att == 0)
			pod_remove_at(c, i);
}

/* ---- attachments ---- */

static int ip_parse_cidr(const char *s, struct node_ip *ret)
{
	char buf[64];
	char *slash;

	if (str_copy(buf, sizeof(buf), s) < 0)
		return -EINVAL;
	slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	memset(ret, 0, sizeof(*ret));
	if (inet_pton(AF_INET, buf, ret->addr) == 1) {
		ret->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, buf, ret->addr) == 1) {
		ret->family = AF_INET6;
		return 0;
	}
	return -EINVAL;
}

void agent_attach_from_state(const struct attach_state *s, struct agent_attach *ret)
{
	memset(ret, 0, sizeof(*ret));
	str_copy(ret->container_id, sizeof(ret->container_id), s->container_id);
	str_copy(ret->ifname, sizeof(ret->ifname), s->ifname);
	str_copy(ret->host_ifname, sizeof(ret->host_ifname), s->ifs.host_ifname);
	ret->host_ifindex = s->host_ifindex;
	str_copy(ret->netns, sizeof(ret->netns), s->netns);
	str_copy(ret->pod_namespace, sizeof(ret->pod_namespace), s->pod_namespace);
	str_copy(ret->pod_name, sizeof(ret->pod_name), s->pod_name);
	str_copy(ret->pod_uid, sizeof(ret->pod_uid), s->pod_uid);
	ret->class = s->workload.class;
	str_copy(ret->profile, sizeof(ret->profile), s->profile);
	ret->profile_hash = s->has_profile_spec ? profile_content_hash(&s->profile_spec) : 0;
	ret->egress_bps = s->workload.egress_bps;
	ret->ingress_bps = s->workload.ingress_bps;
	for (unsigned i = 0; i < s->n_ips && i < ARRAY_SIZE(s->ips) && ret->n_ips < NODE_POD_IPS_MAX; i++)
		if (ip_parse_cidr(s->ips[i], &ret->ips[ret->n_ips]) == 0)
			ret->n_ips++;
	ret->marks = agent_plan_marks(&s->plan);
	ret->failed = s->failure[0] != '\0';
	ret->degraded = plan_count(&s->plan, ITEM_DEGRADED) + plan_count(&s->plan, ITEM_SKIPPED) > 0;
	ret->seen = true;
}

bool agent_choices_degraded(const cJSON *choices)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, choices)
	{
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(c, "status");

		if (cJSON_IsString(st) && st->valuestring &&
		    (streq(st->valuestring, item_status_name(ITEM_DEGRADED)) ||
		     streq(st->valuestring, item_status_name(ITEM_SKIPPED))))
			return true;
	}
	return false;
}

static struct agent_attach *attach_find(struct agent_pod *p, const char *container_id, const char *ifname)
{
	for (unsigned i = 0; i < p->n_att; i++)
		if (streq(p->att[i].container_id, container_id) && streq(p->att[i].ifname, ifname))
			return &p->att[i];
	return NULL;
}

/* The pod an attachment belongs to (existing, or a new plugin-only one). */
static struct agent_pod *attach_owner(struct pod_cache *c, const struct agent_attach *a)
{
	struct agent_pod *p = NULL;
	char key[sizeof(p->key)];

	if (a->pod_uid[0])
		p = pod_cache_find(c, a->pod_uid);
	if (!p && a->pod_namespace[0] && a->pod_name[0]) {
		p = find_by_name(c, a->pod_namespace, a->pod_name, true);
		/* a different UID under the same name is another pod (recreated) */
		if (p && a->pod_uid[0] && !streq(p->uid, a->pod_uid))
			p = NULL;
	}
	if (p)
		return p;
	if (a->pod_uid[0])
		snprintf(key, sizeof(key), "%s", a->pod_uid);
	else if (a->pod_namespace[0] && a->pod_name[0])
		snprintf(key, sizeof(key), "plugin:%s/%s", a->pod_namespace, a->pod_name);
	else
		snprintf(key, sizeof(key), "plugin:%s", a->container_id);
	p = pod_insert(c, key);
	if (!p)
		return NULL;
	if (!p->namespace_[0]) {
		str_copy(p->uid, sizeof(p->uid), a->pod_uid);
		str_copy(p->namespace_, sizeof(p->namespace_), a->pod_namespace);
		str_copy(p->name, sizeof(p->name), a->pod_name);
	}
	return p;
}

/* Remove an attachment from whichever pod holds it; returns that pod. */
static struct agent_pod *attach_detach(struct pod_cache *c, const char *container_id, const char *ifname)
{
	for (unsigned i = 0; i < c->n; i++) {
		struct agent_pod *p = c->v[i];
		struct agent_attach *a = attach_find(p, container_id, ifname);

		if (a) {
			unsigned k = (unsigned)(a - p->att);
			memmove(&p->att[k], &p->att[k + 1], (p->n_att - k - 1) * sizeof(*p->att));
			p->n_att--;
			return p;
		}
	}
	return NULL;
}

struct agent_pod *pod_cache_attach_upsert(struct pod_cache *c, const struct agent_attach *a, bool *ret_new)
{
	struct agent_pod *p = attach_owner(c, a), *prev_owner;
	struct agent_attach *slot;

	*ret_new = false;
	if (!p)
		return NULL;
	slot = attach_find(p, a->container_id, a->ifname);
	if (!slot) {
		/* it may sit under another entry (the record's pod changed) */
		char key[sizeof(p->key)];

		str_copy(key, sizeof(key), p->key);
		prev_owner = attach_detach(c, a->container_id, a->ifname);
		*ret_new = prev_owner == NULL;
		pod_cache_gc(c);
		p = pod_cache_find(c, key);
		if (!p)
			p = attach_owner(c, a);
		if (!p)
			return NULL;
		if (p->n_att == p->cap_att) {
			unsigned cap = p->cap_att ? p->cap_att * 2 : 2;
			struct agent_attach *v = realloc(p->att, cap * sizeof(*v));
			if (!v)
				return NULL;
			p->att = v;
			p->cap_att = cap;
		}
		slot = &p->att[p->n_att++];
	}
	*slot = *a;
	slot->seen = true;
	pod_status_refresh(p);
	return p;
}

struct agent_pod *pod_cache_attach_remove(struct pod_cache *c, const char *container_id, const char *ifname,
                                          bool *ret_found)
{
	struct agent_pod *p = attach_detach(c, container_id, ifname);
	char key[sizeof(p->key)];

	*ret_found = p != NULL;
	if (!p)
		return NULL;
	str_copy(key, sizeof(key), p->key);
	pod_status_refresh(p);
	pod_cache_gc(c);
	return pod_cache_find(c, key);
}

void pod_cache_attach_mark(struct pod_cache *c)
{
	for (unsigned i = 0; i < c->n; i++)
		for (unsigned k = 0; k < c->v[i]->n_att; k++)
			c->v[i]->att[k].seen = false;
}

unsigned pod_cache_attach_sweep(struct pod_cache *c)
{
	unsigned removed = 0;

	for (unsigned i = 0; i < c->n; i++) {
		struct agent_pod *p = c->v[i];

		for (unsigned k = p->n_att; k-- > 0;) {
			if (p->att[k].seen)
				continue;
			memmove(&p->att[k], &p->att[k + 1], (p->n_att - k - 1) * sizeof(*p->att));
			p->n_att--;
			removed++;
		}
	}
	pod_cache_gc(c);
	return removed;
}

/* ---- decisions ---- */

void pod_status_refresh(struct agent_pod *p)
{
	enum pod_status st = POD_UNTUNED;

	for (unsigned k = 0; k < p->n_att; k++) {
		const struct agent_attach *a = &p->att[k];
		enum pod_status s = a->failed ? POD_FAILED : a->degraded ? POD_DEGRADED : POD_TUNED;

		if (s == POD_FAILED || (s == POD_DEGRADED && st != POD_FAILED) || st == POD_UNTUNED)
			st = s;
	}
	if (p->retry_at_ms >= 0)
		st = POD_FAILED; /* a re-tune failed and waits for its retry */
	p->status = st;
}

bool pod_attach_needs_retune(const struct agent_pod *p, const struct agent_attach *a)
{
	if (!p->in_api || phase_done(p->phase))
		return false;
	if (a->failed)
		return true;
	return !pod_attach_tuned_as_wanted(p, a);
}

bool pod_attach_tuned_as_wanted(const struct agent_pod *p, const struct agent_attach *a)
{
	/* the content, not only the name: a profile changed in the config
	 * re-tunes (a record without profileSpec can only be compared by name) */
	return a->class == p->want.class && streq(a->profile, p->want.profile) &&
	       (!a->profile_hash || a->profile_hash == p->want.profile_hash) && a->egress_bps == p->want.egress_bps &&
	       a->ingress_bps == p->want.ingress_bps;
}

bool pod_counts_for_node(const struct agent_pod *p, bool api_synced)
{
	if (p->in_api)
		return !p->host_network && !phase_done(p->phase);
	return !api_synced && p->n_att > 0;
}

enum workload_class pod_node_class(const struct agent_pod *p)
{
	if (p->in_api)
		return p->want.class;
	return p->n_att > 0 ? p->att[0].class : CLASS_DEFAULT;
}

static uint64_t key_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
	return h;
}

/* The node plan's addresses: the API's, else the attachments' (the API
 * fills status.podIPs only after the sandbox is up). */
static void node_ips(const struct agent_pod *p, struct node_pod *np)
{
	np->n_ips = 0;
	if (p->in_api && p->n_ips > 0) {
		np->n_ips = p->n_ips;
		memcpy(np->ips, p->ips, sizeof(np->ips));
		return;
	}
	for (unsigned k = 0; k < p->n_att; k++)
		for (unsigned i = 0; i < p->att[k].n_ips && np->n_ips < NODE_POD_IPS_MAX; i++) {
			const struct node_ip *ip = &p->att[k].ips[i];
			bool dup = false;

			for (unsigned j = 0; j < np->n_ips; j++)
				dup |= np->ips[j].family == ip->family && memcmp(np->ips[j].addr, ip->addr, 16) == 0;
			if (!dup)
				np->ips[np->n_ips++] = *ip;
		}
}

void pod_node_pod(const struct agent_pod *p, struct node_pod *np)
{
	struct pod_want recorded = {.class = pod_node_class(p)};
	char uid[sizeof(np->uid)];

	/* the planner needs a UID; plugin-only pods without one use a hash of their key */
	if (p->uid[0])
		str_copy(uid, sizeof(uid), p->uid);
	else
		snprintf(uid, sizeof(uid), "plugin-%016llx", (unsigned long long)key_hash(p->key));
	/* a pod the API does not show (yet): what its first attachment was tuned with */
	if (!p->in_api && p->n_att > 0) {
		str_copy(recorded.profile, sizeof(recorded.profile), p->att[0].profile);
		recorded.egress_bps = p->att[0].egress_bps;
	}
	pod_want_node_pod(p->in_api ? &p->want : &recorded, p->namespace_, p->name, uid, p->in_api ? p->gpus : 0, np);
	node_ips(p, np);
}

int pod_cache_node_pods(const struct pod_cache *c, bool api_synced, struct node_pod **ret, unsigned *ret_n)
{
	struct node_pod *v = calloc(c->n ? c->n : 1, sizeof(*v));
	unsigned n = 0;

	if (!v)
		return -ENOMEM;
	for (unsigned i = 0; i < c->n; i++)
		if (pod_counts_for_node(c->v[i], api_synced))
			pod_node_pod(c->v[i], &v[n++]);
	*ret = v;
	*ret_n = n;
	return 0;
}
