/* The version every binary prints for --version (and fenced's INFO). */
#ifndef FENCE_COMMON_VERSION_H
#define FENCE_COMMON_VERSION_H

#define FENCE_VERSION "0.1.0"

#endif /* FENCE_COMMON_VERSION_H */
