# src/common: parts shared by every daemon and library (assertions, and the
# connection layer, options, log, numbers, crc32c and fs helpers as they
# land).  One static library; every program links it after its own objects.
# -fPIC: the guard's shared library takes crc32c.o from here.
CFLAGS_src_common_ := -fPIC $(shell pkg-config --cflags libuv 2>/dev/null)
COMMON_SRC := $(wildcard src/common/*.c)
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/%.o)
COMMON_LIB := $(BUILD)/libfencecommon.a

$(COMMON_LIB): $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

LIBS_OUT += $(COMMON_LIB)
