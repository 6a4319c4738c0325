/* version.c — the version with the commit the program was built from
 * (version.h); the Makefile passes AIQOS_COMMIT to this file only. */
#include "version.h"

#ifndef AIQOS_COMMIT
#define AIQOS_COMMIT ""
#endif

const char *aiqos_commit(void)
{
	return AIQOS_COMMIT;
}

const char *aiqos_version(void)
{
	return AIQOS_COMMIT[0] ? AIQOS_VERSION "+" AIQOS_COMMIT : AIQOS_VERSION;
}
