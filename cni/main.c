/* main.c — the `aiqos` executable: collects the CNI_* environment and hands
 * it with stdin/stdout to cni_run() (run.c). Nothing else lives here, so the
 * unit tests link every other cni/ object and drive cni_run() directly. */
#include <stdlib.h>

#include "cni.h"

int main(void)
{
	const struct cni_env env = {
	        .command = getenv("CNI_COMMAND"),
	        .container_id = getenv("CNI_CONTAINERID"),
	        .netns = getenv("CNI_NETNS"),
	        .ifname = getenv("CNI_IFNAME"),
	        .args = getenv("CNI_ARGS"),
	        .path = getenv("CNI_PATH"),
	};

	return cni_run(&env, stdin, stdout);
}
