# sluice: one GNU Makefile. `make test` and `make demo` do all the set-up.

PREFIX  ?= /usr/local
SBINDIR ?= $(PREFIX)/sbin
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc
UNITDIR ?= /etc/systemd/system
CNIBINDIR ?= /opt/cni/bin

CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes \
           -Wformat=2 -Wno-format-nonliteral -Werror
CPPFLAGS += -D_GNU_SOURCE -I. -MMD -MP
ALL_CFLAGS = -std=c11 $(WARN) $(CFLAGS) $(CPPFLAGS)
PKGS    := libnetfilter_queue libmnl sqlite3 jansson libcrypto libndpi libpcap \
           libbpf
LIBS    = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread
B       := build
# the builds `make test` makes, on every CPU (the scenarios stay one at a time)
JOBS    ?= $(shell nproc 2>/dev/null || echo 1)

ifeq ($(V),1)
Q :=
else
Q := @
endif

# Everything but the two programs' main files goes into one archive that the
# programs and the unit tests link against.
MAINS   := gateway/sluiced.c gateway/sluice.c gateway/cni.c
LIBSRC  := $(filter-out $(MAINS),$(wildcard gateway/*.c nfq/*.c dns/*.c store/*.c))
LIBOBJ  := $(LIBSRC:%.c=$(B)/%.o) $(B)/nfq/ksni_obj.o
UNITSRC := $(wildcard tests/unit/test_*.c)
UNITBIN := $(UNITSRC:tests/unit/%.c=$(B)/tests/%)

all: $(B)/sluiced $(B)/sluice $(B)/sluice-cni

.SECONDEXPANSION:

$(B)/%.o: %.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

# The eBPF program (nfq/bpf/, out of the gcc wildcard above) is built by
# clang for the BPF target, whatever CC and CFLAGS say (a sanitizer has no
# place there), and embedded in the library by ksni_obj.S's .incbin.
BPF_CC     ?= clang
BPF_CFLAGS ?= -O2 -g
BPF_ALL_CFLAGS = -target bpf -mcpu=v3 $(BPF_CFLAGS) -Wall -Werror -I. \
           -I/usr/include/$(shell gcc -print-multiarch 2>/dev/null) -MMD -MP

$(B)/nfq/bpf/%.bpf.o: nfq/bpf/%.bpf.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  BPF     $<")
	$(Q)$(BPF_CC) $(BPF_ALL_CFLAGS) -c -o $@ $<

$(B)/nfq/ksni_obj.o: nfq/ksni_obj.S $(B)/nfq/bpf/ksni.bpf.o
	@mkdir -p $(@D)
	@$(if $(Q),echo "  AS      $<")
	$(Q)$(CC) $(CPPFLAGS) -DKSNI_OBJ='"$(B)/nfq/bpf/ksni.bpf.o"' -c -o $@ $<

$(B)/libsluice.a: $(LIBOBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(B)/sluiced: $(B)/gateway/sluiced.o $(B)/libsluice.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS)

$(B)/sluice: $(B)/gateway/sluice.o $(B)/libsluice.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS)

$(B)/sluice-cni: $(B)/gateway/cni.o $(B)/libsluice.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS)

$(B)/tests/%: tests/unit/%.c $(B)/libsluice.a
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(B)/libsluice.a $(LIBS) -lcmocka

# Installs the Debian packages the build, the tests and the demo need;
# does nothing when all are present.
deps:
	$(Q)sh deploy/install-deps.sh

unit: $(UNITBIN)
	$(Q)sh tests/run-unit.sh $(UNITBIN)

scenarios: all
	$(Q)sh tests/run-scenarios.sh

# One scenario per attack technique (also run by `make test`).
adversarial: all
	$(Q)DIR=$(CURDIR)/tests/adversarial sh tests/run-scenarios.sh

ASAN_CFLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
               -fno-sanitize-recover=all
# 33 (its waits are timers) and 49/49b (scale) only in the plain run
ASAN_SCENARIOS ?= [12]* 3[0-2]* 4[0-8]* 51* 62* 63*

# The README's test command: set-up, build, unit tests (plain and under
# ASan+UBSan), the fuzzers briefly, the scenarios and the adversarial
# suite; about 12 minutes on the 2-vCPU VM, within its 15.
test: deps
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) all $(UNITBIN) $(B)/connbench
	$(Q)sh tests/run-unit.sh $(UNITBIN)
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) asan
	$(Q)$(MAKE) --no-print-directory fuzz
	$(Q)sh tests/run-scenarios.sh
	$(Q)DIR=$(CURDIR)/tests/adversarial sh tests/run-scenarios.sh

# Part of the scenarios again with sanitized programs, about 4 minutes
# more: with all of `make test` it took 16, past that target's 15, so CI
# (.ci/run) runs this after it.
test-sanitizers: deps
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) all $(B)/connbench
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) B=build-asan \
	    CFLAGS="$(ASAN_CFLAGS)" LDFLAGS="-fsanitize=address,undefined" all
	@echo "== scenarios $(ASAN_SCENARIOS) again, with sluiced and sluice under ASan+UBSan"
	$(Q)SLUICED=$(CURDIR)/build-asan/sluiced SLUICE=$(CURDIR)/build-asan/sluice \
	    SLUICE_CNI=$(CURDIR)/build-asan/sluice-cni \
	    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	    SCENARIOS='$(ASAN_SCENARIOS)' sh tests/run-scenarios.sh
	$(Q)$(MAKE) --no-print-directory tsan

# sluiced built with ThreadSanitizer, run where it has threads to race:
# several queue readers beside the main loop, the veth reaper beside
# sandbox churn (any report stops sluiced,
# which fails the scenario).
TSAN_SCENARIOS ?= 5[24]*
tsan:
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) B=build-tsan \
	    CFLAGS="-O1 -g -fsanitize=thread -fno-omit-frame-pointer" \
	    LDFLAGS="-fsanitize=thread" build-tsan/sluiced build-tsan/sluice
	@echo "== scenarios $(TSAN_SCENARIOS) with sluiced under ThreadSanitizer"
	$(Q)SLUICED=$(CURDIR)/build-tsan/sluiced SLUICE=$(CURDIR)/build-tsan/sluice \
	    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	    SCENARIOS='$(TSAN_SCENARIOS)' sh tests/run-scenarios.sh

demo: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)sh tests/demo.sh

# ASan + UBSan build of the unit tests (built first, then run: `unit`
# runs them one after another).
asan:
	$(Q)$(MAKE) --no-print-directory B=build-asan CFLAGS="$(ASAN_CFLAGS)" \
	    LDFLAGS="-fsanitize=address,undefined" all \
	    $(UNITBIN:$(B)/%=build-asan/%)
	$(Q)$(MAKE) --no-print-directory B=build-asan CFLAGS="$(ASAN_CFLAGS)" \
	    LDFLAGS="-fsanitize=address,undefined" unit

# libFuzzer target for the DNS message parsers, run briefly on a copy of the
# seed corpus so that new inputs stay out of the tree. Needs clang and its
# fuzzer runtime (libclang-rt-14-dev); skipped, not failed, without them.
FUZZ_CC    ?= clang
FUZZ_TIME  ?= 5
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=all -D_GNU_SOURCE -I.
FUZZ_PROBE := echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }' | \
              $(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1

FUZZERS    := dns tls reasm http packet policy metrics cni control config \
              replay
FUZZ_SRC_dns   := dns/msg.c dns/name.c
FUZZ_SRC_packet := nfq/packet.c
FUZZ_SRC_policy := gateway/policy.c dns/name.c dns/siphash.c
FUZZ_LIBS_policy := -ljansson -lcrypto
FUZZ_SRC_tls   := nfq/tls.c
FUZZ_SRC_reasm := nfq/reasm.c
FUZZ_SRC_http  := nfq/http.c
# Targets in gateway/ reach far: the file under test is built with the
# sanitizers and coverage, what else it calls comes from the library as is.
# FUZZ_DEPS_x: files a target #includes whole (their statics are fuzzed).
FUZZ_SRC_metrics := gateway/metrics.c
FUZZ_LIBS_metrics = $(B)/libsluice.a $(LIBS)
FUZZ_SRC_cni   := gateway/addr.c gateway/names.c
FUZZ_DEPS_cni  := gateway/cni.c
FUZZ_LIBS_cni   = $(B)/libsluice.a $(LIBS)
FUZZ_SRC_control := gateway/names.c
FUZZ_DEPS_control := gateway/control.c
FUZZ_LIBS_control = $(B)/libsluice.a $(LIBS)
FUZZ_SRC_config := gateway/metrics.c
FUZZ_DEPS_config := gateway/config.c
FUZZ_LIBS_config = $(B)/libsluice.a $(LIBS)
FUZZ_SRC_replay := gateway/replay.c gateway/verdict.c gateway/policy.c \
    nfq/packet.c nfq/tls.c nfq/http.c nfq/reasm.c dns/msg.c dns/name.c \
    dns/siphash.c
FUZZ_LIBS_replay = $(B)/libsluice.a $(LIBS)

$(B)/fuzz_%: tests/fuzz/fuzz_%.c $$(FUZZ_SRC_$$*) $$(FUZZ_DEPS_$$*) \
    $$(filter %.a,$$(FUZZ_LIBS_$$*)) dns/dns.h nfq/nfq.h gateway/policy.h
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZCC  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_SRC_$*) $(FUZZ_LIBS_$*)

# The fuzzers are built together, then run JOBS at a time, each for
# FUZZ_TIME seconds of its own.
fuzz:
	$(Q)if ! $(FUZZ_PROBE); then \
		echo "fuzz: skipped (no clang fuzzer runtime)"; exit 0; fi; \
	$(MAKE) --no-print-directory -s -j$(JOBS) \
	    $(addprefix $(B)/fuzz_,$(FUZZERS)) || exit 1; \
	mkdir -p $(B)/fuzz && \
	printf '%s\n' $(FUZZERS) | xargs -P $(JOBS) -I@ sh -c '\
		rm -rf $(B)/fuzz/corpus_@ && \
		cp -R tests/fuzz/corpus_@ $(B)/fuzz/corpus_@ && \
		if $(B)/fuzz_@ -max_total_time=$(FUZZ_TIME) \
		    -artifact_prefix=$(B)/fuzz/@- $(B)/fuzz/corpus_@ \
		    >$(B)/fuzz/fuzz_@.log 2>&1; then \
			echo "fuzz: @: $$(grep "^Done" $(B)/fuzz/fuzz_@.log)"; \
		else \
			tail -n 40 $(B)/fuzz/fuzz_@.log; \
			echo "fuzz: @ FAILED (crash input under $(B)/fuzz/)"; \
			exit 255; \
		fi' 

# The benchmark (issue 8): sluice against plain forwarding, conntrack,
# tinyproxy, squid and dnsmasq, in namespaces; about 9 minutes on 2 CPUs. Writes
# tests/bench/results/latest.md (and latest.jsonl, perf-sluiced.txt).
$(B)/connbench: tests/bench/connbench.c $(B)/libsluice.a
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(B)/libsluice.a -ljansson

# The log writer alone: rows through store.h, the writer thread's CPU per
# row (see the file's head for its arguments). Not part of `make bench`.
$(B)/storebench: tests/bench/storebench.c $(B)/libsluice.a
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(B)/libsluice.a $(LIBS)

bench: deps
	$(Q)$(MAKE) --no-print-directory all $(B)/connbench
	$(Q)SLUICED=$(abspath $(B))/sluiced SLUICE=$(abspath $(B))/sluice \
	    CONNBENCH=$(abspath $(B))/connbench bash tests/bench/run.sh

# A bounded soak of about five minutes, not part of `make test`: 300,000
# connections and 1,000,000 DNS queries from 4 sandboxes, then sluiced's
# memory and descriptors, the rows and the far side are checked. Scale with
# SOAK_CONNS, SOAK_DNS, SOAK_SECS; the summary goes to
# tests/soak/results/latest.md.
$(B)/soakload: tests/soak/soakload.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $<

soak: all $(B)/soakload
	$(Q)SLUICED=$(abspath $(B)/sluiced) SLUICE=$(abspath $(B)/sluice) \
	    SOAKLOAD=$(abspath $(B)/soakload) bash tests/soak/run.sh

# `make install` puts, under DESTDIR if given:
#   $(SBINDIR)/sluiced  $(BINDIR)/sluice  $(CNIBINDIR)/sluice-cni
#   $(MANDIR)/man8/sluiced.8 sluice.8 sluice-cni.8  $(MANDIR)/man5/sluice-policy.5
#   $(UNITDIR)/sluiced.service, its ExecStart= naming $(SBINDIR)/sluiced
#   $(SYSCONFDIR)/sluice/sluiced.json from deploy/sluiced.json, unless a
#     config is there already (it is never overwritten)
# and, when installing to / (no DESTDIR), the system group `sluice` whose
# members may use the control socket, if the host has none.
# `make uninstall` removes those files, and $(SYSCONFDIR)/sluice if empty.
# Like dpkg with a conffile, it keeps a config that differs from
# deploy/sluiced.json. The group, the directories (shared with other
# software: $(SBINDIR), $(CNIBINDIR), ...) and /var/lib/sluice (the log and
# the sandboxes' state, written by sluiced, not by install) stay.
MAN8    := sluiced.8 sluice.8 sluice-cni.8
MAN5    := sluice-policy.5
CONF    := $(SYSCONFDIR)/sluice/sluiced.json

install: all
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(CNIBINDIR) \
	    $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(UNITDIR)
	install -m 0755 $(B)/sluiced $(DESTDIR)$(SBINDIR)/sluiced
	install -m 0755 $(B)/sluice $(DESTDIR)$(BINDIR)/sluice
	install -m 0755 $(B)/sluice-cni $(DESTDIR)$(CNIBINDIR)/sluice-cni
	install -m 0644 $(addprefix deploy/man/,$(MAN8)) $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 $(addprefix deploy/man/,$(MAN5)) $(DESTDIR)$(MANDIR)/man5/
	sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
	    deploy/sluiced.service.in > $(DESTDIR)$(UNITDIR)/sluiced.service.tmp
	chmod 0644 $(DESTDIR)$(UNITDIR)/sluiced.service.tmp
	mv -f $(DESTDIR)$(UNITDIR)/sluiced.service.tmp $(DESTDIR)$(UNITDIR)/sluiced.service
	install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/sluice
	@if [ ! -e $(DESTDIR)$(CONF) ]; then \
		echo "install -m 0644 deploy/sluiced.json $(DESTDIR)$(CONF)"; \
		install -m 0644 deploy/sluiced.json $(DESTDIR)$(CONF); \
	elif ! cmp -s deploy/sluiced.json $(DESTDIR)$(CONF); then \
		echo "install: $(DESTDIR)$(CONF) is there already: kept" \
		    "(the default is deploy/sluiced.json)"; \
	fi
	@if [ -z "$(DESTDIR)" ] && ! getent group sluice >/dev/null; then \
		echo "groupadd --system sluice"; \
		groupadd --system sluice; \
	fi

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/sluiced $(DESTDIR)$(BINDIR)/sluice \
	    $(DESTDIR)$(CNIBINDIR)/sluice-cni $(DESTDIR)$(UNITDIR)/sluiced.service
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man8/,$(MAN8)) \
	    $(addprefix $(DESTDIR)$(MANDIR)/man5/,$(MAN5))
	@if [ -e $(DESTDIR)$(CONF) ] && ! cmp -s deploy/sluiced.json $(DESTDIR)$(CONF); then \
		echo "uninstall: $(DESTDIR)$(CONF) differs from deploy/sluiced.json: kept"; \
	else \
		echo "rm -f $(DESTDIR)$(CONF)"; \
		rm -f $(DESTDIR)$(CONF); \
		rmdir $(DESTDIR)$(SYSCONFDIR)/sluice 2>/dev/null || true; \
	fi

clean:
	rm -rf build build-asan build-tsan

.PHONY: all deps unit scenarios adversarial test test-sanitizers demo asan tsan fuzz bench soak install \
	uninstall clean

-include $(LIBOBJ:.o=.d) $(B)/nfq/bpf/ksni.bpf.d $(B)/gateway/sluiced.d $(B)/gateway/sluice.d $(B)/gateway/cni.d
