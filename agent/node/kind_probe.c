/* kind_probe.c — a qdisc kind tried on a scratch network namespace's lo
 * (kind_probe.h). */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apply.h"
#include "kind_probe.h"
#include "nl.h"

#define EXIT_PRESENT    0
#define EXIT_NO_NETNS   250
#define EXIT_NO_NL      251
#define PROBE_TIMEOUT_S 5

/* In the child: a new netns, a root qdisc of the kind on its lo (ifindex 1).
 * Exit 0, or the kernel's errno (< 250), or EXIT_NO_*. */
static _Noreturn void probe_child(enum tc_kind_id k)
{
	struct tc_spec s = {.type = TC_QDISC, .kind = k, .parent = TC_H_ROOT, .handle = 0x10000u};
	struct nl_sock *sk = NULL;
	struct error e = {0};
	int r;

	/* forked from a process with threads: should a lock it inherited
	 * held (libnl's, stdio's) never be released, the default action of
	 * SIGALRM ends the child and the parent learns nothing, not hangs */
	alarm(PROBE_TIMEOUT_S);
	if (unshare(CLONE_NEWNET) < 0)
		_exit(EXIT_NO_NETNS);
	if (nl_open(&sk, &e) < 0)
		_exit(EXIT_NO_NL);
	r = nl_tc_create(sk, 1, &s, &e);
	_exit(r == 0 ? EXIT_PRESENT : -r > 0 && -r < EXIT_NO_NETNS ? -r : EXIT_NO_NL);
}

int kind_probe_qdisc(enum tc_kind_id k, int *ret_errno, struct error *err)
{
	const struct tc_kind *tk = tc_kind_get(k);
	int st = 0, code;
	pid_t pid;

	*ret_errno = 0;
	if (!tk || tk->type != TC_QDISC)
		return error_set(err, EINVAL, "probe: %d is not a qdisc kind", (int)k);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return error_set(err, errno, "probe %s: fork: %s", tk->name, strerror(errno));
	if (pid == 0)
		probe_child(k);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return error_set(err, errno, "probe %s: wait: %s", tk->name, strerror(errno));
	if (!WIFEXITED(st))
		return error_set(err, EINTR, "probe %s: the child did not exit", tk->name);
	code = WEXITSTATUS(st);
	if (code == EXIT_PRESENT)
		return 1;
	if (code == EXIT_NO_NETNS)
		return error_set(err, EPERM, "probe %s: no scratch network namespace (CAP_SYS_ADMIN)", tk->name);
	if (code == EXIT_NO_NL || !apply_errno_is_missing_feature(code))
		return error_set(err, code == EXIT_NO_NL ? EIO : code, "probe %s: the kernel answered %s", tk->name,
		                 code == EXIT_NO_NL ? "nothing usable" : strerror(code));
	*ret_errno = code;
	return 0;
}
