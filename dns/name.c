/* name.c: host names in presentation form: checks, normalising, matching. */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "dns/dns.h"

static bool
name_fail(const char **why, const char *msg, char *out)
{
	out[0] = '\0';
	if (why != NULL)
		*why = msg;
	return false;
}

bool
dns_name_normalize(const char *in, size_t len, char *out, const char **why)
{
	size_t i, label = 0;

	if (len > 0 && in[len - 1] == '.')
		len--;
	if (len == 0)
		return name_fail(why, "empty name", out);
	if (len > DNS_NAME_MAX)
		return name_fail(why, "name longer than 253 bytes", out);

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c == '.') {
			if (label == 0)
				return name_fail(why, "empty label", out);
			if (in[i - 1] == '-')
				return name_fail(why,
				    "label ends with a hyphen", out);
			label = 0;
			out[i] = '.';
			continue;
		}
		if (c == '\0')
			return name_fail(why, "NUL byte in name", out);
		if (c >= 0x80)
			return name_fail(why,
			    "non-ASCII byte in name (use punycode)", out);
		if (c == ' ' || (c >= '\t' && c <= '\r'))
			return name_fail(why, "white space in name", out);
		if (c == '-' && label == 0)
			return name_fail(why, "label starts with a hyphen",
			    out);
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return name_fail(why, "invalid character in name "
			    "(letters, digits, '-', '_' only)", out);
		if (++label > DNS_LABEL_MAX)
			return name_fail(why, "label longer than 63 bytes",
			    out);
		out[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') :
		    (char)c;
	}
	/* The loop checks a label's end only when a dot follows it. */
	if (label == 0)
		return name_fail(why, "empty label", out);
	if (in[len - 1] == '-')
		return name_fail(why, "label ends with a hyphen", out);
	out[len] = '\0';
	return true;
}

bool
dns_name_match(const char *name, const char *pattern, bool wildcard)
{
	size_t nlen, plen;

	if (!wildcard)
		return strcmp(name, pattern) == 0;
	nlen = strlen(name);
	plen = strlen(pattern);
	/* A proper subdomain: at least one label and a dot before pattern. */
	if (nlen < plen + 2)
		return false;
	return name[nlen - plen - 1] == '.' &&
	    memcmp(name + nlen - plen, pattern, plen) == 0;
}
