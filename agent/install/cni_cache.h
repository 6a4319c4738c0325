/* cni_cache.h — what libcni's cache says about the pods on a node: every
 * runtime that uses libcni (containerd, CRI-O) writes, at each pod's ADD,
 * "<cache dir>/results/<network>-<container id>-<ifname>", a JSON object whose
 * "config" is the network config the pod was created with (Go []byte:
 * base64), and removes it at the pod's DEL. A pod created while aiqos was
 * chained has a cached config naming it for as long as it exists; a runtime
 * that tears a pod down with its cached config (rather than the current one)
 * runs the aiqos binary at that DEL. `aiqos-agent uninstall` removes the
 * binary only when no cached config names it (docs/operations/uninstall.md). */
#ifndef AIQOS_AGENT_CNI_CACHE_H
#define AIQOS_AGENT_CNI_CACHE_H

#include "error.h"

#define CNI_CACHE_DIR_DEFAULT "/var/lib/cni" /* libcni's CacheDir */

struct cni_cache_count {
	unsigned naming;     /* cached configs that chain the type */
	unsigned others;     /* cached configs that do not */
	unsigned unreadable; /* files that are not a cache entry (no JSON, no "config") */
};

/* Count the cache entries below cache_dir/results (a missing results dir:
 * none). -ENOENT (err naming the dir) if cache_dir itself does not exist: the
 * runtime's cache is not mounted where it was looked for, nothing can be
 * told. Other errors name the dir or file. */
int cni_cache_count_type(const char *cache_dir, const char *type, struct cni_cache_count *ret, struct error *err);

#endif
