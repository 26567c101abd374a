/* cni.c: sluice-cni, a CNI 1.0 plugin that puts a runtime's network namespace behind sluiced. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "gateway/addr.h"
#include "gateway/cli.h"
#include "gateway/ctl.h"
#include "gateway/names.h"
#include "gateway/policy.h"

/* sluiced always names the sandbox's end of the veth so. */
#define CNI_IFNAME		"eth0"
/* A configuration with a prevResult is a few KiB; this only bounds a
 * runaway writer. */
#define CNI_CONF_MAX		(1024 * 1024)
#define CNI_PREFIX_DEFAULT	"cni-"
/* At most this long, so a sandbox name keeps 16 characters of the ID. */
#define CNI_PREFIX_MAX		32
/* Hex digits of the ID's sha256 that end a name whose ID was cut. */
#define CNI_HASH_HEX		12
#define CNI_ARG_POLICY		"SLUICE_POLICY"
#define CNI_VERSION_LATEST	"1.0.0"

static const char *const cni_versions[] = { "0.4.0", "1.0.0" };
#define NVERSIONS	(sizeof(cni_versions) / sizeof(cni_versions[0]))

/* The spec's well-known codes (0-99 are reserved to it) and ours. */
enum cni_code {
	CNI_ERR_VERSION = 1,		/* incompatible CNI version */
	CNI_ERR_UNKNOWN_CONTAINER = 3,	/* the container is gone */
	CNI_ERR_ENV = 4,		/* invalid CNI_* variables */
	CNI_ERR_IO = 5,			/* stdin could not be read */
	CNI_ERR_DECODE = 6,		/* the configuration is not JSON */
	CNI_ERR_CONFIG = 7,		/* invalid network configuration */
	CNI_ERR_TRY_AGAIN = 11,		/* sluiced is not reachable */
	CNI_ERR_EXISTS = 100,		/* ADD of an attachment that exists */
	CNI_ERR_REFUSED = 101,		/* sluiced refused the request */
	CNI_ERR_FAILED = 102,		/* sluiced or the plugin failed */
	CNI_ERR_CHECK = 103,		/* CHECK: not as prevResult says */
};

struct cni_error {
	int	code;
	char	msg[256];
	char	details[2048];
};

/* One invocation: the CNI_* variables and the configuration on stdin. */
struct cni_req {
	const char	*command;
	const char	*containerid;
	const char	*netns;		/* NULL when unset or empty */
	const char	*ifname;
	const char	*args;		/* CNI_ARGS, NULL when unset */
	json_t		*conf;
	const char	*version;	/* conf's cniVersion, once supported */
	const char	*socket;
	const char	*policy;	/* conf's "policy", or NULL */
	const char	*prefix;
	json_t		*prev;		/* conf's prevResult, or NULL */
	char		 name[GW_SANDBOX_NAME_MAX + 1];
	char		 policy_arg[PATH_MAX];	/* SLUICE_POLICY from CNI_ARGS */
};

/* An IPv4 address with its prefix length, as in "10.213.0.2/30". */
struct cidr4 {
	struct in_addr	addr;
	unsigned	plen;
};

static int cni_fail(struct cni_error *, int, const char *, const char *, ...)
    __attribute__((format(printf, 4, 5)));

