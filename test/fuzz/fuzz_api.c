/* SPDX-License-Identifier: MIT */
/*
 * fuzz_api.c — libFuzzer harness for weft's public API (include/weft.h).
 *
 * Each input is a small program (the encoding is in test/fuzz/README.md):
 * a 4-byte header picks the runtime (1 or 2 workers), the objects
 * (channels of several capacities and element sizes, mutexes, condition
 * variables, wait groups, socket pairs and a pipe, coroutine-local keys) and
 * how the run ends; then 3-byte instructions are dealt to up to four actor
 * coroutines and, optionally, to the fuzzer's own thread acting as a plain
 * (non-coroutine) thread.  An actor's SPAWN takes the next instructions of
 * its own list as the body of a child coroutine.
 *
 * Every call's result is checked against a model: only documented errno
 * values, and the exact one where the model can predict it,
 * channel items tagged with sequence numbers (received at most once, only
 * if sent, FIFO per sender, everything sent is drained after close, then
 * EPIPE), wait-group counts, mutual exclusion, deadlines (ETIMEDOUT only
 * once they passed), cancellation (every blocking call fails at once after
 * weft_cancel), socket byte streams (content and counts, through each
 * reading and writing call: read, readv, recv, recvmsg, write, writev,
 * send), local keys and their destructors, weft_offload and
 * weft_stats_get, weft_lock_thread (a locked coroutine never changes
 * worker), and liveness (a wait
 * whose reason to end is there must end).  A violation prints a line and
 * the state of every coroutine, then abort()s, which libFuzzer records as a
 * crash.
 *
 * The end of each run is made to terminate by construction: children never
 * wait without a deadline, mutexes are taken in a global order when the
 * call may block, and the main coroutine ends the run by closing every
 * channel and cancelling every actor (each then cancels and detaches the
 * children it cannot join).  A watchdog thread aborts an input that runs
 * longer than FUZZ_API_WATCHDOG_MS (default 5000) ms.
 *
 * Nothing here is undefined by the header: no object is used after its
 * _free, no coroutine is joined/detached twice or cancelled after it was
 * joined or detached, and no fd number is used after weft_close without
 * the guarantee that the number was not reused (no fd is opened while a
 * program runs; see README.md).
 */
#define WEFT_ERRNO_GUARD
#include "weft.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ sizes */

enum {
	MAX_ACTORS = 4,
	MAX_CTX = 48,		/* main + actors + thread + children */
	MAX_KIDS = 4,		/* child slots per parent */
	MAX_INSN = 256,
	MAX_SEQ = 8192,		/* channel items per input */
	NCHAN = 3,
	NMUTEX = 3,
	NCOND = 2,
	NWG = 2,
	NFD = 6,		/* two socket pairs and a pipe */
	NKEY = 3,
	IOBUF = 16384,
	MAX_CASES = 8,
	HEADER = 4,
};

static const int64_t US = 1000, MS = 1000 * 1000;

/* ------------------------------------------------------------ failing */

static void dump_state(void);

static void fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "\nfuzz_api: INVARIANT VIOLATED at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	dump_state();
	fflush(stderr);
	abort();
}

