/* sandbox.c: sandboxes — namespace, veth, addresses, policy, kept state. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/names.h"

static size_t
bucket_of(const struct gw *gw, uint32_t ifindex)
{
	/* ifindexes are small sequential integers: a multiplicative hash
	 * spreads them; the table is sized to the pool, so chains stay short */
	return (size_t)((ifindex * 2654435761u) & (gw->nbuckets - 1));
}

struct gw_sandbox *
gw_sandbox_by_ifindex(struct gw *gw, uint32_t ifindex)
{
	struct gw_sandbox *sb;

	for (sb = gw->by_ifindex[bucket_of(gw, ifindex)]; sb; sb = sb->hnext)
		if (sb->ifindex == ifindex)
			return sb;
	return NULL;
}

struct gw_sandbox *
gw_sandbox_by_name(struct gw *gw, const char *name)
{
	unsigned i;

	/* Control requests only, never per packet. */
	for (i = 0; i < gw->pool_slots; i++)
		if (gw->slots[i] && strcmp(gw->slots[i]->name, name) == 0)
			return gw->slots[i];
	return NULL;
}

static void
link_sandbox(struct gw *gw, struct gw_sandbox *sb)
{
	size_t b = bucket_of(gw, sb->ifindex);

	gw->slots[sb->slot] = sb;
	sb->hnext = gw->by_ifindex[b];
	gw->by_ifindex[b] = sb;
	gw->nsandboxes++;
}

static void
unlink_sandbox(struct gw *gw, struct gw_sandbox *sb)
{
	struct gw_sandbox **pp = &gw->by_ifindex[bucket_of(gw, sb->ifindex)];

	while (*pp && *pp != sb)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = sb->hnext;
	gw->slots[sb->slot] = NULL;
	gw->nsandboxes--;
}

static void
sandbox_free(struct gw_sandbox *sb)
{
	if (sb == NULL)
		return;
	policy_free(sb->policy);
	free(sb);
}

int
gw_sandboxes_init(struct gw *gw, char *err, size_t errlen)
{
	const char *slash = strchr(gw->cfg.pool, '/');
	char ip[INET_ADDRSTRLEN];
	struct in_addr in;
	unsigned long plen;
	char *end;

	if (slash == NULL || (size_t)(slash - gw->cfg.pool) >= sizeof(ip))
		goto bad;
	memcpy(ip, gw->cfg.pool, (size_t)(slash - gw->cfg.pool));
	ip[slash - gw->cfg.pool] = '\0';
	errno = 0;
	plen = strtoul(slash + 1, &end, 10);
	if (*end != '\0' || errno || plen < 8 || plen > 29 ||
	    inet_pton(AF_INET, ip, &in) != 1)
		goto bad;
	gw->pool_mask = htonl(~0u << (32 - plen));
	if ((in.s_addr & ~gw->pool_mask) != 0)
		goto bad;
	gw->pool_net = in.s_addr;
	gw->pool_slots = 1u << (32 - plen - 2);
	if (gw->pool_slots > 65536)
		gw->pool_slots = 65536;	/* the ifname space sg0..sg65535 */
	for (gw->nbuckets = 64; gw->nbuckets < gw->pool_slots; gw->nbuckets <<= 1)
		;
	gw->slots = calloc(gw->pool_slots, sizeof(*gw->slots));
	gw->by_ifindex = calloc(gw->nbuckets, sizeof(*gw->by_ifindex));
	if (gw->slots == NULL || gw->by_ifindex == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
bad:
	snprintf(err, errlen, "--pool %s: want a network like 10.213.0.0/16 "
	    "(prefix 8..29, host bits zero)", gw->cfg.pool);
	return -1;
}

static void
slot_addrs(const struct gw *gw, unsigned slot, uint32_t *gwa, uint32_t *sba)
{
	uint32_t base = ntohl(gw->pool_net) + slot * 4;

	*gwa = htonl(base + 1);
	*sba = htonl(base + 2);
}

static const char *
ip_str(uint32_t a, char *buf)
{
	struct in_addr in = { .s_addr = a };

	return inet_ntop(AF_INET, &in, buf, INET_ADDRSTRLEN);
}

/* ---- kept state: one JSON file per sandbox under state-dir/sandboxes --- */

static void
state_path(const struct gw *gw, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/sandboxes/%s.json", gw->cfg.state_dir, name);
}

static int
mkdirs(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];
	char *p;

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) == -1 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(tmp, mode) == -1 && errno != EEXIST)
		return -1;
	return 0;
}

