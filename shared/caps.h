/* caps.h — what the applier learned about the running kernel (struct
 * plan_caps: missing qdisc/filter kinds, pedit, unknown congestion controls,
 * each with the errno the kernel refused it with), kept across plugin runs in
 * "<stateDir>/kernel-caps" (JSON; not "*.json", which in a stateDir are the
 * attachment records) so that later ADDs skip known-missing alternatives
 * without a syscall (and, on modular kernels, without a module load attempt
 * each time). The file is bound to the kernel's boot id and expires after
 * CAPS_MAX_AGE_S, so a reboot, a new kernel or modules installed later are
 * picked up. Only the missing is recorded: an unknown feature is tried. */
#ifndef AIQOS_CAPS_H
#define AIQOS_CAPS_H

#include <time.h>

#include "plan.h"

#define CAPS_FILE         "kernel-caps"
#define CAPS_FILE_MAX     4096 /* larger files are ignored (one holds < 1 KiB) */
#define CAPS_MAX_AGE_S    600  /* learned facts are re-checked after this */
#define CAPS_BOOT_ID_MAX  64
#define CAPS_BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

/* The running kernel's boot id (one line of CAPS_BOOT_ID_PATH). */
int caps_boot_id(char *buf, size_t size, struct error *err);

/* Fill *ret (zeroed first) from dir's caps file. Returns 1 when facts were
 * loaded, 0 when there are none to use: no file, another boot, older than
 * CAPS_MAX_AGE_S, or a file that cannot be read or parsed (then err says
 * why; the file is simply relearned). Never fails otherwise. */
int caps_load(const char *dir, struct plan_caps *ret, struct error *err);
/* Same with the boot id and the current time given (tests). */
int caps_load_at(const char *dir, const char *boot_id, time_t now, struct plan_caps *ret, struct error *err);

/* Whether b knows something missing that a does not. */
bool caps_learned_more(const struct plan_caps *a, const struct plan_caps *b);

/* Persist caps for this boot: merged with what the file already says for
 * the same boot and still fresh (concurrent plugins each add what they
 * learned; a lost race only means relearning), written atomically (temp
 * file + rename). dir must exist. Negative errno with err on failure. */
int caps_save(const char *dir, const struct plan_caps *caps, struct error *err);
int caps_save_at(const char *dir, const char *boot_id, time_t now, const struct plan_caps *caps, struct error *err);

#endif
