# src/proto: the RESP2 codec, a static library shared by fenced and
# fence-store (pure code: no I/O, no allocation).
PROTO_SRC := $(wildcard src/proto/*.c)
PROTO_OBJ := $(PROTO_SRC:%.c=$(BUILD)/%.o)
PROTO_LIB := $(BUILD)/libfenceproto.a

# Its users link $(COMMON_LIB) after it (FENCE_ASSERT's handler).
$(PROTO_LIB): $(PROTO_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

LIBS_OUT += $(PROTO_LIB)

# Unit test of the parser and the encoders.
$(BUILD)/tests/test_resp: $(BUILD)/tests/unit/test_resp.o $(PROTO_LIB) $(BUILD)/libfencecommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS)
UNIT_TESTS += $(BUILD)/tests/test_resp

# Fuzz target tests/fuzz/resp_fuzz.c (see mk/fuzz.mk).
FUZZ_TARGETS += resp
FUZZ_resp_LIBS := $(PROTO_LIB) $(BUILD)/libfencecommon.a

# Fuzz target tests/fuzz/resp3_fuzz.c: the reply encoders, RESP2 and RESP3.
FUZZ_TARGETS += resp3
FUZZ_resp3_LIBS := $(PROTO_LIB) $(BUILD)/libfencecommon.a
FUZZ_resp3_LDLIBS := -lm