static int
state_save(struct gw *gw, const struct gw_sandbox *sb, char *err,
    size_t errlen)
{
	char dir[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX + 8];
	json_t *o;
	int rc = -1;

	snprintf(dir, sizeof(dir), "%s/sandboxes", gw->cfg.state_dir);
	if (mkdirs(dir, 0700) == -1) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	state_path(gw, sb->name, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	o = json_pack("{s:s, s:i, s:I, s:s}", "name", sb->name,
	    "slot", (int)sb->slot, "created_us", (json_int_t)sb->created_us,
	    "policy", sb->policy->text);
	if (o == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* write, fsync and rename: a crash leaves the old state or the new */
	if (json_dump_file(o, tmp, JSON_COMPACT) == -1) {
		snprintf(err, errlen, "%s: cannot write", tmp);
	} else if (rename(tmp, path) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		unlink(tmp);
	} else {
		rc = 0;
	}
	json_decref(o);
	return rc;
}

static void
state_remove(struct gw *gw, const char *name)
{
	char path[PATH_MAX];

	state_path(gw, name, path, sizeof(path));
	unlink(path);
}

/* ---- the namespace plumbing ------------------------------------------ */

static void
resolv_conf_write(const struct gw_sandbox *sb)
{
	char dir[PATH_MAX], path[PATH_MAX + 16], ip[INET_ADDRSTRLEN];
	FILE *f;

	snprintf(dir, sizeof(dir), "/etc/netns/%s", sb->name);
	if (mkdirs(dir, 0755) == -1) {
		log_warn("%s", dir);
		return;
	}
	snprintf(path, sizeof(path), "%s/resolv.conf", dir);
	if ((f = fopen(path, "w")) == NULL) {
		log_warn("%s", path);
		return;
	}
	fprintf(f, "# written by sluiced: the gateway is this sandbox's only resolver\n"
	    "nameserver %s\n", ip_str(sb->gw_addr, ip));
	fclose(f);
}

static void
resolv_conf_remove(const char *name)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];

	snprintf(dir, sizeof(dir), "/etc/netns/%s", name);
	snprintf(path, sizeof(path), "%s/resolv.conf", dir);
	unlink(path);
	rmdir(dir);
}

static uint32_t
ifindex_in_gateway(struct gw *gw, const char *ifname)
{
	uint32_t idx;

	if (gw_netns_enter(gw->gw_nsfd) == -1)
		fatal("setns %s", gw->cfg.netns);
	idx = if_nametoindex(ifname);
	if (gw_netns_enter(gw->home_nsfd) == -1)
		fatal("setns back home");
	return idx;
}

/*
 * Builds the sandbox's namespace and veth: three programs in all (netns
 * add, then one ip -batch per side).
 */
static int
plumb(struct gw *gw, struct gw_sandbox *sb, bool create_netns, char *err,
    size_t errlen)
{
	char batch[512], gwip[INET_ADDRSTRLEN], sbip[INET_ADDRSTRLEN];
	char *add[] = { "ip", "netns", "add", sb->name, NULL };
	char *gwside[] = { "ip", "-n", (char *)gw->cfg.netns, "-batch", "-", NULL };
	char *sbside[] = { "ip", "-n", sb->name, "-batch", "-", NULL };

	if (create_netns && gw_run(add, NULL, err, errlen) == -1)
		return -1;
	ip_str(sb->gw_addr, gwip);
	ip_str(sb->addr, sbip);
	snprintf(batch, sizeof(batch),
	    "link add %s type veth peer name " GW_SB_IF " netns %s\n"
	    "link set %s alias %s\n"
	    "addr add %s/30 dev %s\n"
	    "link set %s up\n",
	    sb->ifname, sb->name, sb->ifname, sb->name, gwip, sb->ifname,
	    sb->ifname);
	if (gw_run(gwside, batch, err, errlen) == -1)
		return -1;
	snprintf(batch, sizeof(batch),
	    "link set lo up\n"
	    "addr add %s/30 dev " GW_SB_IF "\n"
	    "link set " GW_SB_IF " up\n"
	    "route add default via %s dev " GW_SB_IF "\n",
	    sbip, gwip);
	if (gw_run(sbside, batch, err, errlen) == -1)
		return -1;
	sb->ifindex = ifindex_in_gateway(gw, sb->ifname);
	if (sb->ifindex == 0) {
		snprintf(err, errlen, "%s: not found after creation", sb->ifname);
		return -1;
	}
	resolv_conf_write(sb);
	return 0;
}

