/* ctl.h — what the commands of aiqosctl share (common.c): exit codes, the
 * call to the agent over its socket (proto.h), lenient readers of the
 * agent's JSON and the printers of its fields; one file per command
 * (status.c, explain.c, plan.c, doctor.c), main.c dispatches. */
#ifndef AIQOS_AGENT_CTL_CTL_H
#define AIQOS_AGENT_CTL_CTL_H

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

#include "json.h"
#include "util.h"

#define PROG "aiqosctl"
/* The exit status of every command (the usage of main.c says so): 0 ok; 1 a failure (the agent unreachable, not
 * connected or not ready, a node with errors, bad input); 2 a usage error
 * (unknown command or option, a bad flag value); 3 warnings only (doctor). */
#define EXIT_OK         0
#define EXIT_ERR        1
#define EXIT_USAGE      2
#define EXIT_WARN       3
#define CALL_TIMEOUT_MS 5000

/* -o/--output: every command prints text, JSON or YAML; plan adds tc. */
enum ctl_output { CTL_OUT_TEXT, CTL_OUT_JSON, CTL_OUT_YAML, CTL_OUT_TC };

/* The flags accepted anywhere on the line (main.c takes them out of argv
 * before the command parses its own): --socket PATH and -o/--output FMT. */
struct ctl_global {
	const char *socket;
	const char *output; /* NULL = the command's default (text) */
};
extern struct ctl_global ctl_global;

/* cJSON_ArrayForEach evaluates its array twice (gcc sees a NULL dereference
 * when that is a call): iterate from the first child once. */
static inline cJSON *json_first(const cJSON *a)
{
	return a ? a->child : NULL;
}
#define json_for_each(el, arr) for ((el) = json_first(arr); (el); (el) = (el)->next)

struct proto_request;

/* The command line of one command (crun's CLI: a file per command, the
 * option handling shared): the name that prefixes its messages ("status";
 * NULL for aiqosctl's own options before the command), its usage, its long
 * options (NULL = ctl_common_options). -h/--help, -o/--output FMT, --json
 * (-o json) and, where verbose_ok, -v/--verbose are handled here, as are
 * unknown options and missing values. */
struct ctl_cmd {
	const char *name;
	const char *usage;
	const struct option *opts;
	bool tc_output;      /* -o tc is one of its formats (plan) */
	bool verbose_ok;     /* -v/--verbose is one of its options (status) */
	enum ctl_output out; /* -o FMT, --json (= -o json), plan's --format */
	bool verbose;        /* -v/--verbose */
	int exit;            /* the exit status when ctl_getopt() returned CTL_OPT_EXIT */
	bool started;
};

#define CTL_OPT_EXIT (-2)

/* --json, -o/--output and --help, the options of a command that has no
 * others. */
extern const struct option ctl_common_options[];

/* The next option of cmd's command line: its value for the command to
 * handle, -1 at the end of the options (the arguments from optind), or
 * CTL_OPT_EXIT with cmd->exit set: --help printed the usage (EXIT_OK), or
 * an option was unknown or lacked its value (EXIT_USAGE). A command takes
 * options and arguments in any order; the top level (name NULL) stops at
 * the command. */
int ctl_getopt(struct ctl_cmd *cmd, int argc, char **argv);
/* The whole command line of a command with the common options only: -1 to
 * go on (the arguments from optind), else the exit status. */
int ctl_parse_common(struct ctl_cmd *cmd, int argc, char **argv);
/* EXIT_OK when at most max arguments follow the options, else the usage
 * error naming the first one too many. */
int ctl_args_max(const struct ctl_cmd *cmd, int argc, char **argv, int max);
/* The index of value among names (NULL-terminated), or -1 with cmd->exit
 * the usage error "NAME: OPT 'value': expected a, b or c". */
int ctl_choice(struct ctl_cmd *cmd, const char *opt, const char *value, const char *const *names);
/* Set cmd->out from an output format's name ("text", "json", "yaml", "tc"
 * where cmd->tc_output); what names the flag in the usage error. */
int ctl_output_set(struct ctl_cmd *cmd, const char *what, const char *value);
/* A command's answer: resp as JSON or YAML, else printed by print. */
int ctl_output(const struct ctl_cmd *cmd, cJSON *resp, int (*print)(const cJSON *resp));
/* Print a JSON document as YAML (block style; strings double-quoted, which
 * is JSON's escaping and valid YAML). */
int print_yaml(const cJSON *j);
/* Take the global flags (struct ctl_global) out of argv wherever they are
 * (before a "--"); argc is updated. EXIT_OK, else the usage error. */
int ctl_global_take(int *argc, char **argv, const char *usage);

/* Print "aiqosctl: <message>" on stderr; returns EXIT_ERR. */
_printf_(1, 2) int fail(const char *fmt, ...);
/* Print the message and the command's usage on stderr; returns EXIT_USAGE. */
int usage_error(const char *usage, const char *fmt, ...) _printf_(2, 3);

/* One exchange; prints the error and returns EXIT_ERR on failure. */
int agent_call(const char *sock, const struct proto_request *r, cJSON **ret);
/* Print a JSON document (the agent's answer without the protocol's keys). */
int print_json(cJSON *j);

/* Reading the agent's JSON leniently (missing fields print as "-"). */
const char *jstr(const cJSON *o, const char *k);
const char *jstr_or(const cJSON *o, const char *k, const char *dflt);
const cJSON *jarr(const cJSON *o, const char *k);
const cJSON *jobj(const cJSON *o, const char *k);
bool jnum(const cJSON *o, const char *k, double *ret);
const char *jbool_word(const cJSON *o, const char *k);
void time_format(double unix_s, char *buf, size_t size);
void rate_format(double bps, char *buf, size_t size);
void print_degraded(const cJSON *arr, const char *indent);
void print_strings(const cJSON *arr, const char *indent);
void print_indented(const char *text, const char *indent);
/* The "effective:" lines and "degraded:" items of o (those present), the
 * headings at indent, their lines two spaces deeper. */
void print_effective_degraded(const cJSON *o, const char *indent);
/* The rate (bits/s) in o's field k, formatted ("-" when absent or 0). */
void jrate(const cJSON *o, const char *k, char *buf, size_t size);

/* The commands: argv[0] is the command's name; the exit status. */
int cmd_status(int argc, char **argv, const char *sock);
int cmd_explain(int argc, char **argv, const char *sock);
int cmd_plan(int argc, char **argv);
int cmd_version(int argc, char **argv, const char *sock);
/* Exit status 0 ok, 1 errors, 2 usage, 3 warnings only. */
int ctl_doctor(int argc, char **argv);

#endif
