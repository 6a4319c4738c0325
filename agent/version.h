/* version.h — the version of aiqos: the programs print it (aiqos-agent,
 * aiqosctl), status and metrics report it, and the image tag, the Helm
 * chart's appVersion and the kustomize newTag carry it (hack/build-image.sh
 * reads it from here; test/image checks they agree). */
#ifndef AIQOS_AGENT_VERSION_H
#define AIQOS_AGENT_VERSION_H

#define AIQOS_VERSION "0.1.0"

#endif