static void
unplumb(struct gw *gw, const char *name, const char *ifname)
{
	char *del_link[] = { "ip", "-n", (char *)gw->cfg.netns, "link", "del",
	    (char *)ifname, NULL };
	char *del_ns[] = { "ip", "netns", "del", (char *)name, NULL };

	/* deleting one end of a veth deletes both */
	if (ifindex_in_gateway(gw, ifname) != 0)
		gw_run_quiet(del_link);
	if (gw_netns_exists(name))
		gw_run_quiet(del_ns);
	resolv_conf_remove(name);
}

static struct gw_sandbox *
sandbox_new(struct gw *gw, const char *name, unsigned slot)
{
	struct gw_sandbox *sb = calloc(1, sizeof(*sb));

	if (sb == NULL)
		return NULL;
	snprintf(sb->name, sizeof(sb->name), "%s", name);
	sb->slot = slot;
	snprintf(sb->ifname, sizeof(sb->ifname), GW_SB_IF_PREFIX "%u", slot);
	snprintf(sb->netns_path, sizeof(sb->netns_path), "/run/netns/%s", name);
	slot_addrs(gw, slot, &sb->gw_addr, &sb->addr);
	return sb;
}

static void
log_sandbox(struct gw *gw, const struct gw_sandbox *sb, const char *event)
{
	char ip[INET_ADDRSTRLEN], cidr[INET_ADDRSTRLEN + 4];

	snprintf(cidr, sizeof(cidr), "%s/30", ip_str(sb->addr, ip));
	if (store_put_sandbox(gw->store, store_now_us(), sb->name, event,
	    sb->ifname, cidr) == -1)
		log_warn("sandbox %s: %s not logged", sb->name, event);
}

static void
log_policy(struct gw *gw, const struct gw_sandbox *sb)
{
	if (store_put_policy(gw->store, store_now_us(), sb->name,
	    sb->policy->sha256, sb->policy->text) == -1)
		log_warn("sandbox %s: policy %s not logged", sb->name,
		    sb->policy->sha256);
}

/*
 * Gives an existing network namespace (attach: /proc/PID/ns/net, a
 * runtime's /run/netns/X, a bind-mounted file) the name /run/netns/NAME,
 * as `ip netns attach` does, so it can be plumbed like one sluice made.
 * Deleting the sandbox later removes the name only: the namespace lives
 * on with whatever holds it.
 */
static int
attach_netns(struct gw *gw, const char *name, const char *attach, char *err,
    size_t errlen)
{
	char target[PATH_MAX];
	struct statfs sfs;
	struct stat st, gst, hst;
	int fd, tfd, type;

	if ((fd = open(attach, O_RDONLY | O_CLOEXEC)) == -1) {
		snprintf(err, errlen, "%s: %s", attach, strerror(errno));
		errno = EINVAL;
		return -1;
	}
	type = ioctl(fd, NS_GET_NSTYPE);
	if (fstatfs(fd, &sfs) == -1 || sfs.f_type != NSFS_MAGIC ||
	    type != CLONE_NEWNET || fstat(fd, &st) == -1) {
		snprintf(err, errlen, "%s: not a network namespace", attach);
		close(fd);
		errno = EINVAL;
		return -1;
	}
	close(fd);
	/* never the gateway's own namespace, nor the host's */
	if ((fstat(gw->gw_nsfd, &gst) == 0 && gst.st_ino == st.st_ino &&
	    gst.st_dev == st.st_dev) || (fstat(gw->host_nsfd, &hst) == 0 &&
	    hst.st_ino == st.st_ino && hst.st_dev == st.st_dev)) {
		snprintf(err, errlen, "%s: the gateway's or the host's own "
		    "namespace cannot be a sandbox", attach);
		errno = EINVAL;
		return -1;
	}
	snprintf(target, sizeof(target), "/run/netns/%s", name);
	if (mkdirs("/run/netns", 0755) == -1 ||
	    (tfd = open(target, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0)) == -1) {
		snprintf(err, errlen, "%s: %s", target, strerror(errno));
		return -1;
	}
	close(tfd);
	if (mount(attach, target, "none", MS_BIND, NULL) == -1) {
		snprintf(err, errlen, "bind %s on %s: %s", attach, target,
		    strerror(errno));
		unlink(target);
		return -1;
	}
	return 0;
}

