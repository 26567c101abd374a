/* config.c: sluiced's flags, and the JSON config file that can set each. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/ctl.h"
#include "gateway/gw.h"

enum {
	OPT_CONTROL = 256, OPT_DB, OPT_STATE_DIR, OPT_NETNS, OPT_POOL,
	OPT_UPLINK_NETNS, OPT_UPLINK_ADDR, OPT_UPLINK_PEER_ADDR,
	OPT_DNS_UPSTREAM, OPT_QUEUE_NUM, OPT_QUEUE_MAXLEN, OPT_TEARDOWN,
	OPT_HELP, OPT_VERSION, OPT_DNS_TTL_MIN, OPT_DNS_TTL_MAX, OPT_DNS_GRACE,
	OPT_RETAIN_DAYS, OPT_CAPTURE_DENIED, OPT_METRICS_SOCKET, OPT_METRICS_LISTEN,
	OPT_LIMIT_CONN_RATE, OPT_LIMIT_CONN_BURST, OPT_LIMIT_DNS_RATE,
	OPT_LIMIT_DNS_BURST, OPT_LIMIT_HOLDS, OPT_QUEUE_BALANCE, OPT_DNS_CACHE,
	OPT_KERNEL_SYN, OPT_HTTP_IDLE, OPT_KERNEL_SNI, OPT_COPY_INTERVAL,
	OPT_LOG_QUEUE, OPT_CAPTURE_DENIED_TOTAL,
};

static const struct option long_opts[] = {
	{ "control",		required_argument, NULL, OPT_CONTROL },
	{ "db",			required_argument, NULL, OPT_DB },
	{ "state-dir",		required_argument, NULL, OPT_STATE_DIR },
	{ "netns",		required_argument, NULL, OPT_NETNS },
	{ "pool",		required_argument, NULL, OPT_POOL },
	{ "uplink-netns",	required_argument, NULL, OPT_UPLINK_NETNS },
	{ "uplink-addr",	required_argument, NULL, OPT_UPLINK_ADDR },
	{ "uplink-peer-addr",	required_argument, NULL, OPT_UPLINK_PEER_ADDR },
	{ "dns-upstream",	required_argument, NULL, OPT_DNS_UPSTREAM },
	{ "queue-num",		required_argument, NULL, OPT_QUEUE_NUM },
	{ "queue-maxlen",	required_argument, NULL, OPT_QUEUE_MAXLEN },
	{ "queue-balance",	required_argument, NULL, OPT_QUEUE_BALANCE },
	{ "dns-ttl-min",	required_argument, NULL, OPT_DNS_TTL_MIN },
	{ "dns-ttl-max",	required_argument, NULL, OPT_DNS_TTL_MAX },
	{ "dns-grace",		required_argument, NULL, OPT_DNS_GRACE },
	{ "dns-cache",		required_argument, NULL, OPT_DNS_CACHE },
	{ "retain-days",	required_argument, NULL, OPT_RETAIN_DAYS },
	{ "log-queue",		required_argument, NULL, OPT_LOG_QUEUE },
	{ "capture-denied",	required_argument, NULL, OPT_CAPTURE_DENIED },
	{ "capture-denied-total", required_argument, NULL,
	    OPT_CAPTURE_DENIED_TOTAL },
	{ "metrics-socket",	required_argument, NULL, OPT_METRICS_SOCKET },
	{ "metrics-listen",	required_argument, NULL, OPT_METRICS_LISTEN },
	{ "limit-conn-rate",	required_argument, NULL, OPT_LIMIT_CONN_RATE },
	{ "limit-conn-burst",	required_argument, NULL, OPT_LIMIT_CONN_BURST },
	{ "limit-dns-rate",	required_argument, NULL, OPT_LIMIT_DNS_RATE },
	{ "limit-dns-burst",	required_argument, NULL, OPT_LIMIT_DNS_BURST },
	{ "limit-holds",	required_argument, NULL, OPT_LIMIT_HOLDS },
	{ "kernel-syn",		required_argument, NULL, OPT_KERNEL_SYN },
	{ "kernel-sni",		required_argument, NULL, OPT_KERNEL_SNI },
	{ "http-idle",		required_argument, NULL, OPT_HTTP_IDLE },
	{ "copy-interval",	required_argument, NULL, OPT_COPY_INTERVAL },
	{ "teardown",		no_argument,	   NULL, OPT_TEARDOWN },
	{ "help",		no_argument,	   NULL, OPT_HELP },
	{ "version",		no_argument,	   NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 }
};

static const char usage_text[] =
"usage: sluiced [-fv] [-c FILE] [--control SOCK] [--db FILE] [--state-dir DIR]\n"
"               [--netns NAME] [--pool CIDR] [--uplink-netns NAME\n"
"               --uplink-addr CIDR --uplink-peer-addr CIDR] [--dns-upstream IP]...\n"
"               [--queue-num N] [--queue-maxlen N] [--queue-balance N]\n"
"               [--dns-ttl-min S] [--dns-ttl-max S] [--dns-grace S]\n"
"               [--dns-cache N] [--retain-days N] [--log-queue N]\n"
"               [--metrics-socket PATH] [--metrics-listen ADDR:PORT]\n"
"               [--capture-denied DIR] [--capture-denied-total MIB]\n"
"               [--limit-conn-rate N] [--limit-conn-burst N]\n"
"               [--limit-dns-rate N] [--limit-dns-burst N] [--limit-holds N]\n"
"               [--kernel-syn on|off] [--kernel-sni on|off]\n"
"               [--copy-interval MS] [--http-idle S] [--teardown]\n"
"\n"
"  -f                 stay in the foreground, log to stderr\n"
"  -v                 verbose (debug) logging\n"
"  -c FILE            JSON config; keys are the long flag names (\"db\", ...)\n"
"  --control SOCK     control socket (default " CTL_SOCKET_DEFAULT ")\n"
"  --db FILE          flow log database (default /var/lib/sluice/flows.db)\n"
"  --state-dir DIR    sandbox state kept across restarts (default /var/lib/sluice)\n"
"  --netns NAME       the gateway network namespace (default sluice)\n"
"  --pool CIDR        sandbox addresses, one /30 each (default 10.213.0.0/16)\n"
"  --uplink-netns NAME, --uplink-addr CIDR, --uplink-peer-addr CIDR\n"
"                     uplink as a veth into an existing namespace\n"
"  --dns-upstream IP  upstream resolver (repeatable)\n"
"  --dns-ttl-min S    a DNS binding lasts at least S seconds (default 30)\n"
"  --dns-ttl-max S    ... at most S seconds; answers' TTLs are capped (default 600)\n"
"  --dns-grace S      added to each binding's lifetime (default 10)\n"
"  --dns-cache N      keep up to N upstream answers for their TTL, shared by\n"
"                     all sandboxes, each still under its own policy\n"
"                     (default 4096; 0: ask upstream every time)\n"
"  --retain-days N    purge log rows older than N days (default 0: keep all)\n"
"  --log-queue N      log rows held in memory for the writer, 64..1048576\n"
"                     (default 16384); while it is full, new flows and\n"
"                     DNS answers are refused (log_unavailable)\n"
"  --capture-denied DIR  write denied flows' first packets to DIR/SANDBOX.pcap\n"
"                     (rotated to .pcap.1 at 16 MiB)\n"
"  --capture-denied-total MIB  bound all of DIR's pcap files together: past\n"
"                     it, files of deleted sandboxes go first, the oldest\n"
"                     first, then others, never one being written\n"
"                     (default 1024; 0: no bound)\n"
"  --metrics-socket PATH  serve Prometheus metrics (HTTP GET /metrics) on a\n"
"                     unix socket (default: none)\n"
"  --metrics-listen ADDR:PORT  ... on TCP in the host's namespace; one address\n"
"                     of this host, e.g. 127.0.0.1:9413 (default: none)\n"
"  --queue-num N      NFQUEUE number in the gateway namespace (default 0)\n"
"  --queue-maxlen N   packets the kernel holds for sluiced (default 4096)\n"
"  --queue-balance N  N queues from --queue-num on, flows spread by CPU,\n"
"                     one reader thread each (default 1: the main loop reads)\n"
"  --limit-conn-rate N  new flows per second per sandbox (default 2000;\n"
"                     0: unlimited); over it: denied, rate_limited\n"
"  --limit-conn-burst N  ... at most N at once (default: twice the rate)\n"
"  --limit-dns-rate N DNS queries per second per sandbox (default 2000;\n"
"                     0: unlimited); over it: REFUSED, rate_limited\n"
"  --limit-dns-burst N   ... at most N at once (default: twice the rate)\n"
"  --limit-holds N    TLS/HTTP first flights held at once per sandbox\n"
"                     (default 256, at most 1024; 16 once the table is 3/4\n"
"                     full); over it: denied, rate_limited; 0: no bound\n"
"  --kernel-syn on|off  once a TLS/HTTP connection's SYN has been decided\n"
"                     \"inspect\" through the queue, accept the next SYNs with\n"
"                     the same sandbox, destination and port in the kernel\n"
"                     while the binding lasts, copied to sluiced (default off)\n"
"  --kernel-sni on|off  once a ClientHello has been allowed through the queue,\n"
"                     let the kernel pass the next ones that fit in one\n"
"                     segment with the same sandbox, destination, port and\n"
"                     server name while the binding lasts, copied to sluiced,\n"
"                     which decides each again (default off)\n"
"  --copy-interval MS  read the kernel's copies (of the SYNs and hellos it\n"
"                     let through, of servers' answers to a first flight)\n"
"                     every MS ms while they keep coming, not as each comes:\n"
"                     a packet that needs one has them read first; 0..100\n"
"                     (default 0: as each comes)\n"
"  --http-idle S      an HTTP connection (every request read) with no packet\n"
"                     either way for S seconds is forgotten; its next request\n"
"                     is refused (default 120)\n"
"  --teardown         remove all sandboxes and the gateway namespace, then exit\n";

static int
parse_uint(const char *what, const char *s, unsigned long max, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v > max ||
	    s[0] == '-' || s[0] == '+') {
		fprintf(stderr, "sluiced: %s: \"%s\" is not a number in 0..%lu\n",
		    what, s, max);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

/* Sets one option by its long name; used for flags and config keys alike. */
static int
set_opt(struct gw_config *cfg, int opt, const char *val, const char *name)
{
	switch (opt) {
	case OPT_CONTROL:	cfg->control = val; break;
	case OPT_DB:		cfg->db = val; break;
	case OPT_STATE_DIR:	cfg->state_dir = val; break;
	case OPT_NETNS:		cfg->netns = val; break;
	case OPT_POOL:		cfg->pool = val; break;
	case OPT_UPLINK_NETNS:	cfg->uplink_netns = val; break;
	case OPT_UPLINK_ADDR:	cfg->uplink_addr = val; break;
	case OPT_UPLINK_PEER_ADDR: cfg->uplink_peer_addr = val; break;
	case OPT_DNS_UPSTREAM:
		if (cfg->ndns == GW_DNS_MAX) {
			fprintf(stderr, "sluiced: at most %d --dns-upstream\n",
			    GW_DNS_MAX);
			return -1;
		}
		cfg->dns_upstream[cfg->ndns++] = val;
		break;
	case OPT_QUEUE_NUM:
		return parse_uint(name, val, 65535, &cfg->queue_num);
	case OPT_DNS_TTL_MIN:
		return parse_uint(name, val, 86400, &cfg->dns_ttl_min);
	case OPT_DNS_TTL_MAX:
		return parse_uint(name, val, 86400, &cfg->dns_ttl_max);
	case OPT_DNS_GRACE:
		return parse_uint(name, val, 3600, &cfg->dns_grace);
	case OPT_DNS_CACHE:
		return parse_uint(name, val, DNS_CACHE_MAX, &cfg->dns_cache);
	case OPT_CAPTURE_DENIED:
		cfg->capture_denied = val;
		break;
	case OPT_CAPTURE_DENIED_TOTAL:
		return parse_uint(name, val, GW_CAPTURE_TOTAL_MB_MAX,
		    &cfg->capture_denied_total);
	case OPT_METRICS_SOCKET:
		cfg->metrics_socket = val;
		break;
	case OPT_METRICS_LISTEN: {
		struct sockaddr_storage ss;
		socklen_t sslen;
		char err[256];

		if (gw_metrics_parse_listen(val, &ss, &sslen, err,
		    sizeof(err)) == -1) {
			fprintf(stderr, "sluiced: %s: %s\n", name, err);
			return -1;
		}
		cfg->metrics_listen = val;
		break;
	}
	case OPT_RETAIN_DAYS:
		return parse_uint(name, val, 36500, &cfg->retain_days);
	case OPT_LOG_QUEUE:
		if (parse_uint(name, val, 1u << 20, &cfg->log_queue) == -1)
			return -1;
		if (cfg->log_queue < 64) {
			fprintf(stderr, "sluiced: log-queue must be at least "
			    "64\n");
			return -1;
		}
		return 0;
	case OPT_LIMIT_CONN_RATE:
		return parse_uint(name, val, GW_RATE_MAX, &cfg->limit_conn_rate);
	case OPT_LIMIT_CONN_BURST:
		return parse_uint(name, val, GW_RATE_MAX, &cfg->limit_conn_burst);
	case OPT_LIMIT_DNS_RATE:
		return parse_uint(name, val, GW_RATE_MAX, &cfg->limit_dns_rate);
	case OPT_LIMIT_DNS_BURST:
		return parse_uint(name, val, GW_RATE_MAX, &cfg->limit_dns_burst);
	case OPT_LIMIT_HOLDS:
		return parse_uint(name, val, GW_HOLD_MAX, &cfg->limit_holds);
	case OPT_HTTP_IDLE:
		if (parse_uint(name, val, 86400, &cfg->http_idle) == -1)
			return -1;
		if (cfg->http_idle == 0) {
			fprintf(stderr, "sluiced: http-idle must be 1..86400\n");
			return -1;
		}
		break;
	case OPT_COPY_INTERVAL:
		return parse_uint(name, val, GW_COPY_INTERVAL_MAX,
		    &cfg->copy_interval);
	case OPT_QUEUE_BALANCE:
		if (parse_uint(name, val, GW_QUEUES_MAX, &cfg->queue_balance) == -1)
			return -1;
		if (cfg->queue_balance == 0) {
			fprintf(stderr, "sluiced: queue-balance must be 1..%d\n",
			    GW_QUEUES_MAX);
			return -1;
		}
		break;
	case OPT_KERNEL_SYN:
	case OPT_KERNEL_SNI:
		if (strcmp(val, "on") != 0 && strcmp(val, "off") != 0) {
			fprintf(stderr, "sluiced: %s: \"%s\" is not on or off\n",
			    name, val);
			return -1;
		}
		if (opt == OPT_KERNEL_SYN)
			cfg->kernel_syn = strcmp(val, "on") == 0;
		else
			cfg->kernel_sni = strcmp(val, "on") == 0;
		break;
	case OPT_QUEUE_MAXLEN:
		if (parse_uint(name, val, 1u << 20, &cfg->queue_maxlen) == -1)
			return -1;
		if (cfg->queue_maxlen == 0) {
			fprintf(stderr, "sluiced: queue-maxlen must be > 0\n");
			return -1;
		}
		break;
	default:
		return -1;
	}
	return 0;
}

