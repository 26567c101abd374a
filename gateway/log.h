/* log.h: the one place that prints; modules return errors, callers log. */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include <stdbool.h>

/* foreground: stderr; otherwise syslog(3) with ident. verbose enables
 * log_debug. */
void log_init(const char *ident, bool foreground, bool verbose);

void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));	/* appends strerror(errno) */
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* For broken invariants only. */
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