int
gw_sandbox_add(struct gw *gw, const char *name, const char *policy_text,
    size_t policy_len, const char *origin, const char *attach,
    struct gw_sandbox **out, char *err, size_t errlen)
{
	struct gw_sandbox *sb = NULL;
	struct policy *p;
	unsigned slot;

	*out = NULL;
	if (!gw_sandbox_name_valid(name)) {
		snprintf(err, errlen, "invalid sandbox name \"%s\": 1..%d characters "
		    "from A-Z a-z 0-9 _ . -, not starting with . or -", name,
		    GW_SANDBOX_NAME_MAX);
		errno = EINVAL;
		return -1;
	}
	if (gw_sandbox_by_name(gw, name) != NULL) {
		snprintf(err, errlen, "sandbox %s already exists", name);
		errno = EEXIST;
		return -1;
	}
	if (gw_netns_exists(name)) {
		snprintf(err, errlen, "a network namespace named %s already "
		    "exists and is not a sluice sandbox", name);
		errno = EEXIST;
		return -1;
	}
	if ((p = policy_parse(policy_text, policy_len, origin, err, errlen)) == NULL) {
		errno = EINVAL;
		return -1;
	}
	for (slot = 0; slot < gw->pool_slots && gw->slots[slot]; slot++)
		;
	if (slot == gw->pool_slots) {
		snprintf(err, errlen, "the address pool %s is full (%u sandboxes)",
		    gw->cfg.pool, gw->pool_slots);
		policy_free(p);
		errno = ENOSPC;
		return -1;
	}
	if ((sb = sandbox_new(gw, name, slot)) == NULL) {
		snprintf(err, errlen, "out of memory");
		policy_free(p);
		errno = ENOMEM;
		return -1;
	}
	sb->policy = p;
	sb->created_us = store_now_us();
	if (attach != NULL &&
	    attach_netns(gw, name, attach, err, errlen) == -1) {
		int saved = errno;

		sandbox_free(sb);
		errno = saved;
		return -1;
	}
	if (plumb(gw, sb, attach == NULL, err, errlen) == -1 ||
	    state_save(gw, sb, err, errlen) == -1) {
		int saved = errno ? errno : EIO;

		unplumb(gw, sb->name, sb->ifname);
		state_remove(gw, sb->name);
		sandbox_free(sb);
		errno = saved == EINVAL ? EIO : saved;
		return -1;
	}
	link_sandbox(gw, sb);
	log_sandbox(gw, sb, "add");
	log_policy(gw, sb);
	*out = sb;
	return 0;
}

int
gw_sandbox_del(struct gw *gw, const char *name, char *err, size_t errlen)
{
	struct gw_sandbox *sb = gw_sandbox_by_name(gw, name);

	if (sb == NULL) {
		snprintf(err, errlen, "no sandbox named \"%s\"", name);
		errno = ENOENT;
		return -1;
	}
	/* Forget it first: a packet still queued from its veth now finds no
	 * sandbox and is denied. */
	unlink_sandbox(gw, sb);
	nfq_flows_forget_ifindex(gw->flows, sb->ifindex);
	gw_inspect_forget_ifindex(gw, sb->ifindex);
	if (gw->bindings != NULL)
		dns_bindings_forget(gw->bindings, sb->slot);
	unplumb(gw, sb->name, sb->ifname);
	state_remove(gw, sb->name);
	log_sandbox(gw, sb, "del");
	sandbox_free(sb);
	return 0;
}

int
gw_sandbox_set_policy(struct gw *gw, const char *name,
    const char *policy_text, size_t policy_len, const char *origin,
    struct gw_sandbox **out, char *err, size_t errlen)
{
	struct gw_sandbox *sb = gw_sandbox_by_name(gw, name);
	struct policy *p, *old;