static int
load_config_file(struct gw_config *cfg, const char *path)
{
	json_error_t jerr;
	json_t *root, *v;
	const char *key;
	const struct option *o;

	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		fprintf(stderr, "sluiced: %s:%d:%d: %s\n", path, jerr.line,
		    jerr.column, jerr.text);
		return -1;
	}
	if (!json_is_object(root)) {
		fprintf(stderr, "sluiced: %s: the config must be a JSON object\n",
		    path);
		json_decref(root);
		return -1;
	}
	json_object_foreach(root, key, v) {
		for (o = long_opts; o->name != NULL; o++)
			if (strcmp(o->name, key) == 0 && o->has_arg)
				break;
		if (o->name == NULL) {
			fprintf(stderr, "sluiced: %s: unknown key \"%s\"\n", path, key);
			goto bad;
		}
		if (o->val == OPT_DNS_UPSTREAM && json_is_array(v)) {
			size_t i;
			json_t *e;

			json_array_foreach(v, i, e) {
				if (!json_is_string(e))
					goto badtype;
				if (set_opt(cfg, o->val, json_string_value(e),
				    key) == -1)
					goto bad;
			}
			continue;
		}
		if (json_is_integer(v) && (o->val == OPT_QUEUE_NUM ||
		    o->val == OPT_QUEUE_MAXLEN || o->val == OPT_DNS_TTL_MIN ||
		    o->val == OPT_DNS_TTL_MAX || o->val == OPT_DNS_GRACE ||
		    o->val == OPT_RETAIN_DAYS || o->val == OPT_LIMIT_CONN_RATE ||
		    o->val == OPT_LIMIT_CONN_BURST || o->val == OPT_LIMIT_DNS_RATE ||
		    o->val == OPT_LIMIT_DNS_BURST || o->val == OPT_LIMIT_HOLDS ||
		    o->val == OPT_QUEUE_BALANCE || o->val == OPT_DNS_CACHE ||
		    o->val == OPT_HTTP_IDLE || o->val == OPT_COPY_INTERVAL ||
		    o->val == OPT_LOG_QUEUE ||
		    o->val == OPT_CAPTURE_DENIED_TOTAL)) {
			char num[32];

			snprintf(num, sizeof(num), "%lld",
			    (long long)json_integer_value(v));
			if (set_opt(cfg, o->val, num, key) == -1)
				goto bad;
			continue;
		}
		if (json_is_boolean(v) && (o->val == OPT_KERNEL_SYN ||
		    o->val == OPT_KERNEL_SNI)) {
			if (set_opt(cfg, o->val, json_is_true(v) ? "on" : "off",
			    key) == -1)
				goto bad;
			continue;
		}
		if (!json_is_string(v))
			goto badtype;
		if (set_opt(cfg, o->val, json_string_value(v), key) == -1)
			goto bad;
		continue;
badtype:
		fprintf(stderr, "sluiced: %s: \"%s\" has the wrong type\n", path,
		    key);
		goto bad;
	}
	/* The values stay where they are: cfg keeps the document. */
	cfg->file = root;
	return 0;
