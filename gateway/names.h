/* names.h: the sandbox name rule, shared by sluiced and the sluice CLI. */
#ifndef SLUICE_NAMES_H
#define SLUICE_NAMES_H

#include <stdbool.h>

#define GW_SANDBOX_NAME_MAX	48	/* characters, NUL not included */

/*
 * True if name is a valid sandbox name: 1..GW_SANDBOX_NAME_MAX characters
 * from [A-Za-z0-9_.-], the first neither '.' nor '-'. The name becomes a
 * netns name (a file under /run/netns) and part of messages, so the rule
 * keeps out '/', "." and "..", option-like names and anything that needs
 * quoting. NULL is not valid.
 */
bool gw_sandbox_name_valid(const char *name);

#endif
