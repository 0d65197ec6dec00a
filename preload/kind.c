/* SPDX-License-Identifier: MIT */
/* The kinds' table and their rooms' operations: see kind.h. */
#include "kind.h"

#define SHIM_KIND_INFO_(k, nm, p, a) [SHIM_SK_##k] = {.name = nm, .props = p},
const struct shim_kind_info shim_kinds[SHIM_SK_N] = {
    [0] = {.name = "none"}, SHIM_KIND_TABLE(SHIM_KIND_INFO_, 0)};

const char *shim_kind_name(int kind)
{
	if (kind < 0 || kind >= SHIM_SK_N || !shim_kinds[kind].name)
		return "?";
	return shim_kinds[kind].name;
}

/* Slot 0 stays empty: shim_kind_ops gives it for a kind out of range. */
struct shim_kind_ops shim_kind_ops_[SHIM_SK_N];

void shim_kind_set_ops(int kind, const struct shim_kind_ops *ops)
{
	struct shim_kind_ops *o;

	if (kind <= 0 || kind >= SHIM_SK_N)
		return;
	o = &shim_kind_ops_[kind];
	if (ops->release)
		o->release = ops->release;
	if (ops->fork_child)
		o->fork_child = ops->fork_child;
	if (ops->last_fd)
		o->last_fd = ops->last_fd;
	if (ops->guarded)
		o->guarded = ops->guarded;
}
