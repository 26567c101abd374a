/* fuzz_cni.c: libFuzzer target for sluice-cni's input: the configuration on stdin, CNI_CONTAINERID and CNI_ARGS. */
#include <stdio.h>

/* The plugin's file whole, its main renamed: the parsers are static. */
#define main sluice_cni_main
#include "gateway/cni.c"
#undef main

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

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
	/* print_error writes the runtime's JSON to stdout */
	if (freopen("/dev/null", "w", stdout) == NULL)
		abort();
	return 0;
}

/* The next line of the input (up to '\n', which is dropped) as a new
 * string; *off moves past it. */
static char *
next_line(const uint8_t *data, size_t size, size_t *off)
{
	const uint8_t *nl = memchr(data + *off, '\n', size - *off);
	size_t len = nl != NULL ? (size_t)(nl - data) - *off : size - *off;
	char *s = malloc(len + 1);

	if (s == NULL)
		abort();
	memcpy(s, data + *off, len);
	s[len] = '\0';
	*off += len + (nl != NULL);
	return s;
}

/*
 * The input: CNI_CONTAINERID, a line; CNI_ARGS, a line; then the network
 * configuration. An embedded NUL cuts a variable short, as the
 * environment would. Only what runs without sluiced or a namespace:
 * conf_parse, sandbox_name, policy_path, the ADD result built on
 * prevResult, CHECK's look at prevResult and the error the runtime reads.
 */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cni_req r;
	struct cni_error e;
	struct cidr4 want;
	char *id, *args, *conf;
	const char *path;
	size_t off = 0, conflen;
	bool from_args;
	json_t *res;

	memset(&r, 0, sizeof(r));
	memset(&e, 0, sizeof(e));
	id = next_line(data, size, &off);
	args = next_line(data, size, &off);
	conflen = size - off;
	if ((conf = malloc(conflen > 0 ? conflen : 1)) == NULL)
		abort();
	memcpy(conf, data + off, conflen);

	r.command = "ADD";
	r.containerid = id;
	r.ifname = CNI_IFNAME;
	r.netns = "/proc/self/ns/net";
	r.args = args;
	if (conf_parse(&r, conf, conflen, &e) == -1)
		goto fail;
	if (id[0] == '\0') {
		/* env_parse's refusal */
		cni_fail(&e, CNI_ERR_ENV, "CNI_CONTAINERID is not set", NULL);
		goto fail;
	}
	if (sandbox_name(&r, &e) == -1)
		goto fail;
	check(gw_sandbox_name_valid(r.name));
	check(strncmp(r.name, r.prefix, strlen(r.prefix)) == 0);
	if (policy_path(&r, &path, &from_args, &e) == -1)
		goto fail;
	check(path != NULL && path[0] == '/');

	res = add_result(&r, "10.213.0.2/30", "10.213.0.1",
	    id[0] & 1 ? "02:00:00:00:00:01" : NULL);
	check(res != NULL);
	check(json_is_array(json_object_get(res, "ips")));
	check(json_string_value(json_array_get(json_object_get(json_object_get(
	    res, "dns"), "nameservers"), 0)) != NULL);
	json_decref(res);
	if (parse_cidr4("10.213.0.2/30", &want) == 0)
		(void)prev_has_addr(r.prev, &want);
	goto done;
fail:
	check(e.code != 0 && e.msg[0] != '\0');
	print_error(&r, &e);
done:
	json_decref(r.conf);
	free(conf);
	free(args);
	free(id);
	return 0;
}