static int
cni_fail(struct cni_error *e, int code, const char *msg, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	snprintf(e->msg, sizeof(e->msg), "%s", msg);
	e->details[0] = '\0';
	if (fmt != NULL) {
		va_start(ap, fmt);
		vsnprintf(e->details, sizeof(e->details), fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* ASCII only on purpose: isalnum(3) would follow the locale. */
static bool
name_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

/* Copies src with every byte that is not printable ASCII as '?': JSON
 * strings must be UTF-8, and paths and variables need not be. */
static void
ascii_copy(char *dst, size_t dstlen, const char *src)
{
	size_t i;

	for (i = 0; src[i] != '\0' && i + 1 < dstlen; i++) {
		unsigned char c = (unsigned char)src[i];

		dst[i] = (c < 0x20 || c > 0x7e) ? '?' : (char)c;
	}
	dst[i] = '\0';
}

static void
print_json(const json_t *j)
{
	json_dumpf(j, stdout, JSON_COMPACT);
	putchar('\n');
}

static void
print_error(const struct cni_req *r, const struct cni_error *e)
{
	char msg[sizeof(e->msg)], details[sizeof(e->details)];
	json_t *j;

	ascii_copy(msg, sizeof(msg), e->msg);
	ascii_copy(details, sizeof(details), e->details);
	j = json_pack("{s:s, s:i, s:s}", "cniVersion",
	    r->version != NULL ? r->version : CNI_VERSION_LATEST,
	    "code", e->code, "msg", msg);
	if (j != NULL && details[0] != '\0')
		json_object_set_new(j, "details", json_string(details));
	if (j == NULL) {
		/* out of memory: still an error the runtime can decode */
		printf("{\"cniVersion\":\"%s\",\"code\":%d,\"msg\":\"out of "
		    "memory\"}\n", CNI_VERSION_LATEST, e->code);
		return;
	}
	print_json(j);
	json_decref(j);
}

static int
parse_cidr4(const char *s, struct cidr4 *c)
{
	uint32_t addr;
	int plen;

	if (s == NULL || !gw_addr_split(s, &addr, &plen) || plen < 0)
		return -1;
	c->addr.s_addr = addr;
	c->plen = (unsigned)plen;
	return 0;
}

static bool
cidr4_equal(const struct cidr4 *a, const struct cidr4 *b)
{
	return a->addr.s_addr == b->addr.s_addr && a->plen == b->plen;
}

/* ------------------------------------------------------------ input */

/* Reads all of stdin (at most CNI_CONF_MAX bytes) into a new buffer. */
static char *
read_stdin(size_t *lenp, struct cni_error *e)
{
	char *buf = NULL, *nb;
	size_t len = 0, cap = 0;
	ssize_t n;

	for (;;) {
		if (len == cap) {
			if (cap > CNI_CONF_MAX)
				break;
			cap = cap == 0 ? 4096 : cap * 2;
			if (cap > CNI_CONF_MAX)
				cap = CNI_CONF_MAX + 1;
			if ((nb = realloc(buf, cap)) == NULL) {
				free(buf);
				cni_fail(e, CNI_ERR_IO, "cannot read the network "
				    "configuration", "out of memory");
				return NULL;
			}
			buf = nb;
		}
		n = read(STDIN_FILENO, buf + len, cap - len);
		if (n == 0)
			break;
		if (n == -1) {
			if (errno == EINTR)
				continue;
			cni_fail(e, CNI_ERR_IO, "cannot read the network "
			    "configuration", "stdin: %s", strerror(errno));
			free(buf);
			return NULL;
		}
		len += (size_t)n;
	}
	if (len > CNI_CONF_MAX) {
		cni_fail(e, CNI_ERR_IO, "cannot read the network configuration",
		    "stdin: more than %d bytes", CNI_CONF_MAX);
		free(buf);
		return NULL;
	}
	*lenp = len;
	return buf;
}

/* An optional string member of the configuration; *out keeps its value
 * when key is absent. */
static int
conf_string(struct cni_req *r, const char *key, const char **out,
    struct cni_error *e)
{
	json_t *v = json_object_get(r->conf, key);

	if (v == NULL)
		return 0;
	if (!json_is_string(v))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network "
		    "configuration", "\"%s\" must be a string", key);
	*out = json_string_value(v);
	return 0;
}

static int
prefix_check(const char *prefix, struct cni_error *e)
{
	size_t i, len = strlen(prefix);

	if (len > CNI_PREFIX_MAX)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network "
		    "configuration", "\"sandboxPrefix\" is %zu characters, at "
		    "most %d", len, CNI_PREFIX_MAX);
	for (i = 0; i < len; i++)
		if (!name_char_ok(prefix[i]))
			break;
	if (i < len || prefix[0] == '.' || prefix[0] == '-')
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network "
		    "configuration", "\"sandboxPrefix\" \"%s\": characters "
		    "from A-Z a-z 0-9 _ . -, not starting with . or -", prefix);
	return 0;
}

/* Decodes and checks the configuration: only what every command needs. */
static int
conf_parse(struct cni_req *r, const char *buf, size_t len,
    struct cni_error *e)
{
	const char *version = NULL, *name = NULL, *type = NULL;
	json_error_t jerr;
	json_t *prev;
	size_t i;

	/* JSON_REJECT_DUPLICATES: a key given twice has no one meaning. */
	r->conf = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (r->conf == NULL)
		return cni_fail(e, CNI_ERR_DECODE, "cannot decode the network "
		    "configuration", "stdin:%d:%d: %s", jerr.line, jerr.column,
		    jerr.text);
	if (!json_is_object(r->conf))
		return cni_fail(e, CNI_ERR_DECODE, "cannot decode the network "
		    "configuration", "stdin: not a JSON object");

