/* names.c: the sandbox name rule (see names.h). */
#include <stddef.h>

#include "gateway/names.h"

/* ASCII only on purpose: isalnum(3) would follow the locale. */
static bool
name_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

bool
gw_sandbox_name_valid(const char *name)
{
	size_t i;

	if (name == NULL || name[0] == '.' || name[0] == '-')
		return false;
	for (i = 0; name[i] != '\0'; i++) {
		if (i == GW_SANDBOX_NAME_MAX || !name_char_ok(name[i]))
			return false;
	}
	return i > 0;
}
