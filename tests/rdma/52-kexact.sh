#!/usr/bin/env bash
# Signals, hang-ups and timeouts are kernel-exact on RDMA fds (issue 15):
# tests/progs/kexact runs once over kernel TCP and once under the shim with
# ERDMA_SHIM=require (nothing may fall back: every connection is an RDMA
# one), and the transcripts must match case by case:
#   pending  epoll_pwait/ppoll/pselect with a signal pending and a wait mask
#            that unblocks it: EINTR at once
#   restart  a blocking recv/accept under a 50 ms timer: restarted under
#            SA_RESTART (also with another signal caught without it),
#            EINTR without it or with SO_RCVTIMEO set
#   hup-out  a writer waiting for OUT only when the peer closes with data
#            unread: woken at once with ERR|HUP (not maskable)
#   shut-rd  queued data still reads after shutdown(SHUT_RD), then EOF
#   recv0    zero-length reads; MSG_PEEK|MSG_WAITALL
#   timeo    SO_RCVTIMEO bounds a whole MSG_WAITALL recv and an accept,
#            SO_SNDTIMEO a whole 64 MiB send to a peer that never reads
#   cancel   pthread_cancel of a thread blocked in recv: it ends at once, the
#            process's later waits still sleep, the socket's close ends it
#   cancel-wait  the same for a thread blocked in poll, then in epoll_wait;
#            and a thread that calls poll (with a timeout) with a cancel
#            pending: it ends at once and leaves no fd behind (under ASan it
#            runs with the shipped library, below)
#   epdup    a copy of an epoll fd made by fcntl(F_DUPFD) is the same set
#   epclose  an epoll fd closed while another thread waits on it, its number
#            taken at once by a new epoll fd with a ready eventfd: the
#            waiter keeps the set it entered, and wakes for its data only
#   lclose   close/shutdown of a listener with connections queued: their
#            clients see the end at once; nothing is accepted after shutdown.
#            Run twice: then again with rsockets' accept slowed by 150 ms
#            after the connection is established (tests/inject/
#            slowaccept.so), so that the listener goes while its second
#            client's connection, connected on the client's side, is not
#            yet on the accept queue
#   acceptargs  accept with no address leaves the length alone; with an
#            address and no length, a negative length or an unmapped
#            address it takes the connection and drops it (EFAULT,
#            EINVAL): its client sees the end, as one whose accepted
#            socket is closed at once
#   syscall  libc's syscall() with the socket calls' numbers (read, write,
#            sendto, recvmsg, recvfrom, shutdown, close)
#   fdopen   stdio (fputs/fgets/fclose) on fdopen'ed sockets, both ends
#   splice   1 MiB socket -> pipe and pipe -> socket
#   nbconnect  non-blocking connect: EINPROGRESS at once, also towards a
#            host that never answers (the shim's rendezvous runs behind it;
#            its timeout is raised to 5 s here so that this peer stays
#            pending through the case, as over TCP); while pending: EAGAIN,
#            EALREADY, no events; a listener's connection turns writable
#            (epoll ET registered before the connect, poll) meanwhile;
#            connect's completion answers; made blocking, connect and send
#            wait for it
#   nbrefused  a non-blocking connect refused (under require: no RDMA
#            listener there; the shim then leaves its kernel socket refused
#            too): IN|OUT|ERR|HUP, the error told once, EPIPE, EOF,
#            ECONNABORTED, then a new attempt
#   longjmp  siglongjmp out of a recv, a poll and an epoll_wait blocked on
#            connections, and out of an accept: the thread's later poll and
#            recv sleep and see their data, its cancellation is still
#            enabled, closing the sockets ends them for their peers, and the
#            closed listener's port refuses
#   alarm    setitimer's SIGALRM while the main thread is blocked in recv and
#            another thread lets SIGALRM through: the main thread takes it
#            (EINTR), as the kernel prefers the main thread
#   ring-eintr  a blocking accept (under the shim: armed on the thread's
#            io_uring beside the RDMA door), then an epoll_wait in the same
#            thread: it times out, no EINTR from a ring's exit work
#   bindaddr  a client bound to the bed's second address with
#            IP_BIND_ADDRESS_NO_PORT: the connection leaves from that
#            address (the shim's port reservation used to bind the
#            wildcard over it), and the option reads back as set
#   connect-intr  a blocking connect to a host that never answers ends with
#            EINTR when a handler without SA_RESTART runs (0.3 s), and again
#            on the next call; made non-blocking, EALREADY; 10 blocking
#            connects to the listener under a 2 ms SA_RESTART timer all
#            connect (the kernel restarts them)
#   close-fds  20 connections (connect, an 8-byte echo, both ends closed):
#            the fd count after each close comes back (within 2 s: the
#            shim's own fds of a closed connection go a little after
#            close) to the one after the first
#   poll-none  a connection whose peer closed (EOF read), watched with events
#            0: poll and epoll_wait sleep their whole 0.5 s.  KNOWN: the
#            shim's poll returns 0 at once (docs/limits.md, "Hang-ups")
#   close-jump  close, close_range and dup2 over a connection's fd just
#            after its connect, while a 50 ms timer's handler jumps away:
#            the call is done (the fd closed, or /dev/null).  Run twice:
#            then again with the connect thread's let-go slowed by 200 ms
#            (tests/inject/slowclose.so), so that the handler comes while
#            the shim waits for it; and close_range with a flag the kernel
#            does not know: EINVAL, and the connection carries on
#   trunc    recv/recvmsg with MSG_TRUNC (with and without MSG_PEEK, a NULL
#            buffer, a length past what is queued, a 4-byte buffer with a
#            length of 100, MSG_WAITALL, after the peer's FIN): the count,
#            and a guard pattern that proves nothing was written (issue 43)
#   trunc-timeo  recv(NULL, 80 KiB, MSG_TRUNC|MSG_WAITALL) with SO_RCVTIMEO
#            0.5 s, the peer sending 16 KiB every 0.3 s: the timeout bounds
#            the whole call (a part, after 0.2-1 s), not each 16 KiB piece
#            the shim drains at a time
#   cancel-mask  pthread_cancel of a thread in ppoll/epoll_pwait with a
#            mask: cancelled while it waits, its cleanup handlers see the
#            wait's mask; a cancel pending at the call acts before the
#            wait, with the thread's own (under ASan: with the shipped
#            library, as cancel-wait)
#   cancel-ready  a cancel pending as a thread calls poll, epoll_wait,
#            recv or send whose answer is ready: it acts as the call
#            starts, as glibc's (under ASan: the shipped library)
#   serial   two connects, the second written first, to a server that
#            reads each connection to its end before accepting the next:
#            connect never waits for the server's accept
#   bufsz    SO_RCVBUF/SO_SNDBUF of 1 GiB read back as 2 x rmem_max/wmem_max
#            on a listener, a client (which still connects: its rsocket
#            pins the clamped size) and the accepted socket (its
#            listener's); the kernel's minimum; SO_RCVBUFFORCE as root
#   read0    read()/readv() of zero bytes: 0 at once, blocking or not
#            (the kernel's sock_read_iter; recv(0) waits: recv0); after
#            SHUT_WR a writev of nothing is 0 (the VFS never calls the
#            socket), a write(0) EPIPE  [review3]
#   peekv    recvmsg(MSG_PEEK) over two iovecs fills both  [review3]
#   tcpinfo  getsockopt(TCP_INFO) tcpi_state: ESTABLISHED on both ends,
#            CLOSE_WAIT after the peer's close is read; CLOSE on both ends
#            once each has shut for writing and read the other's FIN
#            [review3]
#   outq     ioctl(SIOCOUTQ) after filling the send path of a peer that
#            does not read: more than 0.  KNOWN: 0 under the shim
#            (docs/limits.md, SIOCOUTQ)  [review3]
#   rcvlowat SO_RCVLOWAT 10 with 5 bytes queued: poll and epoll_wait say
#            nothing until 10 are; a blocking recv(MSG_PEEK) waits for
#            them until its SO_RCVTIMEO (0.5 s), then gives the 5  [review3]
#   timeo-neg  SO_RCVTIMEO of -1 s is taken and expires at once: a blocking
#            recv with nothing queued is EAGAIN now (sock_set_timeout)
#   etedge   edge-triggered EPOLLIN with 40 KiB queued and reported: each
#            later arrival is a new edge though nothing was read (the
#            shim's count peeks at 16 KiB, then at all that is queued),
#            none without one; after a partial read, the next arrival too
#   peername  getpeername names the peer while established and after
#            one side's SHUT_WR; ENOTCONN on both ends once each has shut
#            for writing and read the other's FIN (inet_getname: CLOSE)
#            [review4]
#   seltmo   select with tv_usec 1200000 waits 1.2 s (glibc carries it
#            into the seconds), tv_usec -1 is EINVAL; ppoll, pselect and
#            epoll_pwait2 with a timespec out of range (-1 s, 1e9 ns):
#            EINVAL at once, even with an fd ready  [review4]
#   linger0  close with SO_LINGER {1, 0}: its peer sees ERR|HUP, recv
#            ECONNRESET, then EOF.  KNOWN  [review4]
#   async    O_ASYNC with F_SETOWN: data arriving raises SIGIO.  KNOWN
#            [review4]
#   select-ex  select on exceptfds only of a connection whose peer closed
#            (EOF read): sleeps its 0.5 s.  KNOWN (as poll-none)  [review4]
#   unspec   connect(AF_UNSPEC): a connection is disconnected (its peer
#            reset, getpeername ENOTCONN) and connects again; a listener
#            stops listening (accept EINVAL, its port refuses).  KNOWN
#            [review4]
#   maxseg   TCP_MAXSEG of a connection: more than an unconnected
#            socket's 536; IP_MTU: 576 or more.  KNOWN  [review4]
#   defer-accept  a listener with TCP_DEFER_ACCEPT: a connection that sent
#            nothing is not ready to accept (0.6 s); its first byte makes
#            it so.  KNOWN  [review4]
#   opt-inherit  an accepted socket reads back its listener's TCP_NODELAY,
#            SO_LINGER, SO_OOBINLINE and IP_TOS  [review4]
#   select-badf  select with a closed fd above a connection's: EBADF, the
#            sets left as they were  [review4]
#   lconnect  connect on a listener: EINVAL (no address, a length short
#            of a family), EFAULT (unmapped), then EISCONN  [review4]
#   peername-opt  getsockopt(SO_PEERNAME): the peer (a prefix for a short
#            length, EINVAL past the name's), also once closed  [review4]
#   timeo-inherit  SO_RCVTIMEO_NEW (66) bounds a blocking recv as
#            SO_RCVTIMEO does; an accepted socket has its listener's
#            SO_RCVTIMEO/SO_SNDTIMEO (reads back, bounds recv)  [review4]
# Under require a connect that can't use RDMA fails (the transcript shows
# it): every connection that succeeds here is an RDMA one.
. "$(dirname "$0")/lib/common.bash"
. "$(dirname "$0")/lib/transcript.bash"