	if (conf_string(r, "cniVersion", &version, e) == -1)
		return -1;
	if (version == NULL)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network "
		    "configuration", "\"cniVersion\" is missing");
	for (i = 0; i < NVERSIONS; i++)
		if (strcmp(version, cni_versions[i]) == 0)
			r->version = cni_versions[i];
	if (r->version == NULL)
		return cni_fail(e, CNI_ERR_VERSION, "incompatible CNI version",
		    "cniVersion \"%.40s\": sluice-cni supports 0.4.0 and 1.0.0",
		    version);

	if (conf_string(r, "name", &name, e) == -1 ||
	    conf_string(r, "type", &type, e) == -1)
		return -1;
	if (name == NULL || name[0] == '\0' || type == NULL || type[0] == '\0')
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network "
		    "configuration", "\"%s\" is missing", name == NULL ||
		    name[0] == '\0' ? "name" : "type");

	r->socket = CTL_SOCKET_DEFAULT;
	r->prefix = CNI_PREFIX_DEFAULT;
	if (conf_string(r, "socket", &r->socket, e) == -1 ||
	    conf_string(r, "policy", &r->policy, e) == -1 ||
	    conf_string(r, "sandboxPrefix", &r->prefix, e) == -1)
		return -1;
	if (r->socket[0] == '\0')
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network "
		    "configuration", "\"socket\" is empty");
	if (prefix_check(r->prefix, e) == -1)
		return -1;

	prev = json_object_get(r->conf, "prevResult");
	if (prev != NULL && !json_is_object(prev))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network "
		    "configuration", "\"prevResult\" must be an object");
	r->prev = prev;
	return 0;
}

/* The CNI_* variables the command needs. */
static int
env_parse(struct cni_req *r, bool need_netns, struct cni_error *e)
{
	r->containerid = getenv("CNI_CONTAINERID");
	r->ifname = getenv("CNI_IFNAME");
	r->netns = getenv("CNI_NETNS");
	r->args = getenv("CNI_ARGS");
	if (r->netns != NULL && r->netns[0] == '\0')
		r->netns = NULL;

	if (r->containerid == NULL || r->containerid[0] == '\0')
		return cni_fail(e, CNI_ERR_ENV, "CNI_CONTAINERID is not set",
		    NULL);
	if (r->ifname == NULL || r->ifname[0] == '\0')
		return cni_fail(e, CNI_ERR_ENV, "CNI_IFNAME is not set", NULL);
	if (need_netns && r->netns == NULL)
		return cni_fail(e, CNI_ERR_ENV, "CNI_NETNS is not set", NULL);
	return 0;
}

/*
 * The sandbox's name: the prefix and the container ID, each character
 * outside the name rule as '_'. An ID too long for the rest of
 * GW_SANDBOX_NAME_MAX keeps its start and ends in "-" and a hash of all
 * of it, so two long IDs that share a start still get two names.
 */
static int
sandbox_name(struct cni_req *r, struct cni_error *e)
{
	const char *id = r->containerid;
	size_t plen = strlen(r->prefix), room = GW_SANDBOX_NAME_MAX - plen;
	size_t idlen = strlen(id), keep, i;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen;
	char *p;

	keep = idlen <= room ? idlen : room - 1 - CNI_HASH_HEX;
	memcpy(r->name, r->prefix, plen);
	p = r->name + plen;
	for (i = 0; i < keep; i++)
		*p++ = name_char_ok(id[i]) ? id[i] : '_';
	if (keep < idlen) {
		if (EVP_Digest(id, idlen, md, &mdlen, EVP_sha256(), NULL) != 1)
			return cni_fail(e, CNI_ERR_FAILED, "cannot name the "
			    "sandbox", "sha256 failed");
		*p++ = '-';
		for (i = 0; i < CNI_HASH_HEX / 2; i++) {
			snprintf(p, 3, "%02x", md[i]);
			p += 2;
		}
	}
	*p = '\0';
	if (!gw_sandbox_name_valid(r->name))
		return cni_fail(e, CNI_ERR_ENV, "invalid CNI_CONTAINERID",
		    "\"%.64s\" must start with a letter or digit", id);
	return 0;
}

