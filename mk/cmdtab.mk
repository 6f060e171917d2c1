# The one command table of each daemon (src/daemon/compat.h's rows): a unit
# test walks every table and drives the ACL gate with every row.
$(BUILD)/tests/test_cmdtab: $(BUILD)/tests/unit/test_cmdtab.o $(COMPAT_TABLES) \
                            $(BUILD)/libfencecommon.a $(BUILD)/libfenceproto.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(BUILD)/libfencecommon.a $(LDFLAGS) $(SODIUM_LIBS) \
	    $(shell pkg-config --libs libuv 2>/dev/null)
UNIT_TESTS += $(BUILD)/tests/test_cmdtab
