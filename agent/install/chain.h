/* chain.h — installing aiqos into a node's CNI setup (docs/design.md §1): copy
 * the plugin binary into the CNI bin dir and chain an "aiqos" entry after the
 * node's primary network config. Pure file manipulation (no netlink, no
 * logging), used by `aiqos-agent install|uninstall` and the CNI conf dir watch.
 *
 * The primary is the lexicographically first (bytewise, as libcni sorts)
 * *.conflist, *.conf or *.json file in the conf dir that is not ours. Ours are
 * named "00-aiqos-*" or carry the top-level key "aiqos.dev/owned": true. A
 * single-plugin .conf/.json is read as a one-plugin list (as libcni does).
 *
 * Strategies, in order:
 *  1. dropin (opt-in, o->dropin): libcni >= 1.3 (containerd 2.x) appends
 *     plugin configs found in "<conf_dir>/<network name>/<x>.conf" to a .conflist
 *     that does not set loadOnlyInlinedPlugins. We write
 *     "<conf_dir>/<name>/aiqos.conf". Runtimes cannot be detected from files,
 *     so this is off by default; a primary that cannot take drop-ins (a .conf,
 *     loadOnlyInlinedPlugins) falls back to 2.
 *  2. owned copy (default): "<conf_dir>/00-aiqos-<primary base>.conflist", the
 *     primary's list (same name, cniVersion and other keys) with the aiqos
 *     entry appended (or replacing an existing one) and the markers
 *     "aiqos.dev/owned": true, "aiqos.dev/source": "<primary file name>".
 *     Runtimes load the lexicographically first file, so the copy wins. It is
 *     regenerated when the primary changes and removed when it vanishes.
 *  3. in place (opt-in, o->edit_in_place, replaces 2): the aiqos entry is
 *     appended to the primary itself (a .conflist only), mode preserved.
 * Each strategy removes the others' files, so aiqos is chained exactly once.
 * Writes are atomic (temp file in the same dir, fsync, rename) and happen only
 * when the content differs. */
#ifndef AIQOS_AGENT_CHAIN_H
#define AIQOS_AGENT_CHAIN_H

#include <limits.h>

#include "error.h"

#define CHAIN_OWNED_PREFIX   "00-aiqos-"
#define CHAIN_MARKER_OWNED   "aiqos.dev/owned"
#define CHAIN_MARKER_SOURCE  "aiqos.dev/source"
#define CHAIN_DROPIN_FILE    "aiqos.conf"
#define CHAIN_CONF_MAX_BYTES (1024 * 1024) /* larger config files are refused */
#define CHAIN_WHAT_MAX       1024
/* The aiqos entry when chain_options.plugin_conf is NULL (the plugin config's defaults). */
#define CHAIN_PLUGIN_CONF_DEFAULT                                                           \
	"{\"type\":\"aiqos\",\"capabilities\":{\"io.kubernetes.cri.pod-annotations\":true," \
	"\"bandwidth\":true},\"failurePolicy\":\"open\"}"

struct chain_options {
	const char *conf_dir;    /* /etc/cni/net.d (host mount); required */
	const char *bin_dir;     /* /opt/cni/bin; NULL: no binary copy/removal */
	const char *plugin_src;  /* the aiqos binary to copy (e.g. /usr/local/bin/aiqos in the
	                            image); NULL: no binary copy */
	const char *plugin_conf; /* JSON object text of the aiqos entry, e.g. {"type":"aiqos",
	                            "capabilities":{...},"failurePolicy":"open"}; NULL: the default
	                            above. Its "type" names the binary in bin_dir and identifies
	                            our entries in lists. */
	bool dropin;             /* try the libcni drop-in dir first (containerd 2.x, libcni >= 1.3) */
	bool edit_in_place;      /* edit the primary instead of writing an owned copy */
};

