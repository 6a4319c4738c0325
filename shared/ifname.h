/* ifname.h — the names libcni and Linux check, written once: an interface
 * name (CNI_IFNAME, the agent's uplink) and its encoding into file names
 * (the state store's "<containerID>@<ifname>.json"), and libcni's rule for
 * container IDs and network names. Pure. */
#ifndef AIQOS_IFNAME_H
#define AIQOS_IFNAME_H

#include "util.h"

/* "%XX" per byte outside [A-Za-z0-9_.-], at most 15 bytes: 45 + NUL */
#define IFNAME_ENC_MAX 46

/* A name both Linux (dev_valid_name) and libcni (ValidateInterfaceName)
 * accept: 1..15 bytes, not "." or "..", no '/', ':' or whitespace (ASCII,
 * the byte 0xa0 the kernel's isspace() counts, and the Unicode spaces Go's
 * unicode.IsSpace knows, UTF-8 encoded). "net+1", "x@y", "eth0.100" are
 * valid. */
bool ifname_valid(const char *s);
/* libcni's ValidateContainerID / ValidateNetworkName rule,
 * [A-Za-z0-9][A-Za-z0-9_.-]*, at most max characters: CNI_CONTAINERID,
 * K8S_POD_INFRA_CONTAINER_ID, a network name used as a directory name. */
bool cni_id_valid(const char *s, size_t max);
/* Encode a valid name for a file name: bytes outside [A-Za-z0-9_.-] as
 * "%XX" (so names of that set keep their old file names). Returns 0,
 * -EINVAL (not a valid name) or -ENAMETOOLONG. */
int ifname_encode(const char *ifname, char *buf, size_t size);
/* The inverse, strict: only the encoding ifname_encode() produces (upper-case
 * hex, no needless escapes) of a valid name; else -EINVAL. */
int ifname_decode(const char *enc, size_t len, char *buf, size_t size);

#endif
