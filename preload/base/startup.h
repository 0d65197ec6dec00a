/* SPDX-License-Identifier: MIT */
/*
 * The one ordered list of what the rooms do at start-up and around fork.
 * base/init.c first sets up the symbols, the log and the configuration,
 * then runs each step's start in this order (the base's fd table first); at
 * fork it runs every prepare in this order, every parent handler in the
 * reverse order and every child handler in this order (pthread_atfork,
 * registered once by the base).  A room registers its own step with
 * SHIM_STARTUP (a record in a section of its own, as the kernel's
 * initcalls), so the base never names a room above it; a lock or table
 * added later gets its child reset by adding one line here and one
 * SHIM_STARTUP beside it.  Every step is registered exactly once: init
 * checks it.
 */
#ifndef SHIM_STARTUP_H
#define SHIM_STARTUP_H

#define SHIM_STARTUP_LIST(X)                                                   \
	X(FDTABLE)  /* fdtable.c: the fd table (its child reset runs first) */ \
	X(SIGDEFER) /* sigdefer.c: the handler table's lock */                 \
	X(STATS)    /* stats.c: the stats segment; a child starts without */   \
	X(HANDOVER) /* handover.c: fresh connections handed over at fork */    \
	X(EPOLL)    /* epoll.c: set locks held across fork; a set's end */     \
	X(SETTLE)   /* settle.c: the lock of connects' ends */                 \
	X(CONNECT)  /* connect.c: the connect thread and its queue */          \
	X(SOCKET)   /* socket.c: a listener's door shuts with its sock */      \
	X(URING)    /* uring.c: the threads' accept rings */                   \
	X(SOCK)	    /* sock.c: fd 2 watched; the sock pool (prepare last) */   \
	X(GLUE)	    /* rsocket_glue: librdmacm's locks, caches, sleepers */    \
	X(ADOPT)    /* socket.c: inherited listeners taken as listen() does */ \
	X(FORK)	    /* fork.c: a child disowns inherited RDMA (last) */

#define SHIM_STARTUP_ENUM(name) SHIM_STARTUP_##name,
enum shim_startup_order { SHIM_STARTUP_LIST(SHIM_STARTUP_ENUM) SHIM_STARTUP_N };
#undef SHIM_STARTUP_ENUM

struct shim_startup {
	int order;
	void (*start)(void);   /* at init, after the base */
	void (*prepare)(void); /* before fork, in the forking thread */
	void (*parent)(void);  /* after fork, in the parent */
	void (*child)(void);   /* after fork, in the child */
	/* Once the shim's own constructor runs, after init: init may come
	 * first, from inside another library's start (a sanitizer's start
	 * calls sigaction, the shim's), where calling into libraries that
	 * are still starting aborts; a step that does so runs here. */
	void (*loaded)(void);
};

#define SHIM_STARTUP(name, ...)                                                \
	static const struct shim_startup shim_startup_##name __attribute__((   \
	    used, section("shim_startup"), aligned(sizeof(void *)))) = {       \
	    .order = SHIM_STARTUP_##name, __VA_ARGS__}

#endif