enum chain_strategy {
	CHAIN_STRATEGY_NONE, /* nothing chained (no primary, or chain_remove) */
	CHAIN_STRATEGY_DROPIN,
	CHAIN_STRATEGY_OWNED_COPY,
	CHAIN_STRATEGY_IN_PLACE, /* also: the primary already lists aiqos in dropin mode */
	_CHAIN_STRATEGY_MAX,
};

struct chain_report {
	enum chain_strategy strategy;
	bool binary_changed;        /* the binary was copied (or removed) */
	bool conf_changed;          /* a config file was written or removed */
	bool no_primary;            /* no primary network config (yet): nothing chained; any
	                               stale owned copy was removed. Not an error: the runtime's
	                               own CNI may not have written its file yet; call again when
	                               the dir changes. */
	char primary[NAME_MAX + 1]; /* file name of the primary in conf_dir, "" if none */
	char target[PATH_MAX];      /* the file that chains aiqos, "" if none */
	char what[CHAIN_WHAT_MAX];  /* one line for a log: what was done or found */
	bool two_shapers;           /* chained after a "bandwidth" plugin: a WARNING in what */
};

/* Make sure aiqos is installed and chained (see above). Idempotent:
 * *ret_changed says whether anything was written or removed; ret_what (may be
 * NULL) gets a one-line summary. No primary is not an error (see
 * chain_report.no_primary; ret_what starts with "no primary"). Errors name the
 * file: a malformed primary -> -EINVAL and nothing written. Before anything
 * is chained: the aiqos entry passes the plugin's own config parser (-EINVAL
 * naming the field and value), the binary "<bin_dir>/<type>" is an
 * executable file (when bin_dir is set; -ENOENT/-EACCES). A primary that
 * already chains the "bandwidth" plugin is chained with a warning
 * (report.two_shapers). */
int chain_ensure(const struct chain_options *o, bool *ret_changed, char *ret_what, size_t what_size, struct error *err);
/* The same with the full report (ret may be NULL). */
int chain_ensure_report(const struct chain_options *o, struct chain_report *ret, struct error *err);

/* Remove aiqos from the chain: owned copies (only files carrying our marker)
 * deleted, our drop-in files deleted, our entries removed from lists edited in
 * place; the binary is left unless remove_binary. Files that do not parse are
 * not ours and are left alone. Idempotent. */
int chain_remove(const struct chain_options *o, bool remove_binary, struct error *err);
int chain_remove_report(const struct chain_options *o, bool remove_binary, struct chain_report *ret, struct error *err);

/* The plugin type the chain entry names (o->plugin_conf's "type", "aiqos" by
 * default): the binary's name in bin_dir. -EINVAL naming the field if the
 * entry does not parse. */
int chain_plugin_type(const struct chain_options *o, char *type, size_t type_size, struct error *err);

/* Does this network config text (a list with "plugins", or a single plugin
 * config) chain a plugin of this type? false if it does not parse. */
bool chain_conf_names_type(const char *text, size_t len, const char *type);

/* For a watch on conf_dir: does a change of this entry name matter (a config
 * file name, or a possible drop-in dir)? Our temp files (".aiqos-tmp-*") do
 * not. */
bool chain_name_relevant(const char *name);

const char *chain_strategy_name(enum chain_strategy s);

/* What the conf dir holds, read only (aiqosctl doctor): the primary and the
 * file the runtime loads (the first config file, ours included), each with
 * its plugin types in order ("ptp,portmap,aiqos"). load_r/load_msg: why the
 * primary cannot be read (then its types are ""). */
#define CHAIN_TYPES_MAX 512
struct chain_view {
	bool dir_missing;
	unsigned n_files;
	char primary[NAME_MAX + 1]; /* "" = none */
	char primary_types[CHAIN_TYPES_MAX];
	int primary_load_r;
	char primary_load_msg[ERROR_MSG_MAX];
	char loaded[NAME_MAX + 1]; /* "" = none */
	char loaded_types[CHAIN_TYPES_MAX];
	unsigned n_owned; /* files of ours (owned copies) */
};
int chain_inspect(const char *conf_dir, struct chain_view *ret, struct error *err);

#endif