#define FAIL(...) fail(__FILE__, __LINE__, __VA_ARGS__)
#define CHECK(c, ...)                                                     \
	do {                                                              \
		if (!(c))                                                 \
			fail(__FILE__, __LINE__, "CHECK(" #c ") " __VA_ARGS__); \
	} while (0)

/* ------------------------------------------------------------ model */

enum role { R_MAIN, R_ACTOR, R_CHILD, R_THREAD };
static const char *const role_name[] = { "main", "actor", "child", "thread" };

struct ctx;

struct token {			/* a coroutine-local value */
	struct ctx *owner;
	int key;
	int depth;		/* key 2: its destructor re-sets the key while > 1 */
};

struct ctx {
	int id;
	enum role role;
	const uint8_t *prog[MAX_INSN];
	int nprog;
	struct ctx *parent;
	_Atomic(weft_co *) handle;	/* as returned by weft_spawn (actors: main's) */
	_Atomic(weft_co *) self;	/* weft_self() as seen by the coroutine */
	uint64_t co_id;
	atomic_int cancel_req;		/* set before weft_cancel(it) */
	atomic_int cancel_done;		/* set after weft_cancel(it) returned */
	atomic_int returned;		/* its function's body is done */
	atomic_int pc;
	atomic_int op;			/* the instruction being run, for the dump */
	/* The blocking call in progress, for the liveness check (W_*). */
	atomic_int wait_kind;
	int wait_obj;
	int64_t wait_deadline;
	atomic_uint wait_seq;
	unsigned held;			/* mutexes held (bit i: mutex i) */
	unsigned locks;			/* weft_lock_thread nesting */
	int home;			/* the worker it locked on */
	struct ctx *kid[MAX_KIDS];
	weft_co *kid_h[MAX_KIDS];
	void *local[NKEY];		/* the model of its local values */
	struct token tok[NKEY][4];
	struct token chain[4];		/* key 2's destructor chain */
	int exp_d0, exp_d2;		/* destructor runs expected at its end */
	atomic_int got_d0, got_d2;
	uint32_t last_seq[NCHAN][MAX_CTX];	/* FIFO per (channel, sender) */
	unsigned rng;
	unsigned char *iobuf;
	weft_chan_case *cases;		/* WEFT_SELECT_MAX + 1 */
	unsigned char (*elems)[64];	/* MAX_CASES element buffers */
};

struct chanrec {
	weft_chan *ch;
	size_t esz, cap;
	atomic_int close_started, close_done, close_ok;
	atomic_long sends0, recvs0;	/* elem_size 0: no tags, counts only */
};

struct seqrec {
	atomic_uchar state;	/* S_* */
	unsigned char chan, sender;
	atomic_uchar recvd;
};
enum { S_FREE, S_ATTEMPT, S_OK, S_FAILED };

struct mutexrec {
	weft_mutex *m;
	atomic_int inside;	/* coroutines in its critical section */
	atomic_int owner;	/* ctx id or -1 */
};

struct condrec {
	weft_cond *c;
	atomic_long sig_started, sig_done;
};

struct spin {
	atomic_flag f;
};

struct wgrec {
	weft_wg *wg;
	struct spin lk;
	long model;		/* under lk */
	long zero_epoch;	/* under lk: times the count went to (or stayed at) 0 */
};

struct fdrec {
	int fd;
	int peer;		/* the fd index its data goes to / comes from */
	bool can_read, can_write, is_pipe;
	unsigned char pattern;	/* every byte written on this fd */
	atomic_int close_claimed, close_started, close_done;
	atomic_long wr_ok, wr_unc, rd_total;
};

static struct {
	/* configuration of the current input */
	unsigned workers, nactors;
	bool thread;
	unsigned mode;
	int64_t grace;
	bool leave_unjoined;	/* some children are left to weft_shutdown */
	/* objects */
	struct chanrec ch[NCHAN];
	struct mutexrec mx[NMUTEX];
	struct condrec cv[NCOND];
	struct wgrec wg[NWG];
	struct fdrec fds[NFD];
	weft_key *key[NKEY];
	weft_wg *actors_done;
	/* coroutines */
	struct ctx *ctx[MAX_CTX];
	atomic_int nctx;
	struct ctx *actor[MAX_ACTORS];
	struct ctx *mainc, *threadc;
	atomic_int outstanding;	/* children and the thread still running programs */
	atomic_int thread_done;
	atomic_int actors_started;
	/* channel items */
	struct seqrec seq[MAX_SEQ];
	atomic_uint next_seq;
} G;

static atomic_llong run_started;	/* weft_now() at the start of an input, 0 idle */
static atomic_int run_phase;
static const char *const phase_name[] = { "idle", "init", "program", "join main",
					  "shutdown", "final checks" };
static long watchdog_ms = 5000;
static bool trace;	/* FUZZ_API_TRACE=1: one line per instruction */

/* ------------------------------------------------------------ helpers */

static void spin_lock(struct spin *s)
{
	while (atomic_flag_test_and_set_explicit(&s->f, memory_order_acquire))
		sched_yield();
}

static void spin_unlock(struct spin *s)
{
	atomic_flag_clear_explicit(&s->f, memory_order_release);
}

static unsigned rnd(struct ctx *c)
{
	c->rng ^= c->rng << 13;
	c->rng ^= c->rng >> 17;
	c->rng ^= c->rng << 5;
	return c->rng;
}

static bool in_list(int e, const int *l)
{
	for (; *l; l++)
		if (*l == e)
			return true;
	return false;
}

/* r must be -1 with errno in the list (0-terminated). */
#define EXPECT_FAIL(r, e, what, ...)                                                 \
	do {                                                                          \
		const int l_[] = { __VA_ARGS__, 0 };                           \
		if ((r) != -1 || !in_list((e), l_))                                   \
			FAIL("%s: returned %ld errno %d (%s)", (what), (long)(r), (e), \
			     strerror(e));                                            \
	} while (0)

static bool self_cancel_req(struct ctx *c)
{
	return c && atomic_load(&c->cancel_req);
}

static bool self_cancel_done(struct ctx *c)
{
	return c && atomic_load(&c->cancel_done);
}

static bool coroutine_role(const struct ctx *c)
{
	return c->role != R_THREAD;
}

/* Deadline from the low bits of d.  Children never wait without one (so they
 * always end); the thread only on channels (closed at the end). */
static int64_t deadline_of(struct ctx *c, unsigned d, bool infinite_ok)
{
	int64_t now = weft_now();
	bool inf = infinite_ok && c->role != R_CHILD;
	switch (d & 7) {
	case 0:
		return inf ? -1 : now + MS;
	case 1:
		return d & 8 ? 0 : now - 1;	/* past */
	case 2:
		return now;
	case 3:
		return now + 20 * US;
	case 4:
		return now + 100 * US;
	case 5:
		return now + 500 * US;
	case 6:
		return now + 2 * MS;
	default:
		if ((d & 8) && inf)	/* far future: never expires */
			return d & 16 ? INT64_MAX : INT64_MAX - 1000 * MS;
		return now + 50 * US;
	}
}

static void check_timeout(int64_t deadline, const char *what)
{
	CHECK(deadline != -1, "%s: ETIMEDOUT without a deadline", what);
	int64_t now = weft_now();
	CHECK(now >= deadline, "%s: ETIMEDOUT %lld ns before its deadline", what,
	      (long long)(deadline - now));
}

/* ECANCELED from a call that is not I/O: only after weft_cancel began. */
static void check_cancel_err(struct ctx *c, const char *what)
{
	CHECK(self_cancel_req(c), "%s: ECANCELED but %s %d was never cancelled", what,
	      role_name[c->role], c->id);
}

/* ------------------------------------------------------------ blocking calls */

/* What a coroutine or the thread is waiting in, so that main can tell a
 * wait that should have ended (liveness) from one that may go on. */
enum { W_NONE, W_TIMED, W_WG, W_MUTEX, W_JOIN, W_COND };

static void wait_begin(struct ctx *c, int kind, int obj, int64_t deadline)
{
	c->wait_obj = obj;
	c->wait_deadline = deadline;
	atomic_fetch_add(&c->wait_seq, 1);
	atomic_store(&c->wait_kind, kind);
}

static void wait_end(struct ctx *c)
{
	atomic_store(&c->wait_kind, W_NONE);
}

/* ------------------------------------------------------------ contexts */

static struct ctx *ctx_new(enum role role, struct ctx *parent)
{
	int id = atomic_fetch_add(&G.nctx, 1);
	if (id >= MAX_CTX) {
		atomic_fetch_sub(&G.nctx, 1);
		return NULL;
	}
	struct ctx *c = calloc(1, sizeof *c);
	CHECK(c != NULL);	/* G.ctx[id] stays NULL until it is filled */
	c->id = id;
	c->role = role;
	c->parent = parent;
	c->rng = 0x9e3779b9u * (unsigned)(id + 1);
	atomic_store(&c->op, -1);
	c->iobuf = malloc(IOBUF);
	c->cases = calloc(WEFT_SELECT_MAX + 1, sizeof *c->cases);
	c->elems = calloc(MAX_CASES, sizeof *c->elems);
	CHECK(c->iobuf && c->cases && c->elems);
	for (int k = 0; k < NKEY; k++)
		for (int i = 0; i < 4; i++)
			c->tok[k][i] = (struct token){ c, k, i + 1 };
	for (int i = 0; i < 4; i++)
		c->chain[i] = (struct token){ c, 2, i + 1 };
	G.ctx[id] = c;	/* published before the coroutine can run */
	return c;
}

static void ctx_free(struct ctx *c)
{
	free(c->iobuf);
	free(c->cases);
	free(c->elems);
	free(c);
}

/* ------------------------------------------------------------ locals */

static struct ctx *token_owner(void *v, int key)
{
	struct token *t = v;
	CHECK(t != NULL && t->key == key, "destructor of key %d got a bad value", key);
	struct ctx *c = t->owner;
	bool found = false;
	for (int i = 0; i < MAX_CTX; i++)
		found |= G.ctx[i] == c;
	CHECK(found, "destructor of key %d got a value of no coroutine", key);
	CHECK(weft_self() == atomic_load(&c->self),
	      "destructor of key %d runs outside its coroutine", key);
	return c;
}

static void destructor0(void *v)
{
	struct ctx *c = token_owner(v, 0);
	atomic_fetch_add(&c->got_d0, 1);
}

static void destructor2(void *v)
{
	struct ctx *c = token_owner(v, 2);
	atomic_fetch_add(&c->got_d2, 1);
	struct token *t = v;
	if (t->depth > 1)
		CHECK(weft_local_set(G.key[2], &c->chain[t->depth - 2]) == 0, "errno %d", errno);
}

/* What the destructors must do when c's function returns with its values. */
static void expect_destructors(struct ctx *c)
{
	c->exp_d0 = c->local[0] != NULL;
	int depth = c->local[2] ? ((struct token *)c->local[2])->depth : 0;
	c->exp_d2 = depth > 4 ? 4 : depth;	/* at most 4 passes */
}

static void check_destructors(struct ctx *c, const char *when)
{
	CHECK(atomic_load(&c->got_d0) == c->exp_d0 && atomic_load(&c->got_d2) == c->exp_d2,
	      "%s of %s %d: key destructors ran %d/%d times, expected %d/%d", when,
	      role_name[c->role], c->id, atomic_load(&c->got_d0), atomic_load(&c->got_d2),
	      c->exp_d0, c->exp_d2);
}

/* ------------------------------------------------------------ channel items */

enum { ITEM_MAGIC = 0xa5 };

static void item_fill(unsigned char *p, size_t n, unsigned ch, unsigned sender, uint32_t seq)
{
	if (!n)
		return;
	uint64_t h = (uint64_t)ITEM_MAGIC << 56 | (uint64_t)ch << 48 | (uint64_t)sender << 40 | seq;
	memcpy(p, &h, 8);
	for (size_t i = 8; i < n; i++)
		p[i] = (unsigned char)(seq * 131u + i * 7u + ch);
}

static bool item_parse(const unsigned char *p, size_t n, unsigned *ch, unsigned *sender,
		       uint32_t *seq)
{
	uint64_t h;
	memcpy(&h, p, 8);
	if (h >> 56 != ITEM_MAGIC)
		return false;
	*ch = (unsigned)(h >> 48) & 0xff;
	*sender = (unsigned)(h >> 40) & 0xff;
	*seq = (uint32_t)h;
	for (size_t i = 8; i < n; i++)
		if (p[i] != (unsigned char)(*seq * 131u + i * 7u + *ch))
			return false;
	return true;
}

/* A new tagged item for c to send on channel ci; 0 when out of numbers. */
static uint32_t seq_new(struct ctx *c, int ci, unsigned char *buf)
{
	uint32_t s = atomic_fetch_add(&G.next_seq, 1);
	if (s >= MAX_SEQ)
		return 0;
	struct seqrec *r = &G.seq[s];
	r->chan = (unsigned char)ci;
	r->sender = (unsigned char)c->id;
	atomic_store(&r->state, S_ATTEMPT);
	item_fill(buf, G.ch[ci].esz, (unsigned)ci, (unsigned)c->id, s);
	return s;
}

static void seq_done(int ci, uint32_t s, bool ok)
{
	if (G.ch[ci].esz == 0 && ok)
		atomic_fetch_add(&G.ch[ci].sends0, 1);
	atomic_store(&G.seq[s].state, ok ? S_OK : S_FAILED);
}

/* c received buf from channel ci. */
static void on_recv(struct ctx *c, int ci, const unsigned char *buf)
{
	struct chanrec *cr = &G.ch[ci];
	if (cr->esz == 0) {
		atomic_fetch_add(&cr->recvs0, 1);
		return;
	}
	unsigned ch, sender;
	uint32_t s;
	CHECK(item_parse(buf, cr->esz, &ch, &sender, &s),
	      "channel %d: received a corrupt item (%02x %02x %02x %02x ...)", ci, buf[0], buf[1],
	      buf[2], buf[3]);
	CHECK((int)ch == ci, "channel %d: received an item sent on channel %u", ci, ch);
	CHECK(s > 0 && s < MAX_SEQ && s < atomic_load(&G.next_seq), "channel %d: unknown item %u",
	      ci, s);
	struct seqrec *r = &G.seq[s];
	unsigned st = atomic_load(&r->state);
	CHECK(r->chan == ci && r->sender == sender, "channel %d: item %u mislabelled", ci, s);
	CHECK(st == S_ATTEMPT || st == S_OK,
	      "channel %d: item %u received but its send failed (state %u)", ci, s, st);
	unsigned prev = atomic_fetch_add(&r->recvd, 1);
	CHECK(prev == 0, "channel %d: item %u (from ctx %u) received twice", ci, s, sender);
	CHECK(sender < MAX_CTX);
	CHECK(s > c->last_seq[ci][sender],
	      "channel %d: FIFO broken: item %u from ctx %u after item %u", ci, s, sender,
	      c->last_seq[ci][sender]);
	c->last_seq[ci][sender] = s;
}

/* ------------------------------------------------------------ mutexes */

static void entered(struct ctx *c, int mi)
{
	struct mutexrec *m = &G.mx[mi];
	int v = atomic_fetch_add(&m->inside, 1);
	CHECK(v == 0, "mutex %d: %s %d got it while ctx %d is inside", mi, role_name[c->role],
	      c->id, atomic_load(&m->owner));
	atomic_store(&m->owner, c->id);
	c->held |= 1u << mi;
}

static void leaving(struct ctx *c, int mi)
{
	struct mutexrec *m = &G.mx[mi];
	CHECK(atomic_load(&m->owner) == c->id, "mutex %d: owner %d, leaving %d", mi,
	      atomic_load(&m->owner), c->id);
	atomic_store(&m->owner, -1);
	atomic_fetch_sub(&m->inside, 1);
	c->held &= ~(1u << mi);
}

/* A plain thread (a probe, or an offloaded function whose caller may hold
 * mutexes while it waits) takes a mutex only by trylock, never waiting on
 * a coroutine: it holds it, checks EDEADLK and EPERM, and gives it back. */
static void thread_mutex_probe(struct ctx *c, int mi, const char *where)
{
	weft_mutex *m = G.mx[mi].m;
	int r = weft_mutex_trylock(m);
	if (r != 0) {
		EXPECT_FAIL(r, errno, where, EBUSY);
		r = weft_mutex_unlock(m);
		EXPECT_FAIL(r, errno, where, EPERM);	/* not ours */
		return;
	}
	bool held_before = c->held & (1u << mi);
	CHECK(!held_before, "%s: trylock of a mutex the caller holds", where);
	entered(c, mi);
	r = weft_mutex_lock(m);
	EXPECT_FAIL(r, errno, where, EDEADLK);
	leaving(c, mi);
	CHECK(weft_mutex_unlock(m) == 0, "%s: unlock of a held mutex", where);
	r = weft_mutex_unlock(m);
	EXPECT_FAIL(r, errno, where, EPERM);	/* not held any more */
}

/* A lock that may block is taken only while holding lower mutexes. */
static bool may_block_on(struct ctx *c, int mi)
{
	return (c->held >> (mi + 1)) == 0;
}

static void op_lock(struct ctx *c, int mi)
{
	bool held = c->held & (1u << mi);
	if (!held && !may_block_on(c, mi))
		return;	/* out of order: the program could deadlock */
	bool pre = self_cancel_done(c);
	wait_begin(c, W_MUTEX, mi, -1);
	int r = weft_mutex_lock(G.mx[mi].m);
	int e = errno;
	wait_end(c);
	if (held) {
		if (pre)	/* both apply; the header orders neither */
			EXPECT_FAIL(r, e, "mutex_lock (held, cancelled)", EDEADLK, ECANCELED);
		else
			EXPECT_FAIL(r, e, "mutex_lock (held)", EDEADLK);
		return;
	}
	if (r == 0) {
		CHECK(!pre, "mutex_lock succeeded after weft_cancel");
		entered(c, mi);
		return;
	}
	EXPECT_FAIL(r, e, "mutex_lock", ECANCELED);
	check_cancel_err(c, "mutex_lock");
}

static void op_trylock(struct ctx *c, int mi)
{
	bool held = c->held & (1u << mi);
	int r = weft_mutex_trylock(G.mx[mi].m);
	int e = errno;
	if (held) {
		EXPECT_FAIL(r, e, "mutex_trylock (held)", EBUSY);
		return;
	}
	if (r == 0)
		entered(c, mi);
	else
		EXPECT_FAIL(r, e, "mutex_trylock", EBUSY);
}

static void op_unlock(struct ctx *c, int mi)
{
	bool held = c->held & (1u << mi);
	if (held)
		leaving(c, mi);
	int r = weft_mutex_unlock(G.mx[mi].m);
	int e = errno;
	if (held)
		CHECK(r == 0, "mutex_unlock of a held mutex: errno %d", e);
	else
		EXPECT_FAIL(r, e, "mutex_unlock (not held)", EPERM);
}

static void unlock_all(struct ctx *c)
{
	for (int mi = NMUTEX - 1; mi >= 0; mi--)
		if (c->held & (1u << mi))
			op_unlock(c, mi);
}

/* ------------------------------------------------------------ condition variables */

static void op_cond_signal(int ci, bool all)
{
	struct condrec *cr = &G.cv[ci];
	atomic_fetch_add(&cr->sig_started, 1);
	int r = all ? weft_cond_broadcast(cr->c) : weft_cond_signal(cr->c);
	CHECK(r == 0, "cond_%s: errno %d", all ? "broadcast" : "signal", errno);
	atomic_fetch_add(&cr->sig_done, 1);
}

static void op_cond_wait(struct ctx *c, int ci, int mi, unsigned d)
{
	struct condrec *cr = &G.cv[ci];
	bool held = c->held & (1u << mi);
	if (held && !may_block_on(c, mi)) {	/* the relock could deadlock */
		op_cond_signal(ci, false);
		return;
	}
	int64_t dl = deadline_of(c, d, true);
	bool pre = self_cancel_done(c);
	long done_before = atomic_load(&cr->sig_done);
	if (held)
		leaving(c, mi);
	wait_begin(c, W_COND, mi, dl);
	int r = weft_cond_wait(cr->c, G.mx[mi].m, dl);
	int e = errno;
	wait_end(c);
	if (!held) {
		EXPECT_FAIL(r, e, "cond_wait (mutex not held)", EPERM);
		return;
	}
	entered(c, mi);	/* held again on every return */
	if (r == 0) {
		CHECK(!pre, "cond_wait succeeded after weft_cancel");
		CHECK(atomic_load(&cr->sig_started) > done_before,
		      "cond_wait returned 0 with no signal or broadcast since it began");
		return;
	}
	EXPECT_FAIL(r, e, "cond_wait", ETIMEDOUT, ECANCELED);
	if (e == ETIMEDOUT)
		check_timeout(dl, "cond_wait");
	else
		check_cancel_err(c, "cond_wait");
	CHECK(!pre || e == ECANCELED, "cond_wait after weft_cancel: errno %d", e);
}

/* ------------------------------------------------------------ wait groups */

static const int wg_deltas[8] = { 1, 2, -1, -2, 0, 3, INT_MIN, INT_MAX };

static void op_wg_add(int wi, int delta, bool done)
{
	struct wgrec *w = &G.wg[wi];
	spin_lock(&w->lk);
	long n = w->model + delta;
	int r = done ? weft_wg_done(w->wg) : weft_wg_add(w->wg, delta);
	int e = errno;
	if (n < 0) {
		spin_unlock(&w->lk);
		EXPECT_FAIL(r, e, "wg_add below zero", EINVAL);
		return;
	}
	w->model = n;
	if (n == 0)
		w->zero_epoch++;
	spin_unlock(&w->lk);
	CHECK(r == 0, "wg_add(%d) to %ld: errno %d", delta, n, e);
}

static void op_wg_wait(struct ctx *c, int wi, unsigned d)
{
	struct wgrec *w = &G.wg[wi];
	int64_t dl = deadline_of(c, d, c->role == R_ACTOR);
	bool pre = self_cancel_done(c);
	spin_lock(&w->lk);
	long count0 = w->model, epoch0 = w->zero_epoch;
	spin_unlock(&w->lk);
	wait_begin(c, W_WG, wi, dl);
	int r = weft_wg_wait(w->wg, dl);
	int e = errno;
	wait_end(c);
	spin_lock(&w->lk);
	long count1 = w->model, epoch1 = w->zero_epoch;
	spin_unlock(&w->lk);
	if (r == 0) {
		CHECK(!pre, "wg_wait succeeded after weft_cancel");
		CHECK(count0 == 0 || epoch1 != epoch0,
		      "wg_wait returned 0 but the count stayed above 0 (%ld)", count1);
		return;
	}
	EXPECT_FAIL(r, e, "wg_wait", ETIMEDOUT, ECANCELED);
	if (e == ECANCELED) {
		check_cancel_err(c, "wg_wait");
		return;
	}
	CHECK(!pre, "wg_wait after weft_cancel: ETIMEDOUT");
	check_timeout(dl, "wg_wait");
	CHECK(!(count0 == 0 && count1 == 0 && epoch0 == epoch1),
	      "wg_wait timed out while the count was 0 throughout");
}

/* ------------------------------------------------------------ channels */

static void chan_err(struct ctx *c, int ci, int r, int e, int64_t dl, bool pre, const char *what)
{
	EXPECT_FAIL(r, e, what, ETIMEDOUT, ECANCELED, EPIPE);
	CHECK(!pre || e == ECANCELED, "%s after weft_cancel: errno %d", what, e);
	if (e == ETIMEDOUT) {
		check_timeout(dl, what);
		CHECK(!pre, "%s after weft_cancel: ETIMEDOUT", what);
	} else if (e == ECANCELED) {
		check_cancel_err(c, what);
	} else {
		CHECK(atomic_load(&G.ch[ci].close_started), "%s: EPIPE on an open channel %d",
		      what, ci);
	}
}

static void op_send(struct ctx *c, int ci, unsigned d)
{
	struct chanrec *cr = &G.ch[ci];
	unsigned char *buf = c->elems[0];
	uint32_t s = seq_new(c, ci, buf);
	if (!s)
		return;
	int64_t dl = deadline_of(c, d, true);
	bool pre = self_cancel_done(c), closed = atomic_load(&cr->close_done);
	wait_begin(c, W_TIMED, ci, dl);
	int r = weft_chan_send(cr->ch, cr->esz || (d & 0x40) ? buf : NULL, dl);
	int e = errno;
	wait_end(c);
	seq_done(ci, s, r == 0);
	if (r == 0) {
		CHECK(!pre, "chan_send succeeded after weft_cancel");
		CHECK(!closed, "chan_send succeeded on a closed channel %d", ci);
		return;
	}
	chan_err(c, ci, r, e, dl, pre, "chan_send");
	if (closed && !pre)	/* or a weft_cancel that raced the call */
		CHECK(e == EPIPE || (e == ECANCELED && self_cancel_req(c)),
		      "chan_send on closed channel %d: errno %d", ci, e);
}

static void op_recv(struct ctx *c, int ci, unsigned d)
{
	struct chanrec *cr = &G.ch[ci];
	unsigned char *buf = c->elems[0];
	memset(buf, 0xee, 64);
	int64_t dl = deadline_of(c, d, true);
	bool pre = self_cancel_done(c);
	wait_begin(c, W_TIMED, ci, dl);
	int r = weft_chan_recv(cr->ch, cr->esz || (d & 0x40) ? buf : NULL, dl);
	int e = errno;
	wait_end(c);
	if (r == 0) {
		CHECK(!pre, "chan_recv succeeded after weft_cancel");
		on_recv(c, ci, buf);
		return;
	}
	chan_err(c, ci, r, e, dl, pre, "chan_recv");
}

static void op_close(struct ctx *c, int ci)
{
	(void)c;
	struct chanrec *cr = &G.ch[ci];
	atomic_store(&cr->close_started, 1);
	int r = weft_chan_close(cr->ch);
	int e = errno;
	if (r == 0)
		atomic_fetch_add(&cr->close_ok, 1);
	else
		EXPECT_FAIL(r, e, "chan_close", EPIPE);
	atomic_store(&cr->close_done, 1);
}

static void op_select(struct ctx *c, unsigned a, unsigned d)
{
	size_t n = 1 + (a & 7);
	uint32_t seqs[MAX_CASES] = { 0 };
	int chi[MAX_CASES];
	c->rng ^= a << 8 | d;
	for (size_t i = 0; i < n; i++) {
		unsigned x = rnd(c);
		int ci = (int)(x % NCHAN);
		int op = x & 8 ? WEFT_CHAN_SEND : WEFT_CHAN_RECV;
		chi[i] = ci;
		memset(c->elems[i], 0xee, 64);
		if (op == WEFT_CHAN_SEND && !(seqs[i] = seq_new(c, ci, c->elems[i])))
			op = WEFT_CHAN_RECV;
		c->cases[i] = (weft_chan_case){ G.ch[ci].ch, op, c->elems[i], 12345, 0 };
		if (G.ch[ci].esz == 0 && (x & 16))
			c->cases[i].elem = NULL;
	}
	int64_t dl = deadline_of(c, d, true);
	bool pre = self_cancel_done(c);
	wait_begin(c, W_TIMED, -1, dl);
	int r = weft_chan_select(c->cases, n, dl);
	int e = errno;
	wait_end(c);
	for (size_t i = 0; i < n; i++)
		if (c->cases[i].op == WEFT_CHAN_SEND && (int)i != r)
			seq_done(chi[i], seqs[i], false);
	if (r < 0) {
		EXPECT_FAIL(r, e, "chan_select", ETIMEDOUT, ECANCELED);
		if (e == ETIMEDOUT) {
			check_timeout(dl, "chan_select");
			CHECK(!pre, "chan_select after weft_cancel: ETIMEDOUT");
		} else {
			check_cancel_err(c, "chan_select");
		}
		return;
	}
	CHECK((size_t)r < n, "chan_select returned case %d of %zu", r, n);
	CHECK(!pre, "chan_select succeeded after weft_cancel");
	weft_chan_case *w = &c->cases[r];
	int ci = chi[r];
	CHECK(w->err == 0 || w->err == EPIPE, "chan_select: case err %d", w->err);
	if (w->err == EPIPE) {
		CHECK(atomic_load(&G.ch[ci].close_started), "chan_select: EPIPE on open channel %d",
		      ci);
		if (w->op == WEFT_CHAN_SEND)
			seq_done(ci, seqs[r], false);
		return;
	}
	if (w->op == WEFT_CHAN_SEND)
		seq_done(ci, seqs[r], true);
	else
		on_recv(c, ci, c->elems[r]);
}

/* ------------------------------------------------------------ I/O */

static const size_t io_lens[8] = { 0, 1, 7, 64, 512, 4096, 9000, 16384 };

/* The errors every I/O call may return, given what the model knows. */
static void io_err(struct ctx *c, int fi, long r, int e, int64_t dl, bool pre,
		   bool closed_before, const char *what)
{
	/* (never EBUSY: any number of calls may wait on one direction) */
	struct fdrec *f = &G.fds[fi], *p = &G.fds[f->peer];
	EXPECT_FAIL(r, e, what, ETIMEDOUT, ECANCELED, EBADF, ENOMEM, EPIPE, ECONNRESET);
	switch (e) {
	case ETIMEDOUT:
		check_timeout(dl, what);
		break;
	case ECANCELED:
		CHECK(self_cancel_req(c) || atomic_load(&f->close_started),
		      "%s: ECANCELED on fd %d: neither cancelled nor closed", what, f->fd);
		break;
	case EBADF:
		CHECK(atomic_load(&f->close_started) || (f->is_pipe && strstr(what, "read") && !f->can_read) ||
			      (f->is_pipe && strstr(what, "write") && !f->can_write),
		      "%s: EBADF on open fd %d", what, f->fd);
		break;
	case EPIPE:
	case ECONNRESET:
		CHECK(atomic_load(&p->close_started) || atomic_load(&f->close_started),
		      "%s: %s on fd %d whose peer is open", what, strerror(e), f->fd);
		break;
	default:
		break;
	}
	if (pre)
		CHECK(e == ECANCELED, "%s after weft_cancel: errno %d", what, e);
	else if (closed_before)	/* or a weft_cancel that raced the call */
		CHECK(e == EBADF || (e == ECANCELED && self_cancel_req(c)),
		      "%s on an fd closed before: errno %d", what, e);
}

/* The reading call a's top bits pick, the same contract for each: some
 * bytes, at most len (recv and recvmsg on sockets only). */
static ssize_t read_call(const struct fdrec *f, unsigned a, void *buf, size_t len, int64_t dl,
			 const char **what)
{
	size_t half = len / 2;
	struct iovec iov[2] = { { buf, half }, { (char *)buf + half, len - half } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
	switch ((a >> 6) % (f->is_pipe ? 2 : 4)) {
	case 1:
		*what = "weft_readv";
		return weft_readv(f->fd, iov, 2, dl);
	case 2:
		*what = "weft_recv";
		return weft_recv(f->fd, buf, len, 0, dl);
	case 3:
		*what = "weft_recvmsg";
		return weft_recvmsg(f->fd, &m, 0, dl);
	default:
		*what = "weft_read";
		return weft_read(f->fd, buf, len, dl);
	}
}

/* The writing call a's top bits pick, each writing every byte (weft_send on
 * sockets only). */
static ssize_t write_call(const struct fdrec *f, unsigned a, const void *buf, size_t len,
			  int64_t dl, const char **what)
{
	size_t half = len / 2;
	struct iovec iov[2] = { { (void *)buf, half }, { (char *)buf + half, len - half } };
	switch ((a >> 6) % (f->is_pipe ? 2 : 3)) {
	case 1:
		*what = "weft_writev";
		return weft_writev(f->fd, iov, 2, dl);
	case 2:
		*what = "weft_send";
		return weft_send(f->fd, buf, len, 0, dl);
	default:
		*what = "weft_write";
		return weft_write(f->fd, buf, len, dl);
	}
}

static void op_read(struct ctx *c, int fi, unsigned a, unsigned d)
{
	struct fdrec *f = &G.fds[fi], *p = &G.fds[f->peer];
	size_t len = io_lens[(a >> 3) & 7];
	int64_t dl = deadline_of(c, d, true);
	bool pre = self_cancel_done(c), closed = atomic_load(&f->close_done);
	wait_begin(c, W_TIMED, fi, dl);
	const char *what;
	ssize_t r = read_call(f, a, c->iobuf, len, dl, &what);
	int e = errno;
	wait_end(c);
	if (r >= 0) {
		CHECK(!pre, "%s succeeded after weft_cancel", what);
		CHECK(!closed, "%s succeeded on an fd closed before", what);
		CHECK((size_t)r <= len, "%s returned %zd > %zu", what, r, len);
		CHECK(f->can_read || len == 0, "%s succeeded on a pipe's write end", what);
		for (ssize_t i = 0; i < r; i++)
			CHECK(c->iobuf[i] == p->pattern,
			      "%s fd %d: byte %zd is %02x, the peer writes %02x", what, f->fd, i,
			      c->iobuf[i], p->pattern);
		if (r == 0 && len > 0)
			CHECK(atomic_load(&p->close_started), "%s: EOF on fd %d, peer open", what,
			      f->fd);
		atomic_fetch_add(&f->rd_total, r);
	} else {
		io_err(c, fi, r, e, dl, pre, closed, what);
	}
}

static void op_write(struct ctx *c, int fi, unsigned a, unsigned d)
{
	struct fdrec *f = &G.fds[fi];
	size_t len = io_lens[(a >> 3) & 7];
	int64_t dl = deadline_of(c, d, true);
	bool pre = self_cancel_done(c), closed = atomic_load(&f->close_done);
	memset(c->iobuf, f->pattern, len);
	wait_begin(c, W_TIMED, fi, dl);
	const char *what;
	ssize_t r = write_call(f, a, c->iobuf, len, dl, &what);
	int e = errno;
	wait_end(c);
	if (r >= 0) {
		CHECK(!pre, "%s succeeded after weft_cancel", what);
		CHECK(!closed, "%s succeeded on an fd closed before", what);
		CHECK((size_t)r == len, "%s returned %zd, not %zu", what, r, len);
		CHECK(f->can_write || len == 0, "%s succeeded on a pipe's read end", what);
		atomic_fetch_add(&f->wr_ok, r);
	} else {
		atomic_fetch_add(&f->wr_unc, (long)len);
		io_err(c, fi, r, e, dl, pre, closed, what);
	}
}

static void op_wait(struct ctx *c, int fi, unsigned a, unsigned d)
{
	struct fdrec *f = &G.fds[fi];
	int events = (int)((a >> 3) & 3);
	if (events == 0 && (a & 0x20))
		events = 4;	/* unknown bit */
	int64_t dl = deadline_of(c, d, true);
	bool pre = self_cancel_done(c), closed = atomic_load(&f->close_done);
	wait_begin(c, W_TIMED, fi, dl);
	int r = weft_wait(f->fd, events, dl);
	int e = errno;
	wait_end(c);
	if (events == 0 || events == 4) {
		EXPECT_FAIL(r, e, "weft_wait (bad events)", EINVAL);
	} else if (r >= 0) {
		CHECK(!pre, "weft_wait succeeded after weft_cancel");
		CHECK(!closed, "weft_wait succeeded on an fd closed before");
		CHECK(r != 0 && (r & ~events) == 0, "weft_wait(%d) returned %d", events, r);
	} else {
		io_err(c, fi, r, e, dl, pre, closed, "weft_wait");
	}
}

static void op_fdclose(struct ctx *c, int fi)
{
	(void)c;
	struct fdrec *f = &G.fds[fi];
	if (atomic_exchange(&f->close_claimed, 1)) {
		if (!atomic_load(&f->close_done))
			return;	/* another close runs: two at once are not ours to try */
		int r = weft_close(f->fd);	/* closed: now "just a number" */
		int e = errno;
		EXPECT_FAIL(r, e, "weft_close (closed before)", EBADF);
		return;
	}
	atomic_store(&f->close_started, 1);
	int r = weft_close(f->fd);
	CHECK(r == 0, "weft_close(%d): errno %d", f->fd, errno);
	atomic_store(&f->close_done, 1);
}

/* ------------------------------------------------------------ coroutines */

static void co_entry(void *arg);

static void spawn_kid(struct ctx *c, int *pc, unsigned a, unsigned b)
{
	int body = 1 + (int)(a & 7);
	int from = *pc + 1;
	if (from + body > c->nprog)
		body = c->nprog - from;
	*pc += body;	/* the body is the child's, not ours */
	if (c->role == R_CHILD || c->role == R_MAIN)
		return;	/* one level of children */
	int slot = -1;
	for (int i = 0; i < MAX_KIDS; i++)
		if (!c->kid[i]) {
			slot = i;
			break;
		}
	if (slot < 0)
		return;
	struct ctx *k = ctx_new(R_CHILD, c);
	if (!k)
		return;
	for (int i = 0; i < body; i++)
		k->prog[i] = c->prog[from + i];
	k->nprog = body;
	k->rng ^= b;
	atomic_fetch_add(&G.outstanding, 1);
	weft_co *h = weft_spawn(co_entry, k);
	int e = errno;
	if (!h) {
		EXPECT_FAIL(-1, e, "weft_spawn", ENOMEM);
		atomic_fetch_sub(&G.outstanding, 1);
		return;
	}
	atomic_store(&k->handle, h);
	c->kid[slot] = k;
	c->kid_h[slot] = h;
	if (b & 0x80) {	/* detach at once */
		CHECK(weft_detach(h) == 0, "weft_detach: errno %d", errno);
		c->kid[slot] = NULL;
		c->kid_h[slot] = NULL;
	}
}

static void joined(struct ctx *c, int slot)
{
	struct ctx *k = c->kid[slot];
	CHECK(atomic_load(&k->returned), "weft_join returned before the child did");
	CHECK(atomic_load(&k->self) == c->kid_h[slot], "weft_self() in the child is not its handle");
	check_destructors(k, "join");
	c->kid[slot] = NULL;
	c->kid_h[slot] = NULL;
}

static void op_join(struct ctx *c, int slot)
{
	if (!c->kid[slot])
		return;
	bool pre = self_cancel_done(c);
	wait_begin(c, W_JOIN, c->kid[slot]->id, -1);
	int r = weft_join(c->kid_h[slot]);
	int e = errno;
	wait_end(c);
	if (r == 0) {
		CHECK(!pre, "weft_join succeeded after weft_cancel");
		joined(c, slot);
		return;
	}
	EXPECT_FAIL(r, e, "weft_join", ECANCELED);
	check_cancel_err(c, "weft_join");	/* the target stays joinable */
}

static void op_detach(struct ctx *c, int slot)
{
	if (!c->kid[slot])
		return;
	CHECK(weft_detach(c->kid_h[slot]) == 0, "weft_detach: errno %d", errno);
	c->kid[slot] = NULL;
	c->kid_h[slot] = NULL;
}

static void cancel_ctx(struct ctx *t, weft_co *h)
{
	atomic_store(&t->cancel_req, 1);
	CHECK(weft_cancel(h) == 0, "weft_cancel: errno %d", errno);
	atomic_store(&t->cancel_done, 1);
}

static void op_cancel(struct ctx *c, unsigned a)
{
	if ((a & 0x30) == 0x30 && c->role == R_ACTOR) {	/* itself (never detached) */
		cancel_ctx(c, weft_self());
		return;
	}
	if ((a & 0x30) == 0x20 && c->role == R_ACTOR) {	/* a sibling: main's, joined last */
		struct ctx *s = G.actor[a % G.nactors];
		weft_co *h = s ? atomic_load(&s->handle) : NULL;
		if (h)
			cancel_ctx(s, h);
		return;
	}
	int slot = (int)(a % MAX_KIDS);
	if (c->kid[slot])
		cancel_ctx(c->kid[slot], c->kid_h[slot]);
}

/* Joins what it can; cancels and detaches what it cannot (it was cancelled).
 * With leave_unjoined, odd slots are neither: weft_shutdown frees those
 * ("including coroutines that finished but were never joined or
 * detached"). */
static void reap_kids(struct ctx *c)
{
	for (int i = 0; i < MAX_KIDS; i++) {
		if (!c->kid[i])
			continue;
		if (G.leave_unjoined && (i & 1)) {
			c->kid[i] = NULL;
			c->kid_h[i] = NULL;
			continue;
		}
		wait_begin(c, W_JOIN, c->kid[i]->id, -1);
		int r = weft_join(c->kid_h[i]);
		int e = errno;
		wait_end(c);
		if (r == 0) {
			joined(c, i);
			continue;
		}
		EXPECT_FAIL(r, e, "weft_join (reap)", ECANCELED);
		check_cancel_err(c, "weft_join (reap)");
		cancel_ctx(c->kid[i], c->kid_h[i]);
		op_detach(c, i);
	}
}

static void op_sleep(struct ctx *c, unsigned d)
{
	int64_t dl = deadline_of(c, d, true);
	bool pre = self_cancel_done(c);
	wait_begin(c, W_TIMED, -1, dl);
	int r = weft_sleep(dl);
	int e = errno;
	wait_end(c);
	if (r == 0) {
		CHECK(!pre, "weft_sleep succeeded after weft_cancel");
		CHECK(dl != -1, "weft_sleep(-1) returned 0");
		int64_t now = weft_now();
		CHECK(now >= dl, "weft_sleep returned %lld ns early", (long long)(dl - now));
		return;
	}
	EXPECT_FAIL(r, e, "weft_sleep", ECANCELED);
	check_cancel_err(c, "weft_sleep");
}

static void op_local(struct ctx *c, unsigned a, unsigned b, bool set)
{
	int k = (int)(a % NKEY);
	if (!set) {
		void *v = weft_local_get(G.key[k]);
		CHECK(v == c->local[k], "local_get(key %d): %p, model %p", k, v, c->local[k]);
		return;
	}
	void *v = NULL;
	if (b & 3)
		v = k == 2 && (b & 4) ? &c->chain[(b & 3)] : &c->tok[k][(b & 3)];
	int r = weft_local_set(G.key[k], v);
	CHECK(r == 0, "local_set: errno %d", errno);
	c->local[k] = v;
	CHECK(weft_local_get(G.key[k]) == v, "local_get right after local_set");
}

static void op_name(struct ctx *c, unsigned a)
{
	static const char *const names[4] = {
		NULL, "", "actor", "a name longer than thirty-one bytes, truncated"
	};
	const char *n = names[a & 3];
	CHECK(weft_set_name(n) == 0, "weft_set_name: errno %d", errno);
	char want[WEFT_NAME_MAX];
	snprintf(want, sizeof want, "%s", n ? n : "");
	const char *got = weft_co_name(weft_self());
	CHECK(strcmp(got, want) == 0, "weft_co_name: \"%s\", set \"%s\"", got, want);
	(void)c;
}

/* weft_lock_thread / weft_unlock_thread by a's bits; while locked, every
 * instruction starts on the worker it locked on (exec_insn). */
static void op_affinity(struct ctx *c, unsigned a)
{
	int r;
	switch (a % 4) {
	case 0:
		CHECK(weft_lock_thread() == 0, "weft_lock_thread: errno %d", errno);
		if (c->locks++ == 0)
			c->home = weft_worker_id();
		break;
	case 1:
		if (!c->locks)
			break;
		CHECK(weft_unlock_thread() == 0, "weft_unlock_thread: errno %d", errno);
		c->locks--;
		break;
	case 2:
		if (c->locks)
			break;
		r = weft_unlock_thread();
		EXPECT_FAIL(r, errno, "weft_unlock_thread while not locked", EINVAL);
		break;
	default:
		break;
	}
}

static void op_query(struct ctx *c, unsigned a)
{
	op_affinity(c, a >> 1);
	weft_co *self = weft_self();
	CHECK(self == atomic_load(&c->self), "weft_self() changed");
	int w = weft_worker_id();
	CHECK(w >= 0 && (unsigned)w < G.workers, "weft_worker_id() %d", w);
	CHECK(weft_worker_count() == G.workers, "weft_worker_count() %u", weft_worker_count());
	CHECK(weft_co_id(self) == c->co_id, "weft_co_id changed");
}

/* Misuse the header gives an error for; the errno is checked. */
static void op_misuse(struct ctx *c, unsigned a, unsigned b)
{
	int r;
	int64_t dl = deadline_of(c, b, false);
	struct chanrec *cr = &G.ch[b % NCHAN];
	switch (a % 20) {
	case 0:
		r = weft_join(NULL);
		EXPECT_FAIL(r, errno, "weft_join(NULL)", EINVAL);
		break;
	case 1:
		r = weft_detach(NULL);
		EXPECT_FAIL(r, errno, "weft_detach(NULL)", EINVAL);
		r = weft_cancel(NULL);
		EXPECT_FAIL(r, errno, "weft_cancel(NULL)", EINVAL);
		break;
	case 2:
		r = weft_join(weft_self());
		EXPECT_FAIL(r, errno, "weft_join(self)", EINVAL);
		break;
	case 3: {
		weft_co *h = weft_spawn(NULL, NULL);
		int e = errno;
		CHECK(h == NULL && e == EINVAL, "weft_spawn(NULL): %p errno %d", (void *)h, e);
		break;
	}
	case 4:
		r = weft_mutex_lock(NULL);
		EXPECT_FAIL(r, errno, "mutex_lock(NULL)", EINVAL);
		r = weft_mutex_trylock(NULL);
		EXPECT_FAIL(r, errno, "mutex_trylock(NULL)", EINVAL);
		r = weft_mutex_unlock(NULL);
		EXPECT_FAIL(r, errno, "mutex_unlock(NULL)", EINVAL);
		break;
	case 5:
		r = weft_cond_wait(NULL, G.mx[0].m, dl);
		EXPECT_FAIL(r, errno, "cond_wait(NULL, m)", EINVAL);
		r = weft_cond_wait(G.cv[0].c, NULL, dl);
		EXPECT_FAIL(r, errno, "cond_wait(c, NULL)", EINVAL);
		r = weft_cond_signal(NULL);
		EXPECT_FAIL(r, errno, "cond_signal(NULL)", EINVAL);
		r = weft_cond_broadcast(NULL);
		EXPECT_FAIL(r, errno, "cond_broadcast(NULL)", EINVAL);
		break;
	case 6:
		r = weft_wg_add(NULL, 1);
		EXPECT_FAIL(r, errno, "wg_add(NULL)", EINVAL);
		r = weft_wg_done(NULL);
		EXPECT_FAIL(r, errno, "wg_done(NULL)", EINVAL);
		r = weft_wg_wait(NULL, dl);
		EXPECT_FAIL(r, errno, "wg_wait(NULL)", EINVAL);
		break;
	case 7:
		r = weft_chan_send(NULL, c->elems[0], dl);
		EXPECT_FAIL(r, errno, "chan_send(NULL)", EINVAL);
		r = weft_chan_recv(NULL, c->elems[0], dl);
		EXPECT_FAIL(r, errno, "chan_recv(NULL)", EINVAL);
		r = weft_chan_close(NULL);
		EXPECT_FAIL(r, errno, "chan_close(NULL)", EINVAL);
		break;
	case 8:
		if (cr->esz) {
			r = weft_chan_send(cr->ch, NULL, dl);
			EXPECT_FAIL(r, errno, "chan_send(elem NULL)", EINVAL);
			r = weft_chan_recv(cr->ch, NULL, dl);
			EXPECT_FAIL(r, errno, "chan_recv(elem NULL)", EINVAL);
		}
		break;
	case 9: {	/* select: bad n, NULL cases, bad op, NULL channel, NULL elem */
		weft_chan_case *k = c->cases;
		for (int i = 0; i <= WEFT_SELECT_MAX; i++)
			k[i] = (weft_chan_case){ G.ch[0].ch, WEFT_CHAN_RECV, c->elems[0], 0, 0 };
		r = weft_chan_select(k, 0, dl);
		EXPECT_FAIL(r, errno, "chan_select(n 0)", EINVAL);
		r = weft_chan_select(k, WEFT_SELECT_MAX + 1, dl);
		EXPECT_FAIL(r, errno, "chan_select(n 65)", EINVAL);
		r = weft_chan_select(NULL, 1, dl);
		EXPECT_FAIL(r, errno, "chan_select(NULL)", EINVAL);
		size_t n = 1 + (b & 3), bad = (b >> 2) % n;
		switch ((b >> 4) % 3) {
		case 0:
			k[bad].op = (b & 0x40) ? 0 : 3;
			break;
		case 1:
			k[bad].ch = NULL;
			break;
		default:
			if (!cr->esz)
				k[bad].op = 7;
			k[bad].ch = cr->ch;
			k[bad].elem = NULL;
			break;
		}
		r = weft_chan_select(k, n, dl);
		EXPECT_FAIL(r, errno, "chan_select(bad case)", EINVAL);
		break;
	}
	case 10:
		r = weft_local_set(NULL, c);
		EXPECT_FAIL(r, errno, "local_set(NULL)", EINVAL);
		CHECK(weft_local_get(NULL) == NULL, "local_get(NULL)");
		break;
	case 11:
		r = weft_shutdown();
		EXPECT_FAIL(r, errno, "weft_shutdown in a coroutine", EDEADLK);
		break;
	case 12:
		r = weft_init(NULL);
		EXPECT_FAIL(r, errno, "weft_init while running", EALREADY);
		break;
	case 13:
		/* io_begin checks cancellation first */
		r = (int)weft_read(-1, c->iobuf, 1, dl);
		EXPECT_FAIL(r, errno, "weft_read(-1)", EBADF, self_cancel_req(c) ? ECANCELED : EBADF);
		r = (int)weft_write(-1, c->iobuf, 1, dl);
		EXPECT_FAIL(r, errno, "weft_write(-1)", EBADF, self_cancel_req(c) ? ECANCELED : EBADF);
		r = weft_wait(-1, WEFT_IN, dl);
		EXPECT_FAIL(r, errno, "weft_wait(-1)", EBADF, self_cancel_req(c) ? ECANCELED : EBADF);
		break;
	case 14:
		CHECK(weft_co_id(NULL) == 0, "weft_co_id(NULL)");
		CHECK(strcmp(weft_co_name(NULL), "") == 0, "weft_co_name(NULL)");
		weft_key_free(NULL);
		weft_chan_free(NULL);
		weft_mutex_free(NULL);
		weft_cond_free(NULL);
		weft_wg_free(NULL);
		break;
	case 15: {
		weft_chan *ch = weft_chan_new(SIZE_MAX / 2 + 1, 2);
		int e = errno;
		CHECK(ch == NULL && e == EINVAL, "chan_new overflow: %p errno %d", (void *)ch, e);
		break;
	}
	case 16:	/* a mutex we do not hold */
		for (int mi = 0; mi < NMUTEX; mi++)
			if (!(c->held & (1u << mi))) {
				r = weft_mutex_unlock(G.mx[mi].m);
				EXPECT_FAIL(r, errno, "mutex_unlock (not held)", EPERM);
				r = weft_cond_wait(G.cv[b % NCOND].c, G.mx[mi].m, dl);
				EXPECT_FAIL(r, errno, "cond_wait (not held)", EPERM);
				break;
			}
		break;
	case 17: {	/* a signal-only channel of a huge capacity */
		weft_chan *ch = weft_chan_new(0, (size_t)1 << 40);
		CHECK(ch != NULL, "chan_new(0, 2^40): errno %d", errno);
		int cancelled = ECANCELED;
		if (weft_chan_send(ch, NULL, 0) == 0) {
			r = weft_chan_recv(ch, NULL, 0);
			if (r != 0)
				EXPECT_FAIL(r, errno, "chan_recv (1 buffered)", cancelled);
		} else {
			EXPECT_FAIL(-1, errno, "chan_send (room, past deadline)", cancelled);
		}
		r = weft_chan_recv(ch, NULL, 0);
		EXPECT_FAIL(r, errno, "chan_recv (empty, past deadline)", ETIMEDOUT, cancelled);
		if (errno == ECANCELED)
			check_cancel_err(c, "chan ops");
		weft_chan_free(ch);
		break;
	}
	default:
		break;
	}
}

/* ------------------------------------------------------------ offload, stats */

struct offcall {
	struct ctx *c;		/* the caller, parked (or the thread) meanwhile */
	unsigned a, b;
	atomic_int ran;
};

static atomic_long offloads_done;	/* offloads by coroutines that returned 0 */

static void offload_nested(void *arg)
{
	atomic_fetch_add((atomic_int *)arg, 1);
}

/* Runs on a helper thread (or inline on the plain thread): a plain thread. */
static void offload_fn(void *arg)
{
	struct offcall *o = arg;
	struct ctx *c = o->c;
	CHECK(atomic_fetch_add(&o->ran, 1) == 0, "offloaded function ran twice");
	CHECK(weft_self() == NULL && weft_worker_id() == -1, "offloaded function on a worker");
	switch (o->a & 3) {
	case 0:
		break;
	case 1: {
		struct timespec ts = { 0, (long)(o->b & 7) * 50 * 1000 };
		nanosleep(&ts, NULL);
		break;
	}
	case 2: {	/* channel traffic from a plain thread, finite deadline */
		int ci = (int)((o->a >> 2) % NCHAN);
		struct chanrec *cr = &G.ch[ci];
		int64_t dl = weft_now() + (int64_t)(o->b & 7) * 100 * US;
		unsigned char *buf = c->elems[MAX_CASES - 1];
		int r, e;
		if (o->b & 8) {
			uint32_t sq = seq_new(c, ci, buf);
			if (!sq)
				break;
			r = weft_chan_send(cr->ch, buf, dl);
			e = errno;
			seq_done(ci, sq, r == 0);
		} else {
			memset(buf, 0xee, 64);
			r = weft_chan_recv(cr->ch, buf, dl);
			e = errno;
			if (r == 0)
				on_recv(c, ci, buf);
		}
		if (r != 0) {
			EXPECT_FAIL(r, e, "chan op in an offloaded function", ETIMEDOUT, EPIPE);
			if (e == EPIPE)
				CHECK(atomic_load(&cr->close_started), "EPIPE on open channel %d", ci);
			else
				check_timeout(dl, "chan op in an offloaded function");
		}
		break;
	}
	default: {	/* what a plain thread gets */
		int r = weft_sleep(weft_now() + US);
		EXPECT_FAIL(r, errno, "weft_sleep in an offloaded function", EPERM);
		thread_mutex_probe(o->c, (int)(o->b % NMUTEX), "mutex in an offloaded function");
		atomic_int n = 0;
		CHECK(weft_offload(offload_nested, &n) == 0 && atomic_load(&n) == 1,
		      "weft_offload from a plain thread does not call fn inline");
		break;
	}
	}
}

static void op_offload(struct ctx *c, unsigned a, unsigned b)
{
	struct offcall o = { c, a, b, 0 };
	if ((a & 0xf0) == 0xf0) {
		int r = weft_offload(NULL, &o);
		EXPECT_FAIL(r, errno, "weft_offload(NULL)", EINVAL);
		return;
	}
	bool pre = self_cancel_done(c);
	int r = weft_offload(offload_fn, &o);
	int e = errno;
	int ran = atomic_load(&o.ran);
	if (!coroutine_role(c)) {
		CHECK(r == 0 && ran == 1, "weft_offload from a thread: %d errno %d ran %d", r, e, ran);
		return;
	}
	if (r == 0) {
		CHECK(!pre, "weft_offload succeeded after weft_cancel");
		CHECK(ran == 1, "weft_offload returned 0 but fn ran %d times", ran);
		atomic_fetch_add(&offloads_done, 1);
		return;
	}
	EXPECT_FAIL(r, e, "weft_offload", ECANCELED, EAGAIN);
	if (e == EAGAIN) {
		CHECK(ran == 0, "weft_offload: EAGAIN but fn ran");
		return;
	}
	check_cancel_err(c, "weft_offload");
	if (pre)
		CHECK(ran == 0, "weft_offload after weft_cancel ran fn");
	else
		CHECK(ran <= 1, "weft_offload: fn ran %d times", ran);
}

static void check_stats(struct ctx *c)
{
	(void)c;
	weft_worker_stats per[3];
	long done = atomic_load(&offloads_done);
	weft_stats st = { .size = sizeof st, .per_worker = per, .per_worker_len = 1 + (c->rng & 1) };
	memset(per, 0xab, sizeof per);
	CHECK(weft_stats_get(&st) == 0, "weft_stats_get: errno %d", errno);
	CHECK(st.version == WEFT_STATS_VERSION && st.workers == G.workers,
	      "weft_stats_get: version %u, %u workers", st.version, st.workers);
	CHECK(st.total.finished <= st.total.spawned && st.live == st.total.spawned - st.total.finished,
	      "weft_stats_get: spawned %llu finished %llu live %llu",
	      (unsigned long long)st.total.spawned, (unsigned long long)st.total.finished,
	      (unsigned long long)st.live);
	CHECK(st.blocking_threads <= st.blocking_threads_max && st.offload_calls >= (uint64_t)done,
	      "weft_stats_get: %u/%u helpers, %llu offloaded (%ld returned)", st.blocking_threads,
	      st.blocking_threads_max, (unsigned long long)st.offload_calls, done);
	unsigned filled = st.per_worker_len < G.workers ? st.per_worker_len : G.workers;
	for (unsigned i = filled; i < 3; i++) {
		unsigned char *p = (unsigned char *)&per[i];
		for (size_t k = 0; k < sizeof per[i]; k++)
			CHECK(p[k] == 0xab, "weft_stats_get wrote per_worker[%u] past per_worker_len", i);
	}
	/* below version 1's size (any later version's size is accepted) */
	weft_stats bad = { .size = offsetof(weft_stats, monitor_wakeups) - 1 };
	int r = weft_stats_get(&bad);
	EXPECT_FAIL(r, errno, "weft_stats_get(size too small)", EINVAL);
	r = weft_stats_get(NULL);
	EXPECT_FAIL(r, errno, "weft_stats_get(NULL)", EINVAL);
}

/* ------------------------------------------------------------ plain thread */

/* What a plain thread may not do: EPERM (and nothing done); and its
 * mutex calls, which work (weft.h). */
static void thread_probe(struct ctx *c, unsigned op, unsigned a, unsigned b)
{
	int r;
	struct fdrec *f = &G.fds[a % NFD];
	int64_t dl = weft_now() + 50 * US;
	(void)c;
	switch ((op + a) % 9) {
	case 0:
		thread_mutex_probe(c, (int)(a % NMUTEX), "mutex from a thread");
		break;
	case 1:	/* a mutex the thread does not hold */
		r = weft_cond_wait(G.cv[a % NCOND].c, G.mx[b % NMUTEX].m, dl);
		EXPECT_FAIL(r, errno, "cond_wait from a thread (mutex not held)", EPERM);
		break;
	case 2:
		r = weft_sleep(dl);
		EXPECT_FAIL(r, errno, "weft_sleep from a thread", EPERM);
		break;
	case 3:
		r = (int)weft_read(f->fd, c->iobuf, 16, dl);
		EXPECT_FAIL(r, errno, "weft_read from a thread", EPERM);
		r = (int)weft_write(f->fd, c->iobuf, 16, dl);
		EXPECT_FAIL(r, errno, "weft_write from a thread", EPERM);
		break;
	case 4:
		r = weft_wait(f->fd, (int)(b % 5), dl);
		EXPECT_FAIL(r, errno, "weft_wait from a thread", EPERM, (b % 5 == 0 || b % 5 == 4) ? EINVAL : EPERM);
		break;
	case 5:
		r = weft_close(f->fd);
		EXPECT_FAIL(r, errno, "weft_close from a thread", EPERM);
		if (!atomic_load(&f->close_started))
			CHECK(fcntl(f->fd, F_GETFD) != -1, "weft_close from a thread closed fd %d",
			      f->fd);
		break;
	case 6:
		r = weft_set_name("thread");
		EXPECT_FAIL(r, errno, "weft_set_name from a thread", EPERM);
		r = weft_local_set(G.key[a % NKEY], c);
		EXPECT_FAIL(r, errno, "local_set from a thread", EPERM);
		CHECK(weft_local_get(G.key[a % NKEY]) == NULL, "local_get from a thread");
		break;
	case 7:
		CHECK(weft_self() == NULL, "weft_self() in a thread");
		CHECK(weft_worker_id() == -1, "weft_worker_id() in a thread");
		CHECK(weft_worker_count() == G.workers, "weft_worker_count() %u", weft_worker_count());
		r = weft_init(NULL);
		EXPECT_FAIL(r, errno, "weft_init while running", EALREADY);
		r = weft_lock_thread();
		EXPECT_FAIL(r, errno, "weft_lock_thread from a thread", EPERM);
		r = weft_cancel(weft_self());
		EXPECT_FAIL(r, errno, "weft_cancel(NULL)", EINVAL);
		break;
	default:
		weft_yield();	/* sched_yield */
		break;
	}
}

/* ------------------------------------------------------------ interpreter */

enum op {
	OP_YIELD, OP_SPAWN, OP_JOIN, OP_DETACH, OP_CANCEL, OP_SLEEP, OP_SEND, OP_RECV,
	OP_CLOSE, OP_SELECT, OP_LOCK, OP_TRYLOCK, OP_UNLOCK, OP_CWAIT, OP_CSIGNAL, OP_CBCAST,
	OP_WGADD, OP_WGDONE, OP_WGWAIT, OP_WRITE, OP_READ, OP_WAIT, OP_FDCLOSE, OP_LSET,
	OP_LGET, OP_MISUSE, OP_NAME, OP_QUERY, OP_SEND2, OP_RECV2, OP_OFFLOAD, OP_IO2,
	OP_COUNT
};
static const char *const op_name_[OP_COUNT] = {
	"yield", "spawn", "join", "detach", "cancel", "sleep", "send", "recv",
	"close", "select", "lock", "trylock", "unlock", "cond_wait", "cond_signal", "cond_broadcast",
	"wg_add", "wg_done", "wg_wait", "write", "read", "wait", "fdclose", "local_set",
	"local_get", "misuse", "name", "query", "send", "recv", "offload", "io",
};

static void exec_insn(struct ctx *c, int *pc)
{
	const uint8_t *in = c->prog[*pc];
	unsigned op = in[0] & 31, a = in[1], b = in[2];
	atomic_store(&c->op, (int)op);
	bool co = coroutine_role(c);
	if (co && c->locks)
		CHECK(weft_worker_id() == c->home, "a locked coroutine runs on worker %d, not %d",
		      weft_worker_id(), c->home);
	switch (op) {
	case OP_YIELD:
		weft_yield();
		break;
	case OP_SPAWN:
		spawn_kid(c, pc, a, b);
		break;
	case OP_JOIN:
		op_join(c, (int)(a % MAX_KIDS));
		break;
	case OP_DETACH:
		op_detach(c, (int)(a % MAX_KIDS));
		break;
	case OP_CANCEL:
		op_cancel(c, a);
		break;
	case OP_SEND:
	case OP_SEND2:
		op_send(c, (int)(a % NCHAN), b);
		break;
	case OP_RECV:
	case OP_RECV2:
		op_recv(c, (int)(a % NCHAN), b);
		break;
	case OP_CLOSE:
		op_close(c, (int)(a % NCHAN));
		break;
	case OP_SELECT:
		op_select(c, a, b);
		break;
	case OP_CSIGNAL:
		op_cond_signal((int)(a % NCOND), false);
		break;
	case OP_CBCAST:
		op_cond_signal((int)(a % NCOND), true);
		break;
	case OP_WGADD:
		op_wg_add((int)(a % NWG), wg_deltas[(a >> 1) & 7], false);
		break;
	case OP_WGDONE:
		op_wg_add((int)(a % NWG), -1, true);
		break;
	case OP_WGWAIT:
		op_wg_wait(c, (int)(a % NWG), b);
		break;
	case OP_OFFLOAD:
		op_offload(c, a, b);
		break;
	case OP_QUERY:
		if (a & 1) {
			check_stats(c);
			break;
		}
		if (!co) {
			thread_probe(c, op, a, b);
			break;
		}
		op_query(c, a);
		break;
	default:
		if (!co) {	/* the rest is for coroutines: EPERM probes */
			thread_probe(c, op, a, b);
			break;
		}
		switch (op) {
		case OP_SLEEP:
			op_sleep(c, b);
			break;
		case OP_LOCK:
			op_lock(c, (int)(a % NMUTEX));
			break;
		case OP_TRYLOCK:
			op_trylock(c, (int)(a % NMUTEX));
			break;
		case OP_UNLOCK:
			op_unlock(c, (int)(a % NMUTEX));
			break;
		case OP_CWAIT:
			op_cond_wait(c, (int)(a % NCOND), (int)((a >> 1) % NMUTEX), b);
			break;
		case OP_WRITE:
			op_write(c, (int)(a % NFD), a, b);
			break;
		case OP_READ:
			op_read(c, (int)(a % NFD), a, b);
			break;
		case OP_WAIT:
			op_wait(c, (int)(a % NFD), a, b);
			break;
		case OP_IO2:
			if (b & 0x80)
				op_write(c, (int)(a % NFD), a, b);
			else
				op_read(c, (int)(a % NFD), a, b);
			break;
		case OP_FDCLOSE:
			if ((a & 0xc0) == 0xc0)	/* rarely: closes break the streams */
				op_fdclose(c, (int)(a % NFD));
			else
				weft_yield();
			break;
		case OP_LSET:
			op_local(c, a, b, true);
			break;
		case OP_LGET:
			op_local(c, a, b, false);
			break;
		case OP_MISUSE:
			op_misuse(c, a, b);
			break;
		case OP_NAME:
			op_name(c, a);
			break;
		default:
			break;
		}
	}
	if (trace)
		fprintf(stderr, "fuzz_api: %6lld us ctx %d %s pc %d %s(%u, %u) -> errno %d\n",
			(long long)(weft_now() - atomic_load(&run_started)) / 1000, c->id,
			role_name[c->role], *pc, op_name_[op], a, b, errno);
	atomic_store(&c->op, -1);
}

static void run_prog(struct ctx *c)
{
	for (int pc = 0; pc < c->nprog; pc++) {
		atomic_store(&c->pc, pc);
		exec_insn(c, &pc);
	}
	atomic_store(&c->pc, c->nprog);
}

static void co_entry(void *arg)
{
	struct ctx *c = arg;
	weft_co *self = weft_self();
	CHECK(self != NULL, "weft_self() NULL in a coroutine");
	atomic_store(&c->self, self);
	c->co_id = weft_co_id(self);
	CHECK(c->co_id != 0, "weft_co_id 0");
	CHECK(strcmp(weft_co_name(self), "") == 0, "a new coroutine has a name");
	for (int k = 0; k < NKEY; k++)
		CHECK(weft_local_get(G.key[k]) == NULL, "a new coroutine has key %d set", k);
	if (c->role == R_ACTOR)
		atomic_fetch_add(&G.actors_started, 1);
	run_prog(c);
	unlock_all(c);
	reap_kids(c);
	expect_destructors(c);
	atomic_store(&c->returned, 1);
	if (c->role == R_CHILD)
		atomic_fetch_sub(&G.outstanding, 1);
	else
		CHECK(weft_wg_done(G.actors_done) == 0, "errno %d", errno);
}

/* ------------------------------------------------------------ main coroutine */

static void drain_channel(struct ctx *m, int ci)
{
	struct chanrec *cr = &G.ch[ci];
	unsigned char *buf = m->elems[0];
	size_t n = 0;
	for (;;) {
		memset(buf, 0xee, 64);
		int64_t dl = n & 1 ? -1 : 0;	/* closed: never blocks either way */
		int r = weft_chan_recv(cr->ch, cr->esz ? buf : NULL, dl);
		int e = errno;
		if (r != 0) {
			EXPECT_FAIL(r, e, "chan_recv (closed, draining)", EPIPE);
			break;
		}
		on_recv(m, ci, buf);
		n++;
		CHECK(n <= cr->cap, "channel %d (capacity %zu): drained %zu items", ci, cr->cap, n);
	}
	int r = weft_chan_send(cr->ch, buf, -1);
	EXPECT_FAIL(r, errno, "chan_send (closed)", EPIPE);
	r = weft_chan_close(cr->ch);
	EXPECT_FAIL(r, errno, "chan_close (closed)", EPIPE);
	m->cases[0] = (weft_chan_case){ cr->ch, WEFT_CHAN_RECV, buf, 12345, 0 };
	m->cases[1] = (weft_chan_case){ cr->ch, WEFT_CHAN_SEND, buf, 12345, 0 };
	r = weft_chan_select(m->cases, 2, -1);
	CHECK(r == 0 || r == 1, "chan_select (closed): %d errno %d", r, errno);
	CHECK(m->cases[r].err == EPIPE, "chan_select (closed): err %d", m->cases[r].err);
}

static void drain_fd(struct ctx *m, int fi)
{
	struct fdrec *f = &G.fds[fi], *p = &G.fds[f->peer];
	if (!f->can_read || atomic_load(&f->close_started))
		return;
	for (;;) {
		ssize_t r = weft_read(f->fd, m->iobuf, IOBUF, 0);
		int e = errno;
		if (r == 0)
			break;
		if (r < 0) {
			EXPECT_FAIL(r, e, "weft_read (draining)", ETIMEDOUT, ECONNRESET);
			CHECK(e == ETIMEDOUT || atomic_load(&p->close_started), "drain: ECONNRESET");
			if (e == ETIMEDOUT)
				break;
			continue;
		}
		for (ssize_t i = 0; i < r; i++)
			CHECK(m->iobuf[i] == p->pattern, "drain fd %d: byte %02x", f->fd, m->iobuf[i]);
		atomic_fetch_add(&f->rd_total, r);
	}
	long rd = atomic_load(&f->rd_total), ok = atomic_load(&p->wr_ok),
	     unc = atomic_load(&p->wr_unc);
	CHECK(rd >= ok && rd <= ok + unc,
	      "fd %d: read %ld bytes; its peer wrote %ld (and up to %ld more in failed writes)",
	      f->fd, rd, ok, unc);
}

/*
 * Liveness, sampled once per input before the end: a wait whose reason to
 * end is there (a wait group at 0, a free mutex, a finished join target, a
 * deadline long past) must end soon.  The teardown's cancels would
 * otherwise hide a lost wake-up.  Cheap: it only waits when some wait looks
 * overdue, which resolves in microseconds unless something is wrong.
 */
static const int64_t OVERDUE_NS = 2000 * 1000 * 1000;

static const char *overdue(struct ctx *c, int64_t now)
{
	int kind = atomic_load(&c->wait_kind);
	int64_t dl = c->wait_deadline;
	if (kind == W_NONE)
		return NULL;
	bool late = dl >= 0 && dl < INT64_MAX - OVERDUE_NS && now > dl;
	if (kind == W_COND)	/* it relocks the mutex, which may be held for long */
		return late && atomic_load(&G.mx[c->wait_obj].inside) == 0
			       ? "cond_wait past its deadline, its mutex free" : NULL;
	if (late)
		return "a wait past its deadline";
	switch (kind) {
	case W_WG: {
		struct wgrec *w = &G.wg[c->wait_obj];
		spin_lock(&w->lk);
		long n = w->model;
		spin_unlock(&w->lk);
		return n == 0 ? "wg_wait with the count at 0" : NULL;
	}
	case W_MUTEX:
		return atomic_load(&G.mx[c->wait_obj].inside) == 0 ? "mutex_lock of a free mutex"
								    : NULL;
	case W_JOIN:
		return atomic_load(&G.ctx[c->wait_obj]->returned) ? "weft_join of a returned child"
								  : NULL;
	default:
		return NULL;
	}
}

static void check_liveness(void)
{
	unsigned seq[MAX_CTX];
	int64_t since[MAX_CTX];
	for (int i = 0; i < MAX_CTX; i++)
		since[i] = 0;
	for (;;) {
		bool any = false;
		int n = atomic_load(&G.nctx);
		int64_t now = weft_now();
		for (int i = 1; i < n && i < MAX_CTX; i++) {
			struct ctx *c = G.ctx[i];	/* NULL while ctx_new fills it */
			if (!c)
				continue;
			unsigned s = atomic_load(&c->wait_seq);
			const char *why = overdue(c, now);
			if (!why || atomic_load(&c->wait_seq) != s) {
				since[i] = 0;
				continue;
			}
			any = true;
			if (!since[i] || seq[i] != s) {
				since[i] = now;
				seq[i] = s;
			} else if (now - since[i] > OVERDUE_NS) {
				FAIL("liveness: ctx %d (%s) stuck for %lld ms in %s", i,
				     role_name[c->role], (long long)((now - since[i]) / MS), why);
			}
		}
		if (!any)
			return;
		weft_sleep(weft_now() + MS);
	}
}

static void main_co(void *arg)
{
	struct ctx *m = arg;
	atomic_store(&m->self, weft_self());
	CHECK(weft_wg_add(G.actors_done, (int)G.nactors) == 0, "errno %d", errno);
	for (unsigned i = 0; i < G.nactors; i++) {
		weft_co *h = weft_spawn(co_entry, G.actor[i]);
		CHECK(h != NULL, "weft_spawn: errno %d", errno);
		atomic_store(&G.actor[i]->handle, h);
	}
	/* Let the program run (the grace counts from when every actor has
	 * started: a loaded machine may take a while), then end it. */
	while (atomic_load(&G.actors_started) < (int)G.nactors)
		CHECK(weft_sleep(weft_now() + 20 * US) == 0, "errno %d", errno);
	int r = weft_wg_wait(G.actors_done, weft_now() + G.grace);
	CHECK(r == 0 || errno == ETIMEDOUT, "errno %d", errno);
	check_liveness();
	if (G.mode & 1)
		for (int i = 0; i < NCHAN; i++)
			op_close(m, i);
	for (unsigned i = 0; i < G.nactors; i++)
		if (!(G.mode & 2) || !atomic_load(&G.actor[i]->returned))
			cancel_ctx(G.actor[i], atomic_load(&G.actor[i]->handle));
	if (!(G.mode & 1))
		for (int i = 0; i < NCHAN; i++)
			op_close(m, i);
	CHECK(weft_wg_wait(G.actors_done, -1) == 0, "errno %d", errno);
	for (unsigned i = 0; i < G.nactors; i++) {
		struct ctx *a = G.actor[i];
		weft_co *h = atomic_load(&a->handle);
		CHECK(weft_join(h) == 0, "weft_join(actor): errno %d", errno);
		CHECK(atomic_load(&a->self) == h, "weft_self() in an actor is not its handle");
		check_destructors(a, "join");
	}
	while (atomic_load(&G.outstanding) > 0)
		CHECK(weft_sleep(weft_now() + 100 * US) == 0, "errno %d", errno);
	/* Quiescent: everything sent is buffered or received. */
	for (int i = 0; i < NCHAN; i++)
		drain_channel(m, i);
	for (int i = 0; i < NFD; i++)
		drain_fd(m, i);
	for (int i = 0; i < NFD; i++)
		if (!atomic_load(&G.fds[i].close_claimed))
			CHECK(weft_close(G.fds[i].fd) == 0, "weft_close: errno %d", errno);
	atomic_store(&m->returned, 1);
}

/* ------------------------------------------------------------ one input */

static void dump_state(void)
{
	fprintf(stderr, "fuzz_api: phase %s, %u workers, %u actors%s, mode %u, %d contexts\n",
		phase_name[atomic_load(&run_phase)], G.workers, G.nactors,
		G.thread ? " + thread" : "", G.mode, atomic_load(&G.nctx));
	int n = atomic_load(&G.nctx);
	for (int i = 0; i < n && i < MAX_CTX; i++) {
		struct ctx *c = G.ctx[i];
		if (!c)
			continue;
		int op = atomic_load(&c->op);
		fprintf(stderr, "  ctx %2d %-6s parent %2d pc %3d/%-3d op %-14s%s%s held %x\n", c->id,
			role_name[c->role], c->parent ? c->parent->id : -1, atomic_load(&c->pc),
			c->nprog, op >= 0 ? op_name_[op] : "-",
			atomic_load(&c->cancel_req) ? " cancelled" : "",
			atomic_load(&c->returned) ? " returned" : "", c->held);
	}
	fprintf(stderr, "  outstanding %d, thread done %d\n", atomic_load(&G.outstanding),
		atomic_load(&G.thread_done));
}

static void *watchdog(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		int64_t t0 = atomic_load(&run_started);
		if (t0 && weft_now() - t0 > watchdog_ms * MS) {
			fprintf(stderr, "\nfuzz_api: WATCHDOG: input running for more than %ld ms\n",
				watchdog_ms);
			dump_state();
			fflush(stderr);
			abort();
		}
	}
	return NULL;
}

static void on_sigpipe(int sig)
{
	(void)sig;
	static const char msg[] = "\nfuzz_api: INVARIANT VIOLATED: SIGPIPE delivered\n";
	ssize_t unused = write(2, msg, sizeof msg - 1);
	(void)unused;
	abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *s = getenv("FUZZ_API_WATCHDOG_MS");
	if (s && atol(s) > 0)
		watchdog_ms = atol(s);
	s = getenv("FUZZ_API_TRACE");
	trace = s && *s == '1';
	signal(SIGPIPE, on_sigpipe);	/* "never raises SIGPIPE" */
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, watchdog, NULL) != 0)
		abort();
	pthread_attr_destroy(&attr);
	return 0;
}

