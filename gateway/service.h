/* service.h: sluiced as a system service — readiness, reload, privilege drop. */
#ifndef SLUICE_SERVICE_H
#define SLUICE_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "gateway/gw.h"

/* ---- readiness: the sd_notify(3) protocol, without libsystemd --------- */

/*
 * Fills sun from a $NOTIFY_SOCKET value: an absolute path, or "@name" for
 * an abstract socket. Returns 0 with *len set, or -1 with errno EINVAL
 * (neither form, or an empty name) or ENAMETOOLONG.
 */
int gw_notify_addr(const char *value, struct sockaddr_un *sun, socklen_t *len);

/*
 * Reads $NOTIFY_SOCKET (left in the environment, as sd_notify(0, ...)
 * does) and opens a datagram socket for it. Call it in the network
 * namespace the service manager runs in: an abstract socket's name
 * belongs to the namespace the socket was made in. Returns 0, also when
 * the variable is unset (gw_notify is then a no-op), or -1 with err.
 */
int gw_notify_open(char *err, size_t errlen);

/*
 * Sends one notification ("READY=1\nSTATUS=..."). Returns 0 if sent or
 * when there is no service manager, -1 with errno otherwise.
 */
int gw_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- capabilities ----------------------------------------------------- */

#define GW_CAP(c)	(UINT64_C(1) << (c))

/*
 * What sluiced keeps once setup is done (service.c says why, one by one).
 * Setup also needs CAP_NET_BIND_SERVICE (port 53), CAP_CHOWN (the control
 * socket's group) and CAP_SETPCAP (to shrink the bounding set).
 */
uint64_t gw_caps_runtime(void);

/*
 * The capability sets as capset(2) takes them: version 3, two 32-bit
 * words per set. out[0] holds capabilities 0-31, out[1] 32-63.
 */
void gw_caps_words(uint64_t mask, uint32_t out[2]);

/*
 * Parses the hex value of field ("CapEff", "CapBnd", ...) out of the text
 * of a /proc/PID/status file. Returns 0, or -1 if the field is missing or
 * malformed.
 */
int gw_caps_from_status(const char *status, const char *field, uint64_t *out);

/* Writes the names of mask's capabilities ("cap_net_admin,...") into buf;
 * returns buf. */
char *gw_caps_names(uint64_t mask, char *buf, size_t len);

/*
 * Limits the calling thread, and the programs it runs from now on, to
 * keep: the bounding set first (needs CAP_SETPCAP; a capability already
 * out of it is skipped), then permitted, effective and inheritable, the
 * ambient set cleared, and no_new_privs set so that a program it runs
 * cannot gain more (uid 0 keeps the bounding set across execve). keep is
 * narrowed to what the thread holds. Capabilities are per thread: threads
 * made before keep theirs. Returns 0, or -1 with err.
 */
int gw_caps_drop(uint64_t keep, char *err, size_t errlen);

/*
 * Checks every thread of this process against keep (effective, permitted
 * and bounding sets). Returns how many hold more, with the first one's id
 * in *tid (0 if none), or -1 if /proc/self/task cannot be read.
 */
int gw_caps_check_threads(uint64_t keep, int *tid);

/* ---- reload ----------------------------------------------------------- */

struct gw_config_change {
	const char	*key;		/* the config key ("dns-upstream") */
	bool		 live;		/* applied by a reload; else at restart */
};

/*
 * Lists the keys whose value differs between old and new, in a fixed
 * order, at most max of them. Returns how many differ (may exceed max).
 */
size_t gw_config_diff(const struct gw_config *old, const struct gw_config *new,
    struct gw_config_change *out, size_t max);

/* Formats key's value in cfg for a log line ("198.51.100.53,..."). */
const char *gw_config_value(const struct gw_config *cfg, const char *key,
    char *buf, size_t len);

/* ---- the daemon's side (these log) ------------------------------------ */

/*
 * After setup: drops to gw_caps_runtime(), then starts the store's writer
 * thread again so it runs with the reduced set too. Threads started later
 * inherit the reduced sets: start the queue workers after this. Returns 0,
 * or -1 with err.
 */
int gw_service_drop(struct gw *gw, char *err, size_t errlen);

/* READY=1 with a STATUS line; warns about any thread that holds more
 * than what gw_service_drop kept. */
void gw_service_ready(struct gw *gw);

/* A new STATUS line when the number of sandboxes changed; cheap. */
void gw_service_status(struct gw *gw);

/*
 * SIGHUP: parses the command line and its -c file again, as at startup.
 * A config that does not parse, or that names an upstream that is no
 * address or a capture directory that cannot be opened, changes nothing.
 * Otherwise applies the keys that can change live and logs those that
 * need a restart. Sends RELOADING=1 before and READY=1 after. Call it
 * from the main loop while it holds gw_lock: the workers read what it
 * changes.
 */
void gw_service_reload(struct gw *gw, int argc, char **argv);

/* SIGTERM/SIGINT: STOPPING=1. */
void gw_service_stopping(struct gw *gw);

#endif
