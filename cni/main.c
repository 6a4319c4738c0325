/* main.c — the `aiqos` executable: collects the CNI_* environment and hands
 * it with stdin/stdout to cni_run() (run.c). Nothing else lives here, so the
 * unit tests link every other cni/ object and drive cni_run() directly. */
#include <stdio.h>
#include <stdlib.h>

#include "../agent/version.h"
#include "cni.h"

int main(void)
{
	static char out_buf[16384];
	const struct cni_env env = {
	        .command = getenv("CNI_COMMAND"),
	        .container_id = getenv("CNI_CONTAINERID"),
	        .netns = getenv("CNI_NETNS"),
	        .ifname = getenv("CNI_IFNAME"),
	        .args = getenv("CNI_ARGS"),
	        .path = getenv("CNI_PATH"),
	};

	/* Log timestamps are UTC: TZ=":" (empty, i.e. UTC) keeps libc from
	 * reading /etc/localtime for them. A given stdout buffer spares stdio
	 * the fstat/isatty probe (cni_run flushes what it prints); stdin is
	 * read in large blocks straight into the request buffer. */
	/* run by hand (no CNI_* variable at all): say what this is, as the
	 * reference plugins do, instead of a CNI error document; a runtime that
	 * sets the others but no CNI_COMMAND still gets error 4 */
	if (!env.command && !env.container_id && !env.netns && !env.ifname && !env.path) {
		fprintf(stderr,
		        "aiqos CNI plugin %s (CNI 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0): a chained plugin the "
		        "container runtime runs with CNI_COMMAND set; aiqos-agent install chains it\n",
		        AIQOS_VERSION);
		return 0;
	}
	setenv("TZ", ":", 1);
	setvbuf(stdout, out_buf, _IOFBF, sizeof(out_buf));
	setvbuf(stdin, NULL, _IONBF, 0);
	return cni_run(&env, stdin, stdout);
}