	*out = NULL;
	if (sb == NULL) {
		snprintf(err, errlen, "no sandbox named \"%s\"", name);
		errno = ENOENT;
		return -1;
	}
	/* a policy that does not parse leaves the old one in force */
	if ((p = policy_parse(policy_text, policy_len, origin, err, errlen)) == NULL) {
		errno = EINVAL;
		return -1;
	}
	old = sb->policy;
	sb->policy = p;
	if (state_save(gw, sb, err, errlen) == -1) {
		sb->policy = old;
		policy_free(p);
		errno = EIO;
		return -1;
	}
	policy_free(old);
	/* Cached verdicts were the old policy's: new attempts are decided
	 * afresh. Decided connections keep their connmark. */
	nfq_flows_forget_ifindex(gw->flows, sb->ifindex);
	log_policy(gw, sb);
	*out = sb;
	return 0;
}

/* Re-adopts the sandboxes kept in state-dir after a restart, rebuilding
 * whatever part of their plumbing is gone. */
int
gw_sandboxes_restore(struct gw *gw, char *err, size_t errlen)
{
	char dir[PATH_MAX], path[PATH_MAX + 300];
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/sandboxes", gw->cfg.state_dir);
	if ((d = opendir(dir)) == NULL)
		return errno == ENOENT ? 0 : (snprintf(err, errlen, "%s: %s",
		    dir, strerror(errno)), -1);
	while ((de = readdir(d)) != NULL) {
		json_error_t jerr;
		json_t *o;
		const char *name = NULL, *text = NULL;
		json_int_t slot = -1, created = 0;
		struct gw_sandbox *sb;
		struct policy *p;
		char perr[512];
		size_t nl = strlen(de->d_name);

		if (nl < 6 || strcmp(de->d_name + nl - 5, ".json") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		o = json_load_file(path, 0, &jerr);
		if (o == NULL || json_unpack(o, "{s:s, s:I, s:I, s:s}", "name",
		    &name, "slot", &slot, "created_us", &created, "policy",
		    &text) == -1 || !gw_sandbox_name_valid(name) || slot < 0 ||
		    slot >= gw->pool_slots || gw->slots[slot] != NULL ||
		    gw_sandbox_by_name(gw, name) != NULL) {
			log_warnx("%s: unusable sandbox state, ignored", path);
			json_decref(o);
			continue;
		}
		if ((p = policy_parse(text, strlen(text), path, perr,
		    sizeof(perr))) == NULL) {
			log_warnx("%s", perr);
			json_decref(o);
			continue;
		}
		sb = sandbox_new(gw, name, (unsigned)slot);
		if (sb == NULL) {
			policy_free(p);
			json_decref(o);
			closedir(d);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		sb->policy = p;
		sb->created_us = created;
		sb->ifindex = ifindex_in_gateway(gw, sb->ifname);
		if (sb->ifindex == 0 && !gw->cfg.teardown) {
			char perr2[512];

			/* its veth is gone (the gateway namespace was
			 * recreated): build it again */
			if (plumb(gw, sb, !gw_netns_exists(sb->name), perr2,
			    sizeof(perr2)) == -1) {
				log_warnx("sandbox %s: cannot restore: %s", name,
				    perr2);
				unplumb(gw, sb->name, sb->ifname);
				sandbox_free(sb);
				json_decref(o);
				continue;
			}
		}
		resolv_conf_write(sb);
		link_sandbox(gw, sb);
		if (!gw->cfg.teardown)
			log_info("sandbox %s restored (%s)", sb->name,
			    sb->ifname);
		json_decref(o);
	}
	closedir(d);
	return 0;
}

void
gw_sandboxes_teardown(struct gw *gw)
{
	unsigned i;
	char err[512];

	for (i = 0; i < gw->pool_slots; i++)
		if (gw->slots[i] && gw_sandbox_del(gw, gw->slots[i]->name, err,
		    sizeof(err)) == -1)
			log_warnx("%s", err);
}

void
gw_sandboxes_free(struct gw *gw)
{
	unsigned i;

	for (i = 0; gw->slots && i < gw->pool_slots; i++)
		sandbox_free(gw->slots[i]);
	free(gw->slots);
	free(gw->by_ifindex);
	gw->slots = NULL;
	gw->by_ifindex = NULL;
}
