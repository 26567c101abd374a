/* fuzz_config.c: libFuzzer target for sluiced's JSON config file (-c FILE). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* config.c tells its refusals to stderr: here they go nowhere. */
static FILE *fuzz_stderr;
#undef stderr
#define stderr fuzz_stderr

/* The file whole: load_config_file and set_opt are static. */
#include "gateway/config.c"

#undef stderr

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static int memfd = -1;
static char path[64];

static void
check(int ok)
{
	if (!ok)
		abort();
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if ((fuzz_stderr = fopen("/dev/null", "w")) == NULL ||
	    (memfd = memfd_create("sluiced.json", 0)) == -1)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	return 0;
}

/*
 * The input is the file; it is read by path, as sluiced reads it, through
 * gw_config_parse (defaults, the file, the checks across keys). Whatever
 * it holds, an accepted config keeps every value in its range.
 */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[] = { "sluiced", "-c", path, NULL };
	struct gw_config cfg;
	size_t i;
	int rc;

	if (ftruncate(memfd, 0) == -1 ||
	    pwrite(memfd, data, size, 0) != (ssize_t)size)
		abort();
	optind = 0;	/* getopt_long starts over (glibc) */
	rc = gw_config_parse(&cfg, 3, argv);
	check(rc == 0 || rc == -1);
	if (rc == 0) {
		check(cfg.file != NULL);
		check(cfg.control != NULL && cfg.db != NULL &&
		    cfg.state_dir != NULL && cfg.netns != NULL &&
		    cfg.pool != NULL);
		check(cfg.ndns <= GW_DNS_MAX);
		for (i = 0; i < cfg.ndns; i++)
			check(cfg.dns_upstream[i] != NULL);
		check(cfg.queue_maxlen >= 1 && cfg.queue_maxlen <= 1u << 20);
		check(cfg.queue_balance >= 1 &&
		    cfg.queue_balance <= GW_QUEUES_MAX);
		check(cfg.queue_num + cfg.queue_balance - 1 <= 65535);
		check(cfg.dns_ttl_min <= cfg.dns_ttl_max &&
		    cfg.dns_ttl_max <= 86400);
		check(cfg.dns_grace <= 3600 && cfg.dns_cache <= DNS_CACHE_MAX);
		check(cfg.log_queue == 0 ||
		    (cfg.log_queue >= 64 && cfg.log_queue <= 1u << 20));
		check(cfg.limit_conn_burst <= GW_RATE_MAX &&
		    cfg.limit_dns_burst <= GW_RATE_MAX);
		check(cfg.limit_holds <= GW_HOLD_MAX);
		check(cfg.http_idle >= 1 && cfg.http_idle <= 86400);
		check(cfg.copy_interval <= GW_COPY_INTERVAL_MAX);
		check((cfg.uplink_addr != NULL) ==
		    (cfg.uplink_peer_addr != NULL));
	}
	gw_config_free(&cfg);
	return 0;
}