static void make_fds(unsigned variant)
{
	int sv[2];
	for (int p = 0; p < 2; p++) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
			FAIL("socketpair: %s", strerror(errno));
		if (p == 1 || (variant & 1)) {	/* small buffers: writes block */
			int sz = variant & 2 ? 1 : 4096;	/* the kernel's minimum, rounded up */
			for (int i = 0; i < 2; i++) {
				setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
				setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
			}
		}
		for (int i = 0; i < 2; i++)
			G.fds[2 * p + i] = (struct fdrec){ .fd = sv[i], .peer = 2 * p + (i ^ 1),
							   .can_read = true, .can_write = true };
	}
	if (pipe2(sv, O_CLOEXEC) != 0)
		FAIL("pipe2: %s", strerror(errno));
	fcntl(sv[1], F_SETPIPE_SZ, 4096);
	G.fds[4] = (struct fdrec){ .fd = sv[0], .peer = 5, .can_read = true, .is_pipe = true };
	G.fds[5] = (struct fdrec){ .fd = sv[1], .peer = 4, .can_write = true, .is_pipe = true };
	for (int i = 0; i < NFD; i++)
		G.fds[i].pattern = (unsigned char)(0x30 + i);
}

static void check_keys_limit(void)
{
	/* At most 1024 keys at once: ours are live, so 1021 more, then EAGAIN. */
	static weft_key *extra[1024];
	int n = 0;
	for (; n < 1024; n++) {
		extra[n] = weft_key_new(NULL);
		if (!extra[n])
			break;
	}
	int e = errno;
	CHECK(n == 1024 - NKEY && e == EAGAIN, "created %d more keys, then errno %d", n, e);
	for (int i = 0; i < n; i++)
		weft_key_free(extra[i]);
}

