/* ctl_doctor.h — `aiqosctl doctor` (the command; the checks are doctor.h). */
#ifndef AIQOS_AGENT_CTL_DOCTOR_H
#define AIQOS_AGENT_CTL_DOCTOR_H

/* argv[0] is "doctor". Exit status 0 ok, 1 warnings, 2 errors or usage. */
int ctl_doctor(int argc, char **argv);

#endif