PROG=$PROGS/kexact
[ -x "$PROG" ] || fail "$PROG is not built (run make on the host first)"

declare -A KNOWN=(
	[outq]="SIOCOUTQ is 0 with a peer that does not read: rsockets sends only into room the peer granted and holds nothing unacknowledged; the backlog waits in the peer's receive buffer"
	[rcvlowat]="SO_RCVLOWAT is not applied to an RDMA connection: it is readable from the first byte and a blocking recv returns what is queued (rsockets shows a peer's SHUT_WR only behind its data, so a mark held there could wait for good)"
	[etedge]="ET EPOLLIN with more than 16 KiB queued and unread: a later arrival gives no new event until the program reads (the shim counts 16 KiB; counting all of it cost a copy of the queue per look)"
	[linger0]="close with SO_LINGER {1, 0} is an orderly close for its peer (IN|RDHUP, recv EOF; no ERR, no ECONNRESET): rsockets has no reset to send"
	[async]="O_ASYNC/F_SETOWN on an RDMA connection raises no SIGIO when data arrives: the bytes reach the rsocket, not the kernel socket that has the flag"
	[select-ex]="select on exceptfds only of a connection whose peer closed returns 0 at once (rsockets' HUP ends the sleep, as poll-none)"
	[unspec]="connect(AF_UNSPEC) does not disconnect: EISCONN on a connection (it stands: getpeername names the peer, whose recv sees nothing) and on a listener (it goes on listening: a client connects)"
	[defer-accept]="TCP_DEFER_ACCEPT is not applied to RDMA connections: the listener is readable, and accept takes the connection, before its first byte"
	[maxseg]="TCP_MAXSEG of an RDMA connection reads 536 and IP_MTU is ENOTCONN, an unconnected socket's answers: the kernel socket under it never connects"
	[poll-none]="poll with events 0 on a connection whose peer closed returns 0 at once (rsockets' HUP, masked away, ends the sleep): a caller's loop spins until its own deadline"
)
# Seen once, in the ASan pass only: after pthread_cancel of a thread
# blocked in recv, closing its socket did not end the peer's read; 3 of 3
# plain runs are exact.  Likely the cause cancel-wait had over siw (a
# cancel acted on inside librdmacm, its locks left held; calls into it now
# run with cancellation disabled), kept open until runs show it gone.
if [ "${SANITIZE:-0}" = 1 ]; then
	OPEN_DEFECT[cancel]="under ASan, a cancelled recv's socket once stayed open after its close"
	# Not run under ASan, either way: a thread cancelled in poll unwinds
	# through glibc's longjmp, and ASan then reports its own stack
	# unpoisoning as a stack-buffer-overflow in the dead frames (a false
	# positive, its HINT says so; seen 2 of 2).
	# (cancel-ready: the same report, at the cancelled thread's end,
	# seen 1 of 1.)
	export KEXACT_SKIP="cancel-wait cancel-mask cancel-ready"
