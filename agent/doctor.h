/* doctor.h — preflight of a node (aiqosctl doctor, and the findings
 * `aiqos-agent install` logs): per profile what this kernel applies and what
 * falls back, in words (each profile's plan applied to the loopback device of
 * a throwaway network namespace by the real applier); the primary CNI and
 * its chain; shapers that would fight aiqos (Cilium's bandwidth manager, the
 * bandwidth plugin already in the chain) and foreign qdisc trees on the
 * uplink, each with a stable id and its fix. A missing kernel feature is one
 * finding in the "kernel" section (with its module and CONFIG_ option),
 * however many profiles fall back for it. Exit code for scripts: 0 ok,
 * 1 errors, 3 warnings only (aiqosctl's codes: 2 is a usage error). */
#ifndef AIQOS_AGENT_DOCTOR_H
#define AIQOS_AGENT_DOCTOR_H

#include <stdbool.h>
#include <stdio.h>

#include "profile.h"

#define DOCTOR_FINDINGS_MAX 96
#define DOCTOR_TEXT_MAX     320
#define DOCTOR_FIX_MAX      320

enum doctor_level {
	DOCTOR_OK,
	DOCTOR_INFO,
	DOCTOR_WARN,
	DOCTOR_ERROR,
	_DOCTOR_LEVEL_MAX,
};

#define DOCTOR_EXIT_OK       0
#define DOCTOR_EXIT_ERRORS   1
#define DOCTOR_EXIT_WARNINGS 3

struct doctor_finding {
	enum doctor_level level;
	char id[64];       /* stable: "kernel.missing.sch_fq_codel", "cni.bandwidth-plugin" */
	char section[112]; /* "kernel", "profile inference", "cni", "uplink" */
	char text[DOCTOR_TEXT_MAX];
	char fix[DOCTOR_FIX_MAX]; /* what to do; set on every warning and error, "" on ok/info */
};

struct doctor_report {
	unsigned n;
	struct doctor_finding f[DOCTOR_FINDINGS_MAX];
};

struct doctor_options {
	const char *cni_conf_dir;           /* NULL: no CNI checks */
	const char *uplink;                 /* "auto" or a name; NULL: no uplink checks */
	const char *state_dir;              /* for the agent's uplink record; may be NULL */
	const struct profile_set *profiles; /* NULL: the built-ins */
	bool probe_kernel;                  /* apply each profile in a scratch netns (needs root) */
};

/* The CNI a primary conflist's plugin types ("calico,bandwidth") name:
 * "Calico", ..., "unknown". */
const char *doctor_cni_name(const char *types);

/* Run every check into *ret. Never fails: what cannot be checked is a
 * finding itself. */
void doctor_run(const struct doctor_options *o, struct doctor_report *ret);
int doctor_exit_code(const struct doctor_report *r);
const char *doctor_level_name(enum doctor_level l);
void doctor_print_text(const struct doctor_report *r, FILE *out);
/* malloc'd JSON text {"findings":[{id,level,section,text,fix}],"exitCode":N}; NULL on ENOMEM */
char *doctor_json(const struct doctor_report *r);

#endif
