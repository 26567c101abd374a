/* log.c: stderr in the foreground, syslog otherwise (after OpenBSD's log.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "gateway/log.h"

static bool log_fg = true;
static bool log_verbose;
static const char *log_ident = "sluice";

void
log_init(const char *ident, bool foreground, bool verbose)
{
	log_ident = ident;
	log_fg = foreground;
	log_verbose = verbose;
	if (!foreground)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

/* Control characters become '?': a message quotes what clients sent (a
 * sandbox's name, a policy's origin), and a newline in one made a line of
 * its own in the journal, one that could say anything (found by review,
 * 2026-12-03). */
static void
clean(char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

static void
vlog(int pri, const char *fmt, va_list ap, const char *suffix)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	clean(msg);
	if (log_fg) {
		if (suffix)
			fprintf(stderr, "%s: %s: %s\n", log_ident, msg, suffix);
		else
			fprintf(stderr, "%s: %s\n", log_ident, msg);
		fflush(stderr);
	} else if (suffix)
		syslog(pri, "%s: %s", msg, suffix);
	else
		syslog(pri, "%s", msg);
}

void
log_warn(const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	vlog(LOG_WARNING, fmt, ap, strerror(saved));
	va_end(ap);
	errno = saved;
}

void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_WARNING, fmt, ap, NULL);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_INFO, fmt, ap, NULL);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (!log_verbose)
		return;
	va_start(ap, fmt);
	vlog(LOG_DEBUG, fmt, ap, NULL);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	vlog(LOG_CRIT, fmt, ap, strerror(saved));
	va_end(ap);
	exit(2);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_CRIT, fmt, ap, NULL);
	va_end(ap);
	exit(2);
}