static void final_checks(void)
{
	for (unsigned s = 1; s < MAX_SEQ && s < atomic_load(&G.next_seq); s++) {
		struct seqrec *r = &G.seq[s];
		unsigned st = atomic_load(&r->state), n = atomic_load(&r->recvd);
		CHECK(st == S_OK || st == S_FAILED, "item %u: state %u at the end", s, st);
		if (G.ch[r->chan].esz == 0)
			continue;	/* untagged: counted per channel below */
		CHECK(n == (st == S_OK), "item %u on channel %u from ctx %u: send %s, received %u times",
		      s, r->chan, r->sender, st == S_OK ? "succeeded" : "failed", n);
	}
	for (int i = 0; i < NCHAN; i++) {
		struct chanrec *cr = &G.ch[i];
		CHECK(atomic_load(&cr->close_ok) == 1, "channel %d: %d closes returned 0", i,
		      atomic_load(&cr->close_ok));
		if (cr->esz == 0)
			CHECK(atomic_load(&cr->sends0) == atomic_load(&cr->recvs0),
			      "channel %d (signals): %ld sent, %ld received", i,
			      atomic_load(&cr->sends0), atomic_load(&cr->recvs0));
	}
	int n = atomic_load(&G.nctx);
	for (int i = 0; i < n; i++) {
		struct ctx *c = G.ctx[i];
		if (c->role == R_CHILD || c->role == R_ACTOR) {
			CHECK(atomic_load(&c->returned), "ctx %d never returned", i);
			check_destructors(c, "shutdown");
		}
		for (int j = 0; j < i; j++)
			if (c->co_id && G.ctx[j]->co_id)
				CHECK(c->co_id != G.ctx[j]->co_id, "two coroutines with id %llu",
				      (unsigned long long)c->co_id);
	}
}

