/* config.h — the agent's config file (JSON, every key optional):
 * uplink, uplinkRate, downlinkRate, downlink, inferenceShare, trainingFloor,
 * bulkThreshold, bulkIdleMs, bulkWeight,
 * mixedHoldSeconds, debounceMs, classify,
 * driftRepairSeconds, profiles. Strict: unknown keys, wrong types and values
 * out of range are errors naming the file, key and value. An absent file
 * means defaults; an unreadable or invalid one is an error. */
#ifndef AIQOS_AGENT_CONFIG_H
#define AIQOS_AGENT_CONFIG_H

#include "node.h"
#include "profile.h"

struct cJSON;

#define AGENT_CONFIG_DEFAULT_PATH    "/etc/aiqos/config.json"
#define AGENT_CONFIG_MAX_BYTES       (1024 * 1024)
#define AGENT_DRIFT_REPAIR_S_DEFAULT 60
#define AGENT_DRIFT_REPAIR_S_MAX     86400
#define AGENT_MIXED_HOLD_S_MAX       86400
#define AGENT_DEBOUNCE_MS_MAX        60000

struct agent_config {
	bool from_file; /* false: no file, these are the defaults */
	/* uplink ("auto" = default-route device), uplink_rate_bps (0 = link
	 * speed), inference_share, mixed_hold_s, debounce_ms, classify; the DSCP
	 * values come from the merged "inference" and "training" profiles */
	struct node_config node;
	uint32_t drift_repair_s; /* 0 = off */
	/* uplinkOverhead was set: else the agent counts the tunnel header of
	 * an encapsulating datapath on top of node.overhead_bytes (datapath.h) */
	bool overhead_set;
	/* the built-in profiles with the file's "profiles" merged in */
	struct profile_set profiles;
	/* the "profiles" object as written (owned), NULL if absent */
	struct cJSON *profiles_json;
};

/* Defaults: node_config_defaults(), driftRepairSeconds 60, built-in profiles. */
void agent_config_defaults(struct agent_config *ret);

/* Load path. Absent (ENOENT) -> defaults with from_file = false, returns 0.
 * Anything else wrong -> negative errno, err like
 * "config /etc/aiqos/config.json: inferenceShare: 1.5 is out of range (0, 1)".
 * *ret is untouched on failure (the caller keeps its previous config on a
 * failed hot reload). */
int agent_config_load(const char *path, struct agent_config *ret, struct error *err);

/* Parse JSON text (len bytes); origin names it in messages ("config <origin>: ..."). */
int agent_config_parse(const char *text, size_t len, const char *origin, struct agent_config *ret, struct error *err);

void agent_config_done(struct agent_config *c);

/* The "profiles" subtree as written in the file (NULL if none); already
 * validated and merged into c->profiles. */
const struct cJSON *agent_config_profiles_json(const struct agent_config *c);

/* Parse a tc-style rate: a decimal number with a unit, case-insensitive, as
 * tc(8): bit kbit mbit gbit tbit, kibit mibit gibit tibit, and bytes per
 * second bps kbps mbps gbps tbps, kibps mibps gibps tibps ("100mbps" is
 * 800 Mbit/s, as in tc); a bare integer is bits per second (unlike tc).
 * Must be a whole number of bit/s within [BW_MIN_BPS, BW_MAX_BPS]. */
int agent_rate_parse_bps(const char *s, uint64_t *ret_bps, struct error *err);

#endif
