/* addr.c: IPv4 address text, and the string copy of the log's rows (addr.h). */
#include <arpa/inet.h>
#include <string.h>

#include "gateway/addr.h"

bool
gw_addr_split(const char *s, uint32_t *addr, int *plen)
{
	const char *slash = strchr(s, '/');
	size_t n = slash != NULL ? (size_t)(slash - s) : strlen(s);
	char ip[INET_ADDRSTRLEN];
	struct in_addr in;
	int len = -1;

	if (n >= sizeof(ip))
		return false;
	memcpy(ip, s, n);
	ip[n] = '\0';
	if (slash != NULL) {
		const char *p = slash + 1;

		/* digits only (no sign, no space, nothing after), at
		 * most 32 */
		if (*p < '0' || *p > '9')
			return false;
		for (len = 0; *p >= '0' && *p <= '9' && len <= 32; p++)
			len = len * 10 + (*p - '0');
		if (*p != '\0' || len > 32)
			return false;
	}
	if (inet_pton(AF_INET, ip, &in) != 1)
		return false;
	*addr = in.s_addr;
	*plen = len;
	return true;
}

char *
gw_addr_str(uint32_t a, char *buf)
{
	const uint8_t *o = (const uint8_t *)&a;
	char *p = buf;
	int i;

	for (i = 0; i < 4; i++) {
		if (i > 0)
			*p++ = '.';
		if (o[i] >= 100)
			*p++ = (char)('0' + o[i] / 100);
		if (o[i] >= 10)
			*p++ = (char)('0' + o[i] / 10 % 10);
		*p++ = (char)('0' + o[i] % 10);
	}
	*p = '\0';
	return buf;
}

void
gw_strcopy(char *dst, size_t size, const char *src)
{
	size_t n;

	if (src == NULL)
		src = "";
	n = strnlen(src, size - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}
