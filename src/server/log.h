/* Logging for the fenced daemon: the shared logger (src/common/log.h: one
 * line format with time, pid and level word; --log-file reopened on
 * SIGHUP) plus the short macros fenced's files use.  Only the daemon logs;
 * the libraries it links return codes instead. */
#ifndef FENCE_SERVER_LOG_H
#define FENCE_SERVER_LOG_H

#include "common/log.h"

#define LOG_DEBUG(...) FENCE_LOG(FENCE_LOG_DEBUG, __VA_ARGS__)
#define LOG_INFO(...) FENCE_LOG(FENCE_LOG_INFO, __VA_ARGS__)
#define LOG_WARN(...) FENCE_LOG(FENCE_LOG_WARN, __VA_ARGS__)
#define LOG_ERROR(...) FENCE_LOG(FENCE_LOG_ERROR, __VA_ARGS__)

#endif /* FENCE_SERVER_LOG_H */
