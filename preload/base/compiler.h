/* SPDX-License-Identifier: MIT */
/* Compiler words every file of the library uses; nothing else. */
#ifndef SHIM_COMPILER_H
#define SHIM_COMPILER_H

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define SHIM_EXPORT __attribute__((visibility("default")))
/* On declarations too: -fvisibility=hidden only covers definitions, and an
 * extern without it is reached through the GOT (an extra load per use). */
#define SHIM_HIDDEN __attribute__((visibility("hidden")))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
