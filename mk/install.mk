# make install: every part of fenced, under DESTDIR and PREFIX.
#
#   make install PREFIX=/usr/local            (the default PREFIX)
#   make install DESTDIR=/tmp/root PREFIX=/usr     (configs in /etc)
#
# Directories (each may be set on the command line):
#   BINDIR     programs: fenced, fence-store, fence-proxy, fencectl,
#              fence-torture, fence-demo
#   LIBDIR     libfence and libfence-guard (.a, .so.0 + .so), pkgconfig/
#   INCLUDEDIR fence.h, fence_guard.h
#   TOOLDIR    the torture kit: fence-torture, fence-demo, the checker and
#              its modules, fence-torture-worker, fence-faults (the fault
#              proxy), with links to BINDIR's fenced, fence-store and
#              fence-proxy (the tools look for their programs in their own
#              directory)
#   DATADIR    fenced/adapters/{postgres,redis}, fenced/examples/
#   MANDIR     man1 (fencectl, fence-torture, fence-demo), man8 (fenced,
#              fence-store, fence-proxy)
#   SYSCONFDIR fenced/fenced.conf, fenced/fence-proxy.conf and
#              default/fence-store, installed only when absent (never
#              overwriting an operator's edits).  Default: /etc when PREFIX
#              is /usr (the GNU convention), else PREFIX/etc
#   UNITDIR    fenced.service, fence-store.service, fence-proxy.service
#              (paths filled in)
#   SYSUSERSDIR  sysusers.d entries for the services' users
#
# Sub-targets: install-bin install-lib install-guard install-cli
# install-proxy install-torture install-adapters install-man install-conf
# install-systemd.  The Debian packaging (debian/rules) calls `make install`
# with PREFIX=/usr and splits the result into packages.
# tests/integration/test_install.sh installs into a DESTDIR and runs the
# installed tree.
BINDIR      ?= $(PREFIX)/bin
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
DATADIR     ?= $(PREFIX)/share
MANDIR      ?= $(DATADIR)/man
TOOLDIR     ?= $(PREFIX)/lib/fenced
SYSCONFDIR  ?= $(if $(filter /usr /usr/,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d

# Versions written into the pkg-config files.
FENCE_CLIENT_VERSION := 0.1.0
FENCE_GUARD_VERSION  := 0.1.0

INSTALL      ?= install
INSTALL_BIN  := $(INSTALL) -m 755
INSTALL_DATA := $(INSTALL) -m 644

install: install-bin install-lib install-guard install-cli install-proxy install-torture \
         install-adapters install-man install-conf install-systemd

# The daemons (fencectl: install-cli).
install-bin: all $(BUILD)/fenced $(BUILD)/fence-store
	$(INSTALL) -d $(DESTDIR)$(BINDIR)
	$(INSTALL_BIN) $(BUILD)/fenced $(DESTDIR)$(BINDIR)/fenced
	$(INSTALL_BIN) $(BUILD)/fence-store $(DESTDIR)$(BINDIR)/fence-store

# libfence: header, static and shared library, pkg-config file.  The .pc
# file is written at install time, so it names the PREFIX (and LIBDIR /
# INCLUDEDIR) of this install.
install-lib: $(BUILD)/libfence.a $(BUILD)/libfence.so.$(CLIENT_SO_VERSION)
	$(INSTALL) -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)
	$(INSTALL_DATA) include/fence.h $(DESTDIR)$(INCLUDEDIR)/fence.h
	$(INSTALL_DATA) $(BUILD)/libfence.a $(DESTDIR)$(LIBDIR)/libfence.a
	$(INSTALL_DATA) $(BUILD)/libfence.so.$(CLIENT_SO_VERSION) \
	    $(DESTDIR)$(LIBDIR)/libfence.so.$(CLIENT_SO_VERSION)
	ln -sf libfence.so.$(CLIENT_SO_VERSION) $(DESTDIR)$(LIBDIR)/libfence.so
	printf '%s\n' \
	    'prefix=$(PREFIX)' \
	    'libdir=$(LIBDIR)' \
	    'includedir=$(INCLUDEDIR)' \
	    '' \
	    'Name: libfence' \
	    'Description: client of the fenced lock service (locks with fencing tokens)' \
	    'Version: $(FENCE_CLIENT_VERSION)' \
	    'Requires.private: hiredis openssl' \
	    'Libs: -L$${libdir} -lfence' \
	    'Libs.private: -lpthread' \
	    'Cflags: -I$${includedir}' >$(DESTDIR)$(LIBDIR)/pkgconfig/libfence.pc
	chmod 644 $(DESTDIR)$(LIBDIR)/pkgconfig/libfence.pc

# libfence-guard: the resource-side guard, likewise.
install-guard: $(BUILD)/libfence-guard.a $(BUILD)/libfence-guard.so.$(GUARD_SO_VERSION)
	$(INSTALL) -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)
	$(INSTALL_DATA) include/fence_guard.h $(DESTDIR)$(INCLUDEDIR)/fence_guard.h
	$(INSTALL_DATA) $(BUILD)/libfence-guard.a $(DESTDIR)$(LIBDIR)/libfence-guard.a
	$(INSTALL_DATA) $(BUILD)/libfence-guard.so.$(GUARD_SO_VERSION) \
	    $(DESTDIR)$(LIBDIR)/libfence-guard.so.$(GUARD_SO_VERSION)
	ln -sf libfence-guard.so.$(GUARD_SO_VERSION) $(DESTDIR)$(LIBDIR)/libfence-guard.so
	printf '%s\n' \
	    'prefix=$(PREFIX)' \
	    'libdir=$(LIBDIR)' \
	    'includedir=$(INCLUDEDIR)' \
	    '' \
	    'Name: libfence-guard' \
	    'Description: fencing-token guard for resources (admit a token iff it is not older than the highest seen)' \
	    'Version: $(FENCE_GUARD_VERSION)' \
	    'Libs: -L$${libdir} -lfence-guard' \
	    'Libs.private: -lpthread' \
	    'Cflags: -I$${includedir}' >$(DESTDIR)$(LIBDIR)/pkgconfig/libfence-guard.pc
	chmod 644 $(DESTDIR)$(LIBDIR)/pkgconfig/libfence-guard.pc