/*
 * The policy file: SLUICE_POLICY in CNI_ARGS (one container's choice)
 * over "policy" in the configuration (the network's). Sets *from_args to
 * say whom an error is about.
 */
static int
policy_path(struct cni_req *r, const char **path, bool *from_args,
    struct cni_error *e)
{
	const char *p = r->args, *end, *eq;
	size_t klen = strlen(CNI_ARG_POLICY), vlen;

	*path = r->policy;
	*from_args = false;
	/* "K=V;K=V": keys and values are plain, the spec defines no
	 * escaping; a pair without '=' is not ours to judge. */
	while (p != NULL && *p != '\0') {
		end = strchr(p, ';');
		if (end == NULL)
			end = p + strlen(p);
		eq = memchr(p, '=', (size_t)(end - p));
		if (eq != NULL && (size_t)(eq - p) == klen &&
		    memcmp(p, CNI_ARG_POLICY, klen) == 0) {
			vlen = (size_t)(end - eq - 1);
			if (vlen == 0 || vlen >= sizeof(r->policy_arg))
				return cni_fail(e, CNI_ERR_ENV, "invalid "
				    "CNI_ARGS", CNI_ARG_POLICY " is %s",
				    vlen == 0 ? "empty" : "too long");
			memcpy(r->policy_arg, eq + 1, vlen);
			r->policy_arg[vlen] = '\0';
			*path = r->policy_arg;
			*from_args = true;
		}
		p = *end == ';' ? end + 1 : end;
	}
	if (*path == NULL)
		return cni_fail(e, CNI_ERR_CONFIG, "no policy", "set \"policy\" "
		    "in the network configuration or " CNI_ARG_POLICY "=FILE in "
		    "CNI_ARGS");
	if ((*path)[0] != '/')
		return cni_fail(e, *from_args ? CNI_ERR_ENV : CNI_ERR_CONFIG,
		    *from_args ? "invalid CNI_ARGS" : "invalid network "
		    "configuration", "policy \"%s\" must be an absolute path",
		    *path);
	return 0;
}

/* ------------------------------------------------------------ namespaces */

/* Opens CNI_NETNS, which must be a network namespace. */
static int
netns_open(const char *path, struct cni_error *e)
{
	int fd;

	if (path[0] != '/')
		return cni_fail(e, CNI_ERR_ENV, "invalid CNI_NETNS",
		    "\"%s\" must be an absolute path", path);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT)
			return cni_fail(e, CNI_ERR_UNKNOWN_CONTAINER, "the "
			    "container's network namespace does not exist",
			    "CNI_NETNS %s: %s", path, strerror(errno));
		return cni_fail(e, CNI_ERR_ENV, "invalid CNI_NETNS", "%s: %s",
		    path, strerror(errno));
	}
	if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNET) {
		close(fd);
		return cni_fail(e, CNI_ERR_ENV, "invalid CNI_NETNS",
		    "%s is not a network namespace", path);
	}
	return fd;
}

/*
 * Runs fn(arg) inside the network namespace nsfd and comes back. Returns
 * what fn returns (at least 0), or -1 if either switch failed. Sockets fn
 * opens belong to that namespace; the control socket is a path, which
 * namespaces do not change.
 */
static int
in_netns(int nsfd, int (*fn)(void *), void *arg, struct cni_error *e)
{
	int self, rc;

	if ((self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) == -1)
		return cni_fail(e, CNI_ERR_FAILED, "cannot look into CNI_NETNS",
		    "/proc/self/ns/net: %s", strerror(errno));
	if (setns(nsfd, CLONE_NEWNET) == -1) {
		close(self);
		return cni_fail(e, CNI_ERR_FAILED, "cannot look into CNI_NETNS",
		    "setns: %s", strerror(errno));
	}
	rc = fn(arg);
	if (setns(self, CLONE_NEWNET) == -1) {
		/* nothing more may run in the container's namespace */
		close(self);
		return cni_fail(e, CNI_ERR_FAILED, "cannot leave CNI_NETNS",
		    "setns: %s", strerror(errno));
	}
	close(self);
	return rc;
}

/* 1 if this namespace has an interface CNI_IFNAME. */
static int
ns_has_ifname(void *arg)
{
	(void)arg;
	return if_nametoindex(CNI_IFNAME) != 0;
}

