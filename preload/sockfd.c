/* SPDX-License-Identifier: MIT */
/* Which sock an fd refers to: see sockfd.h. */
#include "shim.h"
#include "sockfd.h"
#include "log.h"
#include "stats.h"

/* Put s on fd, dropping whatever a close we never saw left there;
 * closing: that is the program's close of the old file (last_fd). */
static void fd_install(int fd, struct shim_sock *s, bool closing)
{
	struct shim_sock *stale;
	bool edge = false;

	if (s && !shim_sock_is_sentinel(s))
		__atomic_add_fetch(&s->fdrefs, 1, __ATOMIC_RELAXED);
	stale = shim_fd_xchg(fd, s);
	if (stale == &shim_internal_sock) {
		shim_log_fd_changed(fd, true);
	} else if (stale && !shim_sock_is_sentinel(stale)) {
		/* The last fd of a file takes its epoll registrations (and
		 * its stats slot) with it, as the kernel does.  seq_cst: an
		 * epoll_ctl ADD linking a registration now sees fdrefs 0, or
		 * this sees its ep_regs (epoll.c, ctl_slow). */
		if (!__atomic_sub_fetch(&stale->fdrefs, 1, __ATOMIC_SEQ_CST)) {
			shim_kind_fn *last =
			    shim_kind_ops(shim_kind(stale))->last_fd;

			/* handlers held in it run once stale is put (or
			 * at the end of the exported call around this) */
			if (last && closing) {
				shim_sig_edge_enter();
				edge = true;
				last(stale);
			}
			if (stale->stat_ref)
				shim_stat_release(stale);
			if (__atomic_load_n(&stale->ep_regs, __ATOMIC_SEQ_CST))
				shim_sock_ev_forget(stale);
		} else if (shim_kind_is(stale, SHIM_KF_EPSET)) {
			shim_sock_ev_fd_closing(stale, fd);
		}
		shim_sock_put(stale);
	}
	if (edge && shim_sig_edge_leave())
		shim_sig_run_if_free();
}

void shim_fd_install(int fd, struct shim_sock *s)
{
	fd_install(fd, s, true);
}

void shim_fd_replace(int fd, struct shim_sock *s)
{
	fd_install(fd, s, false);
}

void shim_fd_share(int oldfd, int newfd)
{
	struct shim_sock *s = shim_fd_get(oldfd);

	if (shim_sock_is_sentinel(s))
		s = NULL; /* a copy of stderr is the program's own fd */
	/* oldfd closed by another thread since the dup: newfd keeps the
	 * kernel's socket, which the shim lets go of with oldfd */
	if (s && !shim_sock_tryget(oldfd, s, SHIM_SK_ANY))
		s = NULL;
	if (newfd == 2 && !s && shim_fd_get(2) == &shim_internal_sock) {
		shim_log_fd_changed(2, false); /* a new stderr: keep logging */
		return;
	}
	shim_fd_install(newfd, s);
}
