/* agent_metrics.h — the agent's own metrics (agent_metrics.c) rendered into
 * a metrics_writer (metrics.h) for /metrics. */
#ifndef AIQOS_AGENT_METRICS_AGENT_METRICS_H
#define AIQOS_AGENT_METRICS_AGENT_METRICS_H

struct agent;
struct metrics_writer;

void agent_metrics_render(struct agent *ag, struct metrics_writer *w);

#endif