/* Writes CNI_IFNAME's MAC into arg (18 bytes); 0, or 1 if it has none. */
static int
ns_mac(void *arg)
{
	char *mac = arg;
	const unsigned char *a;
	struct ifreq ifr;
	int fd, rc = 1;

	if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return 1;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", CNI_IFNAME);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) == 0) {
		a = (const unsigned char *)ifr.ifr_hwaddr.sa_data;
		snprintf(mac, 18, "%02x:%02x:%02x:%02x:%02x:%02x", a[0], a[1],
		    a[2], a[3], a[4], a[5]);
		rc = 0;
	}
	close(fd);
	return rc;
}

/* 1 if CNI_IFNAME carries the address arg (a struct cidr4), else 0. */
static int
ns_has_addr(void *arg)
{
	const struct cidr4 *want = arg;
	struct ifaddrs *ifa, *i;
	struct cidr4 got;
	uint32_t mask;
	int found = 0;

	if (getifaddrs(&ifa) == -1)
		return 0;
	for (i = ifa; i != NULL && !found; i = i->ifa_next) {
		if (i->ifa_addr == NULL || i->ifa_netmask == NULL ||
		    i->ifa_addr->sa_family != AF_INET ||
		    strcmp(i->ifa_name, CNI_IFNAME) != 0)
			continue;
		got.addr = ((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr;
		mask = ntohl(((struct sockaddr_in *)(void *)
		    i->ifa_netmask)->sin_addr.s_addr);
		for (got.plen = 0; got.plen < 32 && (mask & (1U << 31)); got.plen++)
			mask <<= 1;
		found = cidr4_equal(&got, want);
	}
	freeifaddrs(ifa);
	return found;
}

/* 1 if paths a and b are the same namespace, 0 if not, -1 if either
 * cannot be looked at. */
static int
same_netns(const char *a, const char *b)
{
	struct stat sa, sb;

	if (stat(a, &sa) == -1 || stat(b, &sb) == -1)
		return -1;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* ------------------------------------------------------------ sluiced */

/* One exchange with sluiced; *ctl_rc gets ctl_client_call()'s EXIT_*. */
static int
call(const struct cni_req *r, const json_t *req, json_t **reply,
    int *ctl_rc, struct cni_error *e)
{
	char err[1024];

	*ctl_rc = ctl_client_call(r->socket, req, reply, err, sizeof(err));
	switch (*ctl_rc) {
	case EXIT_OK:
		return 0;
	case EXIT_UNREACHABLE:
		return cni_fail(e, CNI_ERR_TRY_AGAIN, "sluiced is not reachable",
		    "%s", err);
	case EXIT_USAGE:
		return cni_fail(e, CNI_ERR_REFUSED, "sluiced refused the "
		    "request", "%s", err);
	default:
		return cni_fail(e, CNI_ERR_FAILED, "sluiced failed", "%s", err);
	}
}

/* Looks r->name up in sluiced's list. Returns 1 with *sb (the caller
 * json_decref()s it), 0 if there is no such sandbox, -1 with e. */
static int
sandbox_find(const struct cni_req *r, json_t **sb, struct cni_error *e)
{
	json_t *req, *reply = NULL, *list, *item;
	const char *name;
	size_t i;
	int ctl_rc, found = 0;

	*sb = NULL;
	/* by name: the whole list of thousands would outgrow a reply (an
	 * older sluiced sends the whole list, searched below all the same) */
	if ((req = json_pack("{s:s, s:s}", "cmd", "sandbox.list", "name",
	    r->name)) == NULL)
		return cni_fail(e, CNI_ERR_FAILED, "out of memory", NULL);
	if (call(r, req, &reply, &ctl_rc, e) == -1) {
		json_decref(req);
		return -1;
	}
	json_decref(req);
	list = json_object_get(reply, "sandboxes");
	if (!json_is_array(list)) {
		json_decref(reply);
		return cni_fail(e, CNI_ERR_FAILED, "sluiced failed",
		    "unexpected reply: no \"sandboxes\" array");
	}
	json_array_foreach(list, i, item) {
		name = ctl_client_string(item, "name");
		if (name != NULL && strcmp(name, r->name) == 0) {
			*sb = json_incref(item);
			found = 1;
			break;
		}
	}
	json_decref(reply);
	return found;
}

/* ------------------------------------------------------------ commands */

/* A deep copy of prev[key] if it is of that type, or a new empty one. */
static json_t *
prev_copy(const json_t *prev, const char *key, bool array)
{
	json_t *v = json_object_get(prev, key);

	if (array)
		return json_is_array(v) ? json_deep_copy(v) : json_array();
	return json_is_object(v) ? json_deep_copy(v) : json_object();
}

/*
 * The ADD result: prevResult's entries (an earlier plugin in the chain)
 * with ours after them; our resolver first among the nameservers, since
 * the policy lets DNS reach only the gateway.
 */
static json_t *
add_result(const struct cni_req *r, const char *addr, const char *gw,
    const char *mac)
{
	json_t *res, *ifaces, *ips, *dns, *ns, *old, *v, *ip;
	size_t i, idx;

	ns = json_array();
	if ((res = json_object()) == NULL || ns == NULL)
		goto fail;
	/* res owns each part from here on: one decref undoes it all */
	if (json_object_set_new(res, "cniVersion",
	    json_string(r->version)) == -1 ||
	    json_object_set_new(res, "interfaces",
	    prev_copy(r->prev, "interfaces", true)) == -1 ||
	    json_object_set_new(res, "ips",
	    prev_copy(r->prev, "ips", true)) == -1 ||
	    json_object_set_new(res, "routes",
	    prev_copy(r->prev, "routes", true)) == -1 ||
	    json_object_set_new(res, "dns",
	    prev_copy(r->prev, "dns", false)) == -1)
		goto fail;
	ifaces = json_object_get(res, "interfaces");
	ips = json_object_get(res, "ips");
	dns = json_object_get(res, "dns");

	idx = json_array_size(ifaces);
	if (json_array_append_new(ifaces, json_pack("{s:s, s:s*, s:s}",
	    "name", CNI_IFNAME, "mac", mac, "sandbox", r->netns)) == -1)
		goto fail;
	ip = json_pack("{s:s, s:s, s:I}", "address", addr, "gateway", gw,
	    "interface", (json_int_t)idx);
	/* 0.4.0 results name the IP version; 1.0.0 dropped the field */
	if (ip != NULL && strcmp(r->version, "0.4.0") == 0 &&
	    json_object_set_new(ip, "version", json_string("4")) == -1) {
		json_decref(ip);
		goto fail;
	}
	if (json_array_append_new(ips, ip) == -1 ||
	    json_array_append_new(json_object_get(res, "routes"),
	    json_pack("{s:s, s:s}", "dst", "0.0.0.0/0", "gw", gw)) == -1 ||
	    json_array_append_new(ns, json_string(gw)) == -1)
		goto fail;
	old = json_object_get(dns, "nameservers");
	json_array_foreach(old, i, v)
		if ((!json_is_string(v) || strcmp(json_string_value(v),
		    gw) != 0) && json_array_append(ns, v) == -1)
			goto fail;
	if (json_object_set_new(dns, "nameservers", ns) == -1) {
		ns = NULL;	/* set_new let go of it */
		goto fail;
	}
	return res;
fail:
	json_decref(ns);
	json_decref(res);
	return NULL;
}

static int
cmd_add(struct cni_req *r, json_t **result, struct cni_error *e)
{
	struct policy *p = NULL;
	struct cidr4 c;
	struct cni_error e2;
	json_t *req = NULL, *reply = NULL, *sb, *other = NULL;
	json_error_t jerr;
	const char *path, *addr, *gw;
	char err[1024], mac[18];
	bool from_args;
	int nsfd = -1, rc = -1, ctl_rc, n;

	*result = NULL;
	if (strcmp(r->ifname, CNI_IFNAME) != 0)
		return cni_fail(e, CNI_ERR_ENV, "invalid CNI_IFNAME", "\"%.32s\": "
		    "sluiced names the interface in the sandbox " CNI_IFNAME
		    "; use CNI_IFNAME=" CNI_IFNAME " for this network",
		    r->ifname);
	if (policy_path(r, &path, &from_args, e) == -1)
		return -1;
	if ((nsfd = netns_open(r->netns, e)) == -1)
		return -1;
	/* The spec wants an error here, and sluiced would fail later with
	 * a less helpful one. */
	if ((n = in_netns(nsfd, ns_has_ifname, NULL, e)) == -1)
		goto cleanup;
	if (n == 1) {
		cni_fail(e, CNI_ERR_EXISTS, "the container already has an "
		    "interface " CNI_IFNAME, "CNI_NETNS %s", r->netns);
		goto cleanup;
	}
	if ((p = policy_load(path, err, sizeof(err))) == NULL) {
		cni_fail(e, from_args ? CNI_ERR_ENV : CNI_ERR_CONFIG,
		    from_args ? "invalid policy in CNI_ARGS" : "invalid policy "
		    "in the network configuration", "%s", err);
		goto cleanup;
	}

	req = json_pack_ex(&jerr, 0, "{s:s, s:s, s:s%, s:s, s:s}",
	    "cmd", "sandbox.add", "name", r->name, "policy", p->text,
	    p->textlen, "origin", path, "netns", r->netns);
	if (req == NULL) {
		/* only a path that is not UTF-8 gets here */
		cni_fail(e, CNI_ERR_ENV, "invalid CNI_NETNS or policy path",
		    "%s", jerr.text);
		goto cleanup;
	}
	if (call(r, req, &reply, &ctl_rc, e) == -1) {
		/* A second ADD without DEL: say so rather than relay the
		 * daemon's words. */
		if (ctl_rc == EXIT_USAGE && sandbox_find(r, &other, &e2) == 1)
			cni_fail(e, CNI_ERR_EXISTS, "the container is attached "
			    "already", "sluiced has a sandbox %s for it",
			    r->name);
		goto cleanup;
	}
	sb = json_object_get(reply, "sandbox");
	addr = ctl_client_string(sb, "addr");
	gw = ctl_client_string(sb, "gateway");
	if (parse_cidr4(addr, &c) == -1 || gw == NULL ||
	    inet_pton(AF_INET, gw, &c.addr) != 1) {
		/* the sandbox may exist: the runtime's DEL removes it */
		cni_fail(e, CNI_ERR_FAILED, "sluiced failed", "unexpected "
		    "reply: no sandbox address and gateway");
		goto cleanup;
	}
	if ((n = in_netns(nsfd, ns_mac, mac, e)) == -1)
		goto cleanup;
	if ((*result = add_result(r, addr, gw, n == 0 ? mac : NULL)) == NULL) {
		cni_fail(e, CNI_ERR_FAILED, "out of memory", NULL);
		goto cleanup;
	}
	rc = 0;
cleanup:
	if (nsfd != -1)
		close(nsfd);
	json_decref(other);
	json_decref(reply);
	json_decref(req);
	policy_free(p);
	return rc;
}

/*
 * DEL removes the sandbox by name whatever became of the namespace
 * (CNI_NETNS may be unset or gone), and succeeds when there is nothing
 * to remove. With sluiced down it fails: the sandbox would come back from
 * its state on restart.
 */
static int
cmd_del(struct cni_req *r, struct cni_error *e)
{
	json_t *req, *reply = NULL, *sb = NULL;
	struct cni_error e2;
	int ctl_rc, found;

	/* ADD refuses other names, so such an attachment has nothing of
	 * ours; the sandbox of this container's eth0 is not its to remove. */
	if (strcmp(r->ifname, CNI_IFNAME) != 0)
		return 0;
	if ((req = json_pack("{s:s, s:s}", "cmd", "sandbox.del", "name",
	    r->name)) == NULL)
		return cni_fail(e, CNI_ERR_FAILED, "out of memory", NULL);
	if (call(r, req, &reply, &ctl_rc, e) == 0) {
		json_decref(reply);
		json_decref(req);
		return 0;
	}
	json_decref(req);
	if (ctl_rc != EXIT_USAGE)
		return -1;
	/* "invalid" is also what a sandbox that is not there gets */
	found = sandbox_find(r, &sb, &e2);
	json_decref(sb);
	return found == 0 ? 0 : -1;
}

/* True if prevResult lists want among its ips. */
static bool
prev_has_addr(const json_t *prev, const struct cidr4 *want)
{
	const json_t *ip;
	struct cidr4 c;
	size_t i;

	json_array_foreach(json_object_get(prev, "ips"), i, ip)
		if (parse_cidr4(ctl_client_string(ip, "address"), &c) == 0 &&
		    cidr4_equal(&c, want))
			return true;
	return false;
}

static int
cmd_check(struct cni_req *r, struct cni_error *e)
{
	json_t *sb = NULL;
	struct cidr4 c;
	const char *addr, *path;
	int nsfd = -1, rc = -1, n;

	if (strcmp(r->ifname, CNI_IFNAME) != 0)
		return cni_fail(e, CNI_ERR_ENV, "invalid CNI_IFNAME", "\"%.32s\": "
		    "sluice-cni attaches only " CNI_IFNAME, r->ifname);
	if (r->prev == NULL)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network "
		    "configuration", "CHECK needs \"prevResult\"");
	if ((nsfd = netns_open(r->netns, e)) == -1)
		return -1;
	if ((n = sandbox_find(r, &sb, e)) == -1)
		goto cleanup;
	if (n == 0) {
		cni_fail(e, CNI_ERR_CHECK, "the container is not attached",
		    "sluiced has no sandbox %s", r->name);
		goto cleanup;
	}
	addr = ctl_client_string(sb, "addr");
	path = ctl_client_string(sb, "netns");
	if (parse_cidr4(addr, &c) == -1 || path == NULL) {
		cni_fail(e, CNI_ERR_FAILED, "sluiced failed", "unexpected "
		    "reply: sandbox %s has no address or namespace", r->name);
		goto cleanup;
	}
	if (same_netns(path, r->netns) != 1) {
		cni_fail(e, CNI_ERR_CHECK, "the sandbox governs another "
		    "namespace", "sandbox %s is %s, not CNI_NETNS %s", r->name,
		    path, r->netns);
		goto cleanup;
	}
	if (!prev_has_addr(r->prev, &c)) {
		cni_fail(e, CNI_ERR_CHECK, "the address differs from "
		    "prevResult", "sandbox %s has %s, which prevResult does not "
		    "list", r->name, addr);
		goto cleanup;
	}
	if ((n = in_netns(nsfd, ns_has_addr, &c, e)) == -1)
		goto cleanup;
	if (n == 0) {
		cni_fail(e, CNI_ERR_CHECK, "the container's interface lost its "
		    "address", CNI_IFNAME " in %s does not carry %s", r->netns,
		    addr);
		goto cleanup;
	}
	rc = 0;
cleanup:
	close(nsfd);
	json_decref(sb);
	return rc;
}

static void
print_version(void)
{
	json_t *j, *list = json_array();
	size_t i;

	for (i = 0; i < NVERSIONS; i++)
		json_array_append_new(list, json_string(cni_versions[i]));
	j = json_pack("{s:s, s:o}", "cniVersion", CNI_VERSION_LATEST,
	    "supportedVersions", list);
	if (j != NULL)
		print_json(j);
	json_decref(j);
}

int
main(void)
{
	struct cni_req r;
	struct cni_error e;
	json_t *result = NULL;
	char *buf = NULL;
	size_t len;
	int rc = -1;

	memset(&r, 0, sizeof(r));
	memset(&e, 0, sizeof(e));
	r.command = getenv("CNI_COMMAND");
	if (r.command != NULL && strcmp(r.command, "VERSION") == 0) {
		/* the runtime's {"cniVersion":...} on stdin changes nothing */
		print_version();
		return fflush(stdout) == 0 ? 0 : 1;
	}
	if (r.command == NULL || r.command[0] == '\0') {
		cni_fail(&e, CNI_ERR_ENV, "CNI_COMMAND is not set", "sluice-cni "
		    "is run by a container runtime; see sluice-cni(8)");
		goto out;
	}
	if (strcmp(r.command, "ADD") != 0 && strcmp(r.command, "DEL") != 0 &&
	    strcmp(r.command, "CHECK") != 0) {
		cni_fail(&e, CNI_ERR_ENV, "invalid CNI_COMMAND", "\"%.16s\": "
		    "sluice-cni knows ADD, DEL, CHECK and VERSION", r.command);
		goto out;
	}
	if ((buf = read_stdin(&len, &e)) == NULL ||
	    conf_parse(&r, buf, len, &e) == -1 ||
	    env_parse(&r, strcmp(r.command, "DEL") != 0, &e) == -1 ||
	    sandbox_name(&r, &e) == -1)
		goto out;

	if (strcmp(r.command, "ADD") == 0)
		rc = cmd_add(&r, &result, &e);
	else if (strcmp(r.command, "DEL") == 0)
		rc = cmd_del(&r, &e);
	else
		rc = cmd_check(&r, &e);
out:
	if (rc == 0 && result != NULL)
		print_json(result);
	else if (rc == -1)
		print_error(&r, &e);
	json_decref(result);
	json_decref(r.conf);
	free(buf);
	if (fflush(stdout) != 0)
		return 1;
	return rc == 0 ? 0 : 1;
}
