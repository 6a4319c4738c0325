/* loop.h — the agent's sd-event loop (loop.c): the API watch, the state
 * dir and config watches, netlink, the socket and metrics servers, the
 * scheduler's timer; one thread owns the agent. */
#ifndef AIQOS_AGENT_LOOP_H
#define AIQOS_AGENT_LOOP_H

struct agent;

int agent_run(struct agent *ag);

#endif
