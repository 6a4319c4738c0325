/* pause.c — the pause (sandbox) image of the node e2e (test/e2e, built static
 * by hack/e2e-node.sh): holds the pod's namespaces, exits 0 on SIGINT/SIGTERM,
 * reaps children, as Kubernetes' own pause does. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig)
{
	(void)sig;
	_exit(EXIT_SUCCESS);
}

static void on_child(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void)
{
	struct sigaction sa = {0};

	if (getpid() != 1)
		fprintf(stderr, "pause: warning: not PID 1\n");
	sa.sa_handler = on_term;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_child;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;)
		pause();
}
