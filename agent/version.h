/* version.h — the version of aiqos: the programs print it (aiqos-agent,
 * aiqosctl), status and metrics report it, and the image tag, the Helm
 * chart's appVersion and the kustomize newTag carry it (hack/build-image.sh
 * reads it from here; test/image checks they agree). Until a release it is
 * the next version with "-dev"; the programs add the commit they were built
 * from (version.c: "0.2.0-dev+1a2b3c4"), baked in by the Makefile
 * (AIQOS_COMMIT; empty in a build from a tarball without git). */
#ifndef AIQOS_AGENT_VERSION_H
#define AIQOS_AGENT_VERSION_H

#define AIQOS_VERSION "0.2.0-dev"

/* The commit the programs were built from ("" when unknown). */
const char *aiqos_commit(void);
/* AIQOS_VERSION, "+<commit>" when it is known: what --version prints. */
const char *aiqos_version(void);

#endif
