/* rcv_window.h — the download tree's training receive window in the agent
 * (shared/node.h DOWNLOAD): the agent's effective profiles (ag->profiles)
 * are the config's, with every training profile's rmemMax lowered to
 * info.down.rcv_window_bytes while the download tree is planned. Pods are
 * wanted, planned and re-tuned with the effective profiles, so a change of
 * the window (the tree planned or gone, another rate) re-tunes the training
 * pods; with no download tree they get the config's profiles back. */
#ifndef AIQOS_AGENT_RCV_WINDOW_H
#define AIQOS_AGENT_RCV_WINDOW_H

#include <stdbool.h>

struct agent;

/* Recompute ag->profiles from ag->cfg.profiles and ag->info; when they
 * change and rewant is true, the pods are re-wanted (dirty: re-tuned at
 * the next pass, which is kicked). Returns whether they changed. */
bool agent_profiles_refresh(struct agent *ag, bool rewant);

#endif