bad:
	json_decref(root);
	return -1;
}

/* What gw_config_parse kept; cfg's strings from the file go with it. */
void
gw_config_free(struct gw_config *cfg)
{
	json_decref(cfg->file);
	cfg->file = NULL;
}

/*
 * Fills cfg from defaults, then the config file (-c), then the command
 * line, which wins. Returns 0, 1 when it printed help or the version (exit
 * 0), or -1 on a usage error (already printed).
 */
int
gw_config_parse(struct gw_config *cfg, int argc, char **argv)
{
	struct gw_config cli = { 0 };
	const char *conf = NULL;
	int c, i;

	memset(cfg, 0, sizeof(*cfg));
	cfg->dns_ttl_min = 30;
	cfg->dns_ttl_max = 600;
	cfg->dns_grace = 10;
	cfg->dns_cache = GW_DNS_CACHE;
	cfg->limit_conn_rate = GW_LIMIT_CONN_RATE;
	cfg->limit_dns_rate = GW_LIMIT_DNS_RATE;
	cfg->limit_holds = GW_HOLD_PER_SANDBOX;
	cfg->kernel_syn = false;
	cfg->kernel_sni = false;
	cfg->http_idle = GW_HOLD_IDLE_MS / 1000;
	cfg->capture_denied_total = GW_CAPTURE_TOTAL_MB;
	/* First pass: only -c, so the command line can override the file. */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "c:fv", long_opts, NULL)) != -1)
		if (c == 'c')
			conf = optarg;
	if (conf != NULL && load_config_file(cfg, conf) == -1)
		return -1;

	optind = 1;
	opterr = 1;
	cli.ndns = 0;
	while ((c = getopt_long(argc, argv, "c:fv", long_opts, &i)) != -1) {
		switch (c) {
		case 'c':
			break;
		case 'f':
			cfg->foreground = true;
			break;
		case 'v':
			cfg->verbose = true;
			break;
		case OPT_TEARDOWN:
			cfg->teardown = true;
			break;
		case OPT_HELP:
			fputs(usage_text, stdout);
			return 1;
		case OPT_VERSION:
			printf("sluiced %s\n", SLUICE_VERSION);
			return 1;
		case OPT_DNS_UPSTREAM:
			/* flags replace the file's list rather than add to it */
			if (set_opt(&cli, c, optarg, long_opts[i].name) == -1)
				return -1;
			break;
		case '?':
			fputs(usage_text, stderr);
			return -1;
		default:
			if (set_opt(cfg, c, optarg, long_opts[i].name) == -1)
				return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sluiced: unexpected argument \"%s\"\n",
		    argv[optind]);
		fputs(usage_text, stderr);
		return -1;
	}
	if (cli.ndns > 0) {
		memcpy(cfg->dns_upstream, cli.dns_upstream,
		    sizeof(cfg->dns_upstream));
		cfg->ndns = cli.ndns;
	}
	if (cfg->control == NULL)
		cfg->control = CTL_SOCKET_DEFAULT;
	if (cfg->db == NULL)
		cfg->db = "/var/lib/sluice/flows.db";
	if (cfg->state_dir == NULL)
		cfg->state_dir = "/var/lib/sluice";
	if (cfg->netns == NULL)
		cfg->netns = "sluice";
	if (cfg->pool == NULL)
		cfg->pool = "10.213.0.0/16";
	if (cfg->queue_maxlen == 0)
		cfg->queue_maxlen = 4096;
	if (cfg->queue_balance == 0)
		cfg->queue_balance = 1;
	if (cfg->queue_num + cfg->queue_balance - 1 > 65535) {
		fprintf(stderr, "sluiced: queues %u..%u: past 65535\n",
		    cfg->queue_num, cfg->queue_num + cfg->queue_balance - 1);
		return -1;
	}
	/* an unset burst follows the rate: a second's worth twice over */
	if (cfg->limit_conn_burst == 0)
		cfg->limit_conn_burst = cfg->limit_conn_rate * 2 > GW_RATE_MAX ?
		    GW_RATE_MAX : cfg->limit_conn_rate * 2;
	if (cfg->limit_dns_burst == 0)
		cfg->limit_dns_burst = cfg->limit_dns_rate * 2 > GW_RATE_MAX ?
		    GW_RATE_MAX : cfg->limit_dns_rate * 2;
	if (cfg->dns_ttl_min > cfg->dns_ttl_max) {
		fprintf(stderr, "sluiced: --dns-ttl-min is above --dns-ttl-max\n");
		return -1;
	}
	if ((cfg->uplink_addr != NULL) != (cfg->uplink_peer_addr != NULL) ||
	    (cfg->uplink_netns != NULL && cfg->uplink_addr == NULL)) {
		fprintf(stderr, "sluiced: --uplink-addr and --uplink-peer-addr "
		    "go together, and --uplink-netns needs both\n");
		return -1;
	}
	return 0;
}