# fencectl and its man page.
install-cli: $(BUILD)/fencectl
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	$(INSTALL_BIN) $(BUILD)/fencectl $(DESTDIR)$(BINDIR)/fencectl
	$(INSTALL_DATA) docs/fencectl.1 $(DESTDIR)$(MANDIR)/man1/fencectl.1

# fence-proxy, the HTTP fencing proxy (docs/proxy.md): the program, its man
# page, its example configuration (installed as SYSCONFDIR's when absent),
# unit and user (install-systemd).
install-proxy: $(BUILD)/fence-proxy
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man8 \
	    $(DESTDIR)$(DATADIR)/fenced/examples $(DESTDIR)$(SYSCONFDIR)/fenced
	$(INSTALL_BIN) $(BUILD)/fence-proxy $(DESTDIR)$(BINDIR)/fence-proxy
	$(INSTALL_DATA) docs/fence-proxy.8 $(DESTDIR)$(MANDIR)/man8/fence-proxy.8
	$(INSTALL_DATA) dist/fence-proxy.conf $(DESTDIR)$(DATADIR)/fenced/examples/fence-proxy.conf
	test -e $(DESTDIR)$(SYSCONFDIR)/fenced/fence-proxy.conf || \
	    $(INSTALL_DATA) dist/fence-proxy.conf $(DESTDIR)$(SYSCONFDIR)/fenced/fence-proxy.conf

# The torture kit in TOOLDIR; fence-torture and fence-demo are also linked
# from BINDIR (fencectl demo runs the fence-demo beside it).  Links are
# relative (ln -r), so DESTDIR trees and packages stay relocatable.
TORTURE_KIT := $(BUILD)/fence-torture $(BUILD)/fence-demo $(BUILD)/torture_check.py \
               $(BUILD)/torture_proxy.py $(BUILD)/torture_common.py $(BUILD)/fenceproto.py \
               $(BUILD)/fence-torture-worker $(BUILD)/fence-faults
