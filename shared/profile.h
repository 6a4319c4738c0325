/* profile.h — tuning profiles: what a class gets (qdisc parameters, congestion
 * control candidates, sysctls, DSCP). Built-in profiles (docs/design.md §2); the
 * operator may override fields or add named profiles in config
 * ("profiles": {"inference-strict": {"class": "inference", "targetUs": 500}}). */
#ifndef AIQOS_PROFILE_H
#define AIQOS_PROFILE_H

#include "workload.h"

struct cJSON;

#define PROFILE_CC_MAX      4
#define PROFILE_CC_NAME_MAX 16
#define PROFILES_MAX        32

struct profile {
	char name[PROFILE_NAME_MAX];
	enum workload_class class;
	/* congestion control candidates, first available wins; n_cc = 0 -> untouched */
	unsigned n_cc;
	char cc[PROFILE_CC_MAX][PROFILE_CC_NAME_MAX];
	int tcp_ecn;            /* -1 untouched, else value of net.ipv4.tcp_ecn */
	uint32_t notsent_lowat; /* bytes; 0 untouched */
	uint32_t rmem_max;      /* tcp_rmem third field; 0 untouched */
	uint32_t wmem_max;      /* tcp_wmem third field; 0 untouched */
	int dscp;               /* -1 none, else 0..63 */
	/* pod egress AQM */
	uint32_t target_us;       /* fq_codel target */
	uint32_t interval_us;     /* fq_codel interval */
	uint32_t limit_pkts;      /* fq/fq_codel limit */
	uint32_t ce_threshold_us; /* 0 = no CE marking threshold (training-dctcp sets it) */
	uint32_t queue_ms;        /* fallback FIFO depth under a shaper, in ms at the shaped rate */
	bool pod_qdisc;           /* install a root qdisc on the pod interface when unshaped */
};

struct profile_set {
	unsigned n;
	struct profile p[PROFILES_MAX];
};

/* The built-in profiles: inference, inference-strict, training, training-dctcp, default. */
void profile_set_builtin(struct profile_set *ret);
/* Apply a JSON "profiles" object on top of set (override or add). Errors name
 * the profile, key and value. set is unchanged on failure. */
int profile_set_merge_json(struct profile_set *set, const struct cJSON *profiles, struct error *err);
/* The profile for a workload: named profile if given and its class matches,
 * else the class's default profile ("inference"/"training"/"default").
 * A profile of another class is refused (a pod cannot borrow a class it did
 * not ask for); *ret_warn (if non-NULL) explains a fallback. Never NULL. */
const struct profile *profile_resolve(const struct profile_set *set, const struct workload *w, char *ret_warn,
                                      size_t warn_size);
const struct profile *profile_find(const struct profile_set *set, const char *name);
/* Lower rmem_max of every profile of class c to bound (a smaller one
 * stays): the download tree's training receive window (node.h DOWNLOAD).
 * An unset 0 is the kernel's tcp_rmem maximum, unset_max (0 = unknown:
 * lowered to bound): lowered only when that is larger, so the bound never
 * raises a pod's window. bound 0 changes nothing. Returns the profiles changed. */
unsigned profile_set_bound_rmem(struct profile_set *set, enum workload_class c, uint32_t bound, uint32_t unset_max);

/* The whole content of one profile as a JSON object in the "profiles"
 * syntax ({"class": ..., "congestionControl": [...], every integer field,
 * "podQdisc"}), so profile_from_json() gives it back exactly: an attachment
 * record keeps the profile it was applied with (config profiles reach pods). NULL on
 * allocation failure. */
struct cJSON *profile_to_json(const struct profile *p);
/* The inverse: a complete profile named name from obj (the same validation
 * as the config's "profiles"; "class" is required). *ret untouched on error. */
int profile_from_json(const char *name, const struct cJSON *obj, struct profile *ret, struct error *err);
/* Same tuning content (every field but the name). */
bool profile_content_equal(const struct profile *a, const struct profile *b);
/* A fingerprint of that content (FNV-1a over the fields), never 0: equal
 * content, equal hash; the agent keeps it per attachment instead of the
 * whole profile. */
uint64_t profile_content_hash(const struct profile *p);

#endif
