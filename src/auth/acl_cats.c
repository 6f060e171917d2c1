/* ACL category names (see acl.h).  Apart from acl.c so that the command
 * tables' users (compat_command.c's COMMAND INFO) need no libsodium. */
#include <stddef.h>

#include "auth/acl.h"

const fence_acl_category fence__acl_categories[] = {
    {"all", FENCE_ACL_CAT_ALL},          {"lock", FENCE_ACL_CAT_LOCK},
    {"lease", FENCE_ACL_CAT_LEASE},      {"read", FENCE_ACL_CAT_READ},
    {"write", FENCE_ACL_CAT_WRITE},      {"admin", FENCE_ACL_CAT_ADMIN},
    {"store", FENCE_ACL_CAT_STORE},      {"fence", FENCE_ACL_CAT_FENCE},
    {"connection", FENCE_ACL_CAT_CONNECTION},
};
const size_t fence__acl_categories_n =
    sizeof(fence__acl_categories) / sizeof(fence__acl_categories[0]);

const char *fence_acl_category_name(uint32_t bit)
{
    for (size_t i = 1; i < fence__acl_categories_n; i++) /* [0] is @all */
        if (fence__acl_categories[i].cats == bit)
            return fence__acl_categories[i].name;
    return NULL;
}