install-torture: $(TORTURE_KIT) install-bin install-proxy
	$(INSTALL) -d $(DESTDIR)$(TOOLDIR) $(DESTDIR)$(BINDIR)
	$(INSTALL_BIN) $(BUILD)/fence-torture $(BUILD)/fence-demo $(BUILD)/torture_check.py \
	    $(BUILD)/torture_proxy.py $(BUILD)/fence-torture-worker $(BUILD)/fence-faults \
	    $(DESTDIR)$(TOOLDIR)/
	$(INSTALL_DATA) $(BUILD)/torture_common.py $(BUILD)/fenceproto.py $(DESTDIR)$(TOOLDIR)/
	ln -sfr $(DESTDIR)$(BINDIR)/fenced $(DESTDIR)$(TOOLDIR)/fenced
	ln -sfr $(DESTDIR)$(BINDIR)/fence-store $(DESTDIR)$(TOOLDIR)/fence-store
	ln -sfr $(DESTDIR)$(BINDIR)/fence-proxy $(DESTDIR)$(TOOLDIR)/fence-proxy
	ln -sfr $(DESTDIR)$(TOOLDIR)/fence-torture $(DESTDIR)$(BINDIR)/fence-torture
	ln -sfr $(DESTDIR)$(TOOLDIR)/fence-demo $(DESTDIR)$(BINDIR)/fence-demo

# The SQL and Lua adapters (nothing to build), with their READMEs.
install-adapters:
	$(INSTALL) -d $(DESTDIR)$(DATADIR)/fenced/adapters/postgres \
	    $(DESTDIR)$(DATADIR)/fenced/adapters/redis
	$(INSTALL_DATA) adapters/postgres/fence.sql adapters/postgres/fence_signed.sql \
	    adapters/postgres/README.md $(DESTDIR)$(DATADIR)/fenced/adapters/postgres/
	$(INSTALL_DATA) adapters/redis/fence.lua adapters/redis/README.md \
	    $(DESTDIR)$(DATADIR)/fenced/adapters/redis/

# Man pages for every program (fencectl.1: install-cli, fence-proxy.8:
# install-proxy).  fence-demo and the fault proxy fence-faults (in TOOLDIR,
# not on the PATH) are described in fence-torture(1).
install-man: install-bin
	$(INSTALL) -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8
	$(INSTALL_DATA) docs/fenced.8 docs/fence-store.8 $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL_DATA) docs/fence-torture.1 $(DESTDIR)$(MANDIR)/man1/
	printf '.so man1/fence-torture.1\n' >$(DESTDIR)$(MANDIR)/man1/fence-demo.1
	chmod 644 $(DESTDIR)$(MANDIR)/man1/fence-demo.1

# Example configurations, and the services' configuration when absent.
install-conf:
	$(INSTALL) -d $(DESTDIR)$(DATADIR)/fenced/examples $(DESTDIR)$(SYSCONFDIR)/fenced \
	    $(DESTDIR)$(SYSCONFDIR)/default
	$(INSTALL_DATA) fenced.conf $(DESTDIR)$(DATADIR)/fenced/examples/fenced-dev.conf
	$(INSTALL_DATA) dist/fenced.conf $(DESTDIR)$(DATADIR)/fenced/examples/fenced.conf
	$(INSTALL_DATA) dist/fence-store.default $(DESTDIR)$(DATADIR)/fenced/examples/fence-store.default
	test -e $(DESTDIR)$(SYSCONFDIR)/fenced/fenced.conf || \
	    $(INSTALL_DATA) dist/fenced.conf $(DESTDIR)$(SYSCONFDIR)/fenced/fenced.conf
	test -e $(DESTDIR)$(SYSCONFDIR)/default/fence-store || \
	    $(INSTALL_DATA) dist/fence-store.default $(DESTDIR)$(SYSCONFDIR)/default/fence-store

# systemd units (BINDIR and SYSCONFDIR filled in) and their users.
install-systemd:
	$(INSTALL) -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR)
	for u in fenced fence-store fence-proxy; do \
	    sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
	        dist/systemd/$$u.service.in >$(DESTDIR)$(UNITDIR)/$$u.service && \
	    chmod 644 $(DESTDIR)$(UNITDIR)/$$u.service || exit 1; \
	done
	$(INSTALL_DATA) dist/sysusers/fenced.conf dist/sysusers/fence-store.conf \
	    dist/sysusers/fence-proxy.conf $(DESTDIR)$(SYSUSERSDIR)/

.PHONY: install install-bin install-lib install-guard install-cli install-proxy install-torture \
        install-adapters install-man install-conf install-systemd

# The Debian packages, built and installed into a scratch root; opt-in
# (FENCE_TEST_PACKAGES=1), see the test's head.
INTEG_TESTS += tests/integration/test_packages.sh
# make install into a DESTDIR, then the installed tree is run.
INTEG_TESTS += tests/integration/test_install.sh
# Every example's ports follow docs/ports.md.
INTEG_TESTS += tests/integration/test_ports.sh