static void reset(void)
{
	int n = atomic_load(&G.nctx);
	for (int i = 0; i < n && i < MAX_CTX; i++)
		if (G.ctx[i])
			ctx_free(G.ctx[i]);
	for (int i = 0; i < NCHAN; i++)
		weft_chan_free(G.ch[i].ch);
	for (int i = 0; i < NMUTEX; i++)
		weft_mutex_free(G.mx[i].m);
	for (int i = 0; i < NCOND; i++)
		weft_cond_free(G.cv[i].c);
	for (int i = 0; i < NWG; i++)
		weft_wg_free(G.wg[i].wg);
	weft_wg_free(G.actors_done);
	for (int i = 0; i < NKEY; i++)
		weft_key_free(G.key[i]);
	memset(&G, 0, sizeof G);
	atomic_store(&offloads_done, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < HEADER)
		return 0;
	static const size_t caps[4] = { 0, 1, 2, 4 };
	static const size_t eszs[4] = { 8, 0, 16, 40 };
	static const int64_t graces[4] = { 0, 1 * MS, 3 * MS, 10 * MS };
	unsigned h0 = data[0], h1 = data[1], h2 = data[2], h3 = data[3];

	atomic_store(&run_started, weft_now());
	atomic_store(&run_phase, 1);
	G.workers = 1 + (h0 & 1);
	G.nactors = 1 + ((h0 >> 1) & 3);
	G.thread = (h0 >> 3) & 1;
	G.mode = (h0 >> 4) & 3;
	G.grace = graces[h1 >> 6];
	G.leave_unjoined = h3 & 16;
	atomic_store(&G.next_seq, 1);

	/* Before the runtime: what works and what does not. */
	errno = 0;
	CHECK(weft_spawn(co_entry, NULL) == NULL && errno == EPERM, "spawn before init: errno %d",
	      errno);
	CHECK(weft_shutdown() == -1 && errno == ESRCH, "shutdown before init: errno %d", errno);
	CHECK(weft_worker_count() == 0, "worker count before init");
	{
		weft_stats st = { .size = sizeof st };
		CHECK(weft_stats_get(&st) == -1 && errno == ESRCH, "stats before init: errno %d", errno);
	}
	for (int k = 0; k < NKEY; k++) {	/* keys do not need the runtime */
		G.key[k] = weft_key_new(k == 0 ? destructor0 : k == 2 ? destructor2 : NULL);
		CHECK(G.key[k] != NULL, "weft_key_new: errno %d", errno);
	}
	if (h0 & 0x80)
		check_keys_limit();
	if (h0 & 0x40) {
		static const weft_config bad[4] = {
			{ .size = sizeof(weft_config), .workers = 1025 },
			{ .size = sizeof(weft_config), .pin = 2 },
			{ .size = sizeof(weft_config), .pin = -2 },
			{ .size = sizeof(weft_config), .stack_size = 4096 },
		};
		int r = weft_init(&bad[h3 & 3]);
		EXPECT_FAIL(r, errno, "weft_init(bad config)", EINVAL);
	}
	for (int i = 0; i < NCHAN; i++) {
		struct chanrec *cr = &G.ch[i];
		cr->cap = caps[(h1 >> (2 * i)) & 3];
		cr->esz = eszs[(h2 >> (2 * i)) & 3];
		cr->ch = weft_chan_new(cr->esz, cr->cap);
		CHECK(cr->ch != NULL, "weft_chan_new: errno %d", errno);
	}
	for (int i = 0; i < NMUTEX; i++) {
		CHECK((G.mx[i].m = weft_mutex_new()) != NULL);
		atomic_store(&G.mx[i].owner, -1);
	}
	for (int i = 0; i < NCOND; i++)
		CHECK((G.cv[i].c = weft_cond_new()) != NULL);
	for (int i = 0; i < NWG; i++)
		CHECK((G.wg[i].wg = weft_wg_new()) != NULL);
	CHECK((G.actors_done = weft_wg_new()) != NULL);
	make_fds(h2 >> 6);

	/* Deal the instructions. */
	G.mainc = ctx_new(R_MAIN, NULL);
	for (unsigned i = 0; i < G.nactors; i++)
		G.actor[i] = ctx_new(R_ACTOR, G.mainc);
	if (G.thread)
		G.threadc = ctx_new(R_THREAD, NULL);
	size_t ninsn = (size - HEADER) / 3;
	if (ninsn > MAX_INSN)
		ninsn = MAX_INSN;
	for (size_t i = 0; i < ninsn; i++) {
		const uint8_t *in = data + HEADER + 3 * i;
		unsigned who = in[0] >> 5;
		struct ctx *c = who >= 6 && G.thread ? G.threadc : G.actor[who % G.nactors];
		c->prog[c->nprog++] = in;
	}

	weft_config cfg = WEFT_CONFIG(.workers = G.workers, .stack_size = h3 & 4 ? 256 << 10 : 0, .pin = -1);
	if ((h3 & 8) && !G.thread) {	/* the same through weft_main */
		atomic_store(&run_phase, 2);
		CHECK(weft_main(main_co, G.mainc, &cfg) == 0, "weft_main: errno %d", errno);
		CHECK(atomic_load(&G.mainc->returned), "main did not return");
		CHECK(weft_worker_count() == 0, "weft_worker_count() after weft_main");
		goto stopped;
	}
	int r = weft_init(&cfg);
	CHECK(r == 0, "weft_init: errno %d", errno);
	CHECK(weft_worker_count() == G.workers, "weft_worker_count() %u", weft_worker_count());
	atomic_store(&run_phase, 2);
	if (G.thread)	/* counted before main can look */
		atomic_fetch_add(&G.outstanding, 1);
	weft_co *mh = weft_spawn(main_co, G.mainc);
	CHECK(mh != NULL, "weft_spawn(main): errno %d", errno);
	if (G.thread) {	/* this thread is a plain-thread actor */
		struct ctx *t = G.threadc;
		run_prog(t);
		for (int i = 0; i < MAX_KIDS; i++)
			if (t->kid[i]) {
				CHECK(weft_join(t->kid_h[i]) == 0, "weft_join from a thread: errno %d",
				      errno);
				joined(t, i);
			}
		atomic_store(&t->returned, 1);
		atomic_fetch_sub(&G.outstanding, 1);
	}
	atomic_store(&G.thread_done, 1);
	atomic_store(&run_phase, 3);
	CHECK(weft_join(mh) == 0, "weft_join(main) from a thread: errno %d", errno);
	CHECK(atomic_load(&G.mainc->returned), "main did not return");
	atomic_store(&run_phase, 4);
	CHECK(weft_shutdown() == 0, "weft_shutdown: errno %d", errno);
stopped:
	CHECK(weft_shutdown() == -1 && errno == ESRCH, "second shutdown: errno %d", errno);
	atomic_store(&run_phase, 5);
	final_checks();
	reset();
	if (trace)
		fprintf(stderr, "fuzz_api: input done in %lld us\n",
			(long long)(weft_now() - atomic_load(&run_started)) / 1000);
	atomic_store(&run_phase, 0);
	atomic_store(&run_started, 0);
	return 0;
}