fi

export KEXACT_SRC=$IP1 # case bindaddr
fails=0 ncases=0
# pair TAG LIB [CASE...]: kexact over kernel TCP, then under LIB with
# ERDMA_SHIM=require, compared case by case; adds to fails and ncases.
pair() {
	local tag=$1 lib=$2 rc=0
	shift 2
	timeout -k 5 110 "$PROG" "$IP0" "$@" >"$WORK/tcp$tag.out" 2>"$WORK/tcp$tag.err" </dev/null ||
		{ cat "$WORK/tcp$tag.out" "$WORK/tcp$tag.err"; fail "kernel TCP run exited $?"; }
	grep -q '^main: done' "$WORK/tcp$tag.out" || fail "kernel TCP run did not finish"
	env LD_PRELOAD="$lib" ERDMA_SHIM=require ERDMA_SHIM_CONNECT_TIMEOUT_MS=5000 \
		timeout -k 5 110 "$PROG" "$IP0" "$@" \
		>"$WORK/rdma$tag.out" 2>"$WORK/rdma$tag.err" </dev/null || rc=$?
	if [ "$rc" != 0 ] || ! grep -q '^main: done' "$WORK/rdma$tag.out"; then
		echo "FAIL the shimmed run did not finish cleanly (exit $rc); last stderr lines:"
		tail -n 20 "$WORK/rdma$tag.err" | sed 's/^/    | /'
		fails=$((fails + 1))
	fi
	compare "$WORK/tcp$tag.out" "$WORK/rdma$tag.out"
	fails=$((fails + NDIFF)) ncases=$((ncases + NCASES))
}
pair "" "$PRELOAD"
inj=$ROOT/build/tests/inject/slowclose.so
[ -f "$inj" ] || fail "no $inj (make)"
echo "close-jump with the connect thread slowed ($inj):"
pair -slow "$PRELOAD:$inj" close-jump
inj=$ROOT/build/tests/inject/slowaccept.so
[ -f "$inj" ] || fail "no $inj (make)"
echo "lclose with the listener's accepts slowed ($inj):"
pair -slowacc "$PRELOAD:$inj" lclose
if [ "${SANITIZE:-0}" = 1 ] && [ "$SHIM_LIB" != "$ROOT/liberdma_shim.so" ]; then
	# the cancel cases ASan can't run (above), with the shipped library:
	# the iWARP pass is the ASan one, and this is what it would miss.
	# (Not under `make test SANITIZE=1`, where that library is ASan's.)
	echo "cancel-wait, cancel-mask and cancel-ready with the shipped library ($ROOT/liberdma_shim.so):"
	KEXACT_SKIP='' pair -cw "$ROOT/liberdma_shim.so" cancel-wait cancel-mask cancel-ready
fi
NCASES=$ncases
NDIFF=$fails
if [ "$fails" != 0 ]; then
	echo "RESULT: $((NCASES - NDIFF)) of $NCASES cases identical; $fails failure(s)${FAILED[*]:+: ${FAILED[*]}}"
	exit 1
fi
echo "RESULT: $((NCASES - ${#KNOWN_SEEN[@]})) of $NCASES cases identical over kernel TCP and RDMA (ERDMA_SHIM=require)${KNOWN_SEEN[*]:+; documented deviations: ${KNOWN_SEEN[*]}}"
