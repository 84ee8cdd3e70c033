/* SPDX-License-Identifier: MIT */
// boost-bench: the Boost.Fiber peer of bench/weft-bench.c.  The same
// benchmarks, sizes and checks, and the same RESULT line, so that
// scripts/bench.py compares it with weft pair by pair.
//
//   boost-bench NAME WORKERS     (NAME: see "list")
//   boost-bench list
//
// Built by scripts/bench.py:
//   g++ -O2 -std=c++17 boost-bench.cpp -lboost_fiber -lboost_context -pthread
//
// The runtime: WORKERS threads, the main one and WORKERS - 1 std::threads,
// each calling use_scheduling_algorithm<algo::work_stealing>(WORKERS), as in
// Boost.Fiber's work_stealing example; the extra threads then block their
// main fiber on a fiber condition variable until the main thread is done, so
// that their schedulers run (and steal) fibers meanwhile.  work_stealing's
// constructor waits for all WORKERS threads, so the runtime is up before the
// benchmark starts.  Its default `suspend = false` is kept: an idle thread
// spins looking for work to steal (with `true` it sleeps until a fiber is
// made ready on its own queue, and never wakes to steal).
//
// Symmetry with weft-bench and go-bench:
//   - the benchmark runs in a fiber (weft's root is a coroutine), launched
//     from the main thread's main fiber, which joins it;
//   - each invocation runs the benchmark once as an in-process warm-up, then
//     once more timed (the work only, std::chrono::steady_clock);
//   - every node is a fiber, no sequential cutoffs; "join" is fiber::join()
//     with a result slot the child writes, as weft_join;
//   - fibers are launched with launch::dispatch (the child runs at once, the
//     parent goes to the ready queue), as in Boost.Fiber's own skynet
//     benchmarks (performance/fiber/skynet_stealing_join.cpp); the default,
//     launch::post, queues the child instead.  Either way work_stealing's
//     ready queues are FIFO (pop and steal both take the oldest fiber), so
//     fork-join trees (skynet, fib) unfold breadth-first: fib(27) on one
//     worker has over 100,000 fibers alive at once (1.6 GB of stack pages),
//     skynet 3.6 GB; weft and Go run them depth-first;
//   - fibers get 64 KiB stacks (fixedsize_stack, malloc'ed), weft's default
//     (Boost's default is 128 KiB).  glibc gives the top of its heap back to
//     the kernel whenever 128 KiB are free there, so stacks freed and
//     allocated one after the other would each be fresh pages (an sbrk and
//     page faults per fiber: 60 us a spawn on a VM, 50 times the rest);
//     weft and Go keep freed stacks for reuse, so main() raises
//     M_TRIM_THRESHOLD (mallopt) to keep them in the heap;
//   - local-get: fiber_specific_ptr<intptr_t>::get(), the pointer itself
//     being the value (as weft_local_get's void *), against a thread_local
//     read in the same run (see weft-bench.c);
//   - channels: boost::fibers::unbuffered_channel for the rendezvous ones
//     (parked's too: its pop parks any number of consumers, and close()
//     wakes them all with channel_op_status::closed),
//     buffered_channel for skynet-chan (its capacity must be a power of two
//     and it holds one less: 16, for 10 children); mutex:
//     boost::fibers::mutex; sleep: this_fiber::sleep_for.
#include <boost/fiber/all.hpp>
#include <boost/fiber/algo/work_stealing.hpp>

#include "../../peak_rss.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fibers = boost::fibers;
using clock_type = std::chrono::steady_clock;

namespace {

// The sizes; bench/weft-bench.c and bench/peers/go/main.go use the same ones.
constexpr int64_t YIELD_N = 2000000;      // yields per fiber; two fibers
constexpr int64_t SPAWN_TOTAL = 1000000;  // fibers spawned and joined
constexpr int SPAWN_BATCH = 1000;         // live at once
constexpr uint64_t SKYNET_SIZE = 1000000; // leaves, 10 children per node
constexpr uint64_t SKYNET_SUM = 499999500000ull;
constexpr int64_t SKYNET_NODES = 1111111; // 1 + 10 + ... + 10^6
constexpr int FIB_N = 27;
constexpr int64_t FIB_EXPECTED = 196418;
constexpr int64_t FIB_SPAWNS = 317810;    // calls with n >= 2: fib(28) - 1
constexpr int SLEEP_N = 100000;           // fibers, each sleeping once
constexpr auto SLEEP_FOR = std::chrono::milliseconds(1);
constexpr int PARKED_N = 100000;          // fibers parked on one channel at once
constexpr int PINGPONG_N = 1000000;       // round trips of chan-pingpong's pair
constexpr int PINGPONG_PAIRS = 1000;      // pairs of chan-pingpong-1000 ...
constexpr int PINGPONG_ROUNDS = 1000;     // ... and round trips of each
constexpr int MUTEX_FIBERS = 1000;        // fibers of mutex ...
constexpr int MUTEX_ITERS = 1000;         // ... each locking this many times
constexpr std::size_t SKYNET_CHAN_CAP = 16; // holds 15: a slot per child
constexpr int64_t LOCAL_N = 100000000;    // local-get: reads of each kind
constexpr intptr_t LOCAL_VALUE = 3;       // the value read, checked by the sums
constexpr std::size_t STACK_SIZE = 64 * 1024;

struct Outcome {
	int64_t ops = 0;   // operations the run counts (for ns/op)
	int64_t value = 0; // the computed value that was checked
	bool ok = false;   // the check passed
	std::string extra; // more key=value pairs for the RESULT line
	// > 0: the benchmark timed its measured part itself (local-get); 0: the
	// root fiber times the whole run
	int64_t ns = 0;
};

int64_t elapsed_ns(clock_type::time_point t0, clock_type::time_point t1)
{
	return std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
}

[[noreturn]] void die(const char *what)
{
	std::fprintf(stderr, "boost-bench: %s\n", what);
	std::exit(2);
}

// A fiber running fn, on a STACK_SIZE stack.
template <typename Fn> fibers::fiber spawn(Fn &&fn)
{
	return fibers::fiber(fibers::launch::dispatch, std::allocator_arg,
			     fibers::fixedsize_stack(STACK_SIZE), std::forward<Fn>(fn));
}

// Channel operations without a deadline: anything but success (a closed
// channel) is a bug of the benchmark.
template <typename Chan, typename T> void push_or_die(Chan &ch, T v)
{
	if (ch.push(v) != fibers::channel_op_status::success)
		die("channel push failed");
}

template <typename Chan, typename T> T pop_or_die(Chan &ch)
{
	T v;
	if (ch.pop(v) != fibers::channel_op_status::success)
		die("channel pop failed");
	return v;
}

// The process's peak resident set in KiB (VmHWM, as weft-bench and
// go-bench; bench/peak_rss.h says why not ru_maxrss): rss_kb= of skynet and
// sleep.
long max_rss_kb()
{
	return peak_rss_kb();
}

// ------------------------------------------------------------------ yield

// Two fibers each call this_fiber::yield() YIELD_N times; ops = 2 * YIELD_N.
// "repeats" counts the iterations where the other fiber did not run in
// between (informational, as for Go).
Outcome bench_yield()
{
	std::atomic<int> last{-1};
	std::atomic<int64_t> repeats{0}, done{0};
	std::array<fibers::fiber, 2> f;
	for (int k = 0; k < 2; k++)
		f[k] = spawn([&, k] {
			int64_t rep = 0, i;
			for (i = 0; i < YIELD_N; i++) {
				if (last.load(std::memory_order_relaxed) == k)
					rep++;
				last.store(k, std::memory_order_relaxed);
				boost::this_fiber::yield();
			}
			repeats += rep;
			done += i;
		});
	for (auto &x : f)
		x.join();
	Outcome o;
	o.ops = 2 * YIELD_N;
	o.value = done;
	o.ok = o.value == o.ops;
	o.extra = "repeats=" + std::to_string(repeats.load());
	return o;
}

// ------------------------------------------------------------------ spawn

// SPAWN_TOTAL fibers in batches of SPAWN_BATCH: launch the batch, then join
// it; each child writes its index into its slot, the parent sums the slots.
Outcome bench_spawn()
{
	static int64_t slots[SPAWN_BATCH];
	std::vector<fibers::fiber> batch(SPAWN_BATCH);
	int64_t sum = 0;
	for (int64_t base = 0; base < SPAWN_TOTAL; base += SPAWN_BATCH) {
		for (int j = 0; j < SPAWN_BATCH; j++) {
			slots[j] = -1;
			batch[j] = spawn([j, v = base + j] { slots[j] = v; });
		}
		for (int j = 0; j < SPAWN_BATCH; j++) {
			batch[j].join();
			sum += slots[j];
		}
	}
	Outcome o;
	o.ops = SPAWN_TOTAL;
	o.value = sum;
	o.ok = sum == SPAWN_TOTAL * (SPAWN_TOTAL - 1) / 2;
	return o;
}

// ----------------------------------------------------------------- skynet

// Every node is a fiber; a node of size > 1 launches 10 children, each
// writing its sum into its slot, and joins them in order.  rss_kb: the peak
// resident set, what the most fibers alive at once cost.
uint64_t skynet(uint64_t num, uint64_t size)
{
	if (size == 1)
		return num;
	uint64_t sub = size / 10, res[10], sum = 0;
	std::array<fibers::fiber, 10> kids;
	for (int i = 0; i < 10; i++)
		kids[i] = spawn([&res, i, n = num + i * sub, sub] {
			res[i] = skynet(n, sub);
		});
	for (int i = 0; i < 10; i++) {
		kids[i].join();
		sum += res[i];
	}
	return sum;
}

Outcome bench_skynet()
{
	uint64_t sum = 0;
	spawn([&] { sum = skynet(0, SKYNET_SIZE); }).join(); // the root too
	Outcome o;
	o.ops = SKYNET_NODES;
	o.value = (int64_t)sum;
	o.ok = sum == SKYNET_SUM;
	o.extra = "rss_kb=" + std::to_string(max_rss_kb());
	return o;
}

// -------------------------------------------------------------------- fib

// fib(n) launches fib(n-1) as a fiber, computes fib(n-2) inline, joins.
int64_t fib(int n)
{
	if (n < 2)
		return n;
	int64_t a = 0;
	fibers::fiber f = spawn([&a, n] { a = fib(n - 1); });
	int64_t b = fib(n - 2);
	f.join();
	return a + b;
}

Outcome bench_fib()
{
	Outcome o;
	o.value = fib(FIB_N);
	o.ops = FIB_SPAWNS;
	o.ok = o.value == FIB_EXPECTED;
	return o;
}

// ------------------------------------------------------------------ sleep

// SLEEP_N fibers each sleep_for 1 ms once, all at the same time; value = how
// many woke no earlier than their deadline (all must).  rss_kb: the peak
// resident set.
Outcome bench_sleep()
{
	std::atomic<int64_t> on_time{0};
	std::vector<fibers::fiber> f(SLEEP_N);
	for (auto &x : f)
		x = spawn([&on_time] {
			auto deadline = clock_type::now() + SLEEP_FOR;
			boost::this_fiber::sleep_for(SLEEP_FOR);
			if (clock_type::now() >= deadline)
				on_time.fetch_add(1, std::memory_order_relaxed);
		});
	for (auto &x : f)
		x.join();
	Outcome o;
	o.ops = SLEEP_N;
	o.value = on_time;
	o.ok = o.value == SLEEP_N;
	o.extra = "rss_kb=" + std::to_string(max_rss_kb());
	return o;
}

// ---------------------------------------------------------- chan-pingpong

// A pair: the pinger pushes i on `ping`, its ponger fiber answers i + 1 on
// `pong`, both unbuffered (rendezvous) channels, `rounds` times; it returns
// the round trips that came back right.  The pinger is a fiber of its own,
// owns the channels, launches the ponger and joins it before they go.
int64_t pingpong_pair(int rounds)
{
	fibers::unbuffered_channel<int> ping, pong;
	fibers::fiber ponger = spawn([&] {
		for (int i = 0; i < rounds; i++)
			push_or_die(pong, pop_or_die<decltype(ping), int>(ping) + 1);
	});
	int64_t good = 0;
	for (int i = 0; i < rounds; i++) {
		push_or_die(ping, i);
		good += pop_or_die<decltype(pong), int>(pong) == i + 1;
	}
	ponger.join();
	return good;
}

Outcome pingpong(int pairs, int rounds)
{
	std::vector<int64_t> good(pairs);
	std::vector<fibers::fiber> f(pairs);
	for (int i = 0; i < pairs; i++)
		f[i] = spawn([&good, i, rounds] { good[i] = pingpong_pair(rounds); });
	int64_t sum = 0;
	for (int i = 0; i < pairs; i++) {
		f[i].join();
		sum += good[i];
	}
	Outcome o;
	o.ops = (int64_t)pairs * rounds;
	o.value = sum;
	o.ok = sum == o.ops;
	return o;
}

// ------------------------------------------------------------------ mutex

// MUTEX_FIBERS fibers each lock one boost::fibers::mutex MUTEX_ITERS times to
// increment a plain counter, which must come out exact.
Outcome bench_mutex()
{
	fibers::mutex m;
	int64_t count = 0;
	std::vector<fibers::fiber> f(MUTEX_FIBERS);
	for (auto &x : f)
		x = spawn([&] {
			for (int i = 0; i < MUTEX_ITERS; i++) {
				std::lock_guard<fibers::mutex> lk(m);
				count++;
			}
		});
	for (auto &x : f)
		x.join();
	Outcome o;
	o.ops = (int64_t)MUTEX_FIBERS * MUTEX_ITERS;
	o.value = count;
	o.ok = count == o.ops;
	return o;
}

// ------------------------------------------------------------ skynet-chan

// skynet with channels, as weft's: a leaf pushes its number to its parent;
// an inner node makes one buffered channel for its 10 children (room for
// all, so none waits), pops their 10 sums, joins them (the channel must
// outlive their pushes) and pushes theirs up.
using sky_chan = fibers::buffered_channel<uint64_t>;

void skynet_chan(sky_chan &up, uint64_t num, uint64_t size)
{
	if (size == 1) {
		push_or_die(up, num);
		return;
	}
	sky_chan in(SKYNET_CHAN_CAP);
	uint64_t sub = size / 10, sum = 0;
	std::array<fibers::fiber, 10> kids;
	for (int i = 0; i < 10; i++)
		kids[i] = spawn([&in, n = num + i * sub, sub] {
			skynet_chan(in, n, sub);
		});
	for (int i = 0; i < 10; i++)
		sum += pop_or_die<sky_chan, uint64_t>(in);
	for (auto &k : kids)
		k.join();
	push_or_die(up, sum);
}

Outcome bench_skynet_chan()
{
	sky_chan up(SKYNET_CHAN_CAP);
	fibers::fiber root = spawn([&] { skynet_chan(up, 0, SKYNET_SIZE); });
	uint64_t sum = pop_or_die<sky_chan, uint64_t>(up);
	root.join();
	Outcome o;
	o.ops = SKYNET_NODES;
	o.value = (int64_t)sum;
	o.ok = sum == SKYNET_SUM;
	return o;
}

// -------------------------------------------------------------- local-get

// LOCAL_N fiber_specific_ptr::get() in this (the root) fiber, then LOCAL_N
// reads of a thread_local, each loop with a compiler barrier so that the
// read is redone every iteration (as in weft-bench.c).  ns and ops are the
// get loop's; thread_ns_per_op the thread_local loop's time per read.
#define COMPILER_BARRIER() __asm__ volatile("" ::: "memory")

thread_local intptr_t tls_value;

Outcome bench_local_get()
{
	// the value is the pointer itself: nothing to clean up
	fibers::fiber_specific_ptr<intptr_t> key([](intptr_t *) {});
	int64_t sum = 0, tsum = 0;
	const int64_t want = LOCAL_N * LOCAL_VALUE;

	key.reset(reinterpret_cast<intptr_t *>(LOCAL_VALUE));
	tls_value = reinterpret_cast<intptr_t>(key.get());
	auto t0 = clock_type::now();
	for (int64_t i = 0; i < LOCAL_N; i++) {
		sum += reinterpret_cast<intptr_t>(key.get());
		COMPILER_BARRIER();
	}
	auto t1 = clock_type::now();
	for (int64_t i = 0; i < LOCAL_N; i++) {
		tsum += tls_value;
		COMPILER_BARRIER();
	}
	auto t2 = clock_type::now();
	Outcome o;
	o.ns = elapsed_ns(t0, t1);
	o.ops = LOCAL_N;
	o.value = sum;
	o.ok = sum == want && tsum == want;
	char buf[64];
	std::snprintf(buf, sizeof buf, "thread_ns_per_op=%.3f",
		      (double)elapsed_ns(t1, t2) / LOCAL_N);
	o.extra = buf;
	return o;
}

// ----------------------------------------------------------------- parked

// PARKED_N fibers each park in a pop on one unbuffered_channel; once all are
// in (a latch counts them), the resident set is read, the channel closed
// (every pop returns channel_op_status::closed) and all joined.  value =
// the fibers whose pop saw closed; all must.  rss_per_co_b is (RSS now -
// RSS when main started) / PARKED_N, vm_mib the virtual size and maps the
// lines of /proc/self/maps at the same moment, as in weft-bench.
long rss_at_start_kb;

// /proc/self/statm's first two fields, in KiB; -1 each when unreadable.
struct Statm {
	long vm_kb = -1;  // the virtual size
	long rss_kb = -1; // the resident set
};

Statm statm_now()
{
	Statm st;
	long pages, resident, page_kb = sysconf(_SC_PAGESIZE) / 1024;
	if (std::FILE *f = std::fopen("/proc/self/statm", "r")) {
		if (std::fscanf(f, "%ld %ld", &pages, &resident) == 2) {
			st.vm_kb = pages * page_kb;
			st.rss_kb = resident * page_kb;
		}
		std::fclose(f);
	}
	return st;
}

// The lines of /proc/self/maps (-1 when unreadable).
long maps_now()
{
	std::FILE *f = std::fopen("/proc/self/maps", "r");
	if (f == nullptr)
		return -1;
	char buf[4096];
	long lines = 0;
	std::size_t n;
	while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
		lines += std::count(buf, buf + n, '\n');
	std::fclose(f);
	return lines;
}

// The wait group that counts the fibers in: Boost.Fiber has no latch (its
// barrier makes every party wait), so a count under a fiber mutex.
class Latch {
public:
	explicit Latch(int n) : count_(n) {}
	void count_down()
	{
		std::lock_guard<fibers::mutex> lk(m_);
		if (--count_ == 0)
			cv_.notify_all();
	}
	void wait()
	{
		std::unique_lock<fibers::mutex> lk(m_);
		cv_.wait(lk, [this] { return count_ == 0; });
	}

private:
	fibers::mutex m_;
	fibers::condition_variable cv_;
	int count_;
};

Outcome bench_parked()
{
	fibers::unbuffered_channel<int> ch;
	Latch in(PARKED_N);
	std::atomic<int64_t> closed{0};
	std::vector<fibers::fiber> f(PARKED_N);
	for (auto &x : f)
		x = spawn([&] {
			in.count_down();
			int v;
			if (ch.pop(v) == fibers::channel_op_status::closed)
				closed.fetch_add(1, std::memory_order_relaxed);
		});
	in.wait();
	// the last ones reach their pop: for SLEEP_FOR, as weft-bench sleeps, but
	// yielding, not sleep_for, which would leave a lone work_stealing
	// scheduler (one worker) with nothing ready, and its pick_next then spins
	// for ever looking for another scheduler to steal from
	for (auto until = clock_type::now() + SLEEP_FOR; clock_type::now() < until;)
		boost::this_fiber::yield();
	Statm st = statm_now();
	long maps = maps_now();
	ch.close();
	for (auto &x : f)
		x.join();
	Outcome o;
	o.ops = PARKED_N;
	o.value = closed;
	o.ok = o.value == PARKED_N;
	char buf[96];
	std::snprintf(buf, sizeof buf, "rss_per_co_b=%ld vm_mib=%ld maps=%ld",
		      (st.rss_kb - rss_at_start_kb) * 1024 / PARKED_N,
		      st.vm_kb / 1024, maps);
	o.extra = buf;
	return o;
}

// ------------------------------------------------------------------- main

const struct {
	const char *name;
	Outcome (*fn)();
} benches[] = {
	{"yield", bench_yield},
	{"spawn", bench_spawn},
	{"skynet", bench_skynet},
	{"fib", bench_fib},
	{"sleep", bench_sleep},
	{"chan-pingpong", [] { return pingpong(1, PINGPONG_N); }},
	{"chan-pingpong-1000", [] { return pingpong(PINGPONG_PAIRS, PINGPONG_ROUNDS); }},
	{"mutex", bench_mutex},
	{"skynet-chan", bench_skynet_chan},
	{"local-get", bench_local_get},
	{"parked", bench_parked},
};

// The extra threads' main fibers wait here until the main thread is done.
fibers::mutex done_mtx;
fibers::condition_variable done_cv;
bool done = false;

void worker_thread(unsigned workers)
{
	fibers::use_scheduling_algorithm<fibers::algo::work_stealing>(workers);
	std::unique_lock<fibers::mutex> lk(done_mtx);
	done_cv.wait(lk, [] { return done; });
}

[[noreturn]] void usage()
{
	std::fprintf(stderr, "usage: boost-bench NAME WORKERS   (boost-bench list)\n");
	std::exit(2);
}

} // namespace

int main(int argc, char **argv)
{
	rss_at_start_kb = statm_now().rss_kb;
	if (argc == 2 && std::strcmp(argv[1], "list") == 0) {
		for (auto &b : benches)
			std::puts(b.name);
		return 0;
	}
	if (argc != 3)
		usage();
	Outcome (*fn)() = nullptr;
	for (auto &b : benches)
		if (std::strcmp(argv[1], b.name) == 0)
			fn = b.fn;
	if (fn == nullptr) {
		std::fprintf(stderr, "boost-bench: unknown benchmark \"%s\"\n", argv[1]);
		usage();
	}
	char *end;
	errno = 0;
	unsigned long w = std::strtoul(argv[2], &end, 10);
	if (errno != 0 || end == argv[2] || *end != '\0' || w < 1 || w > 1024) {
		std::fprintf(stderr, "boost-bench: bad worker count \"%s\" (1..1024)\n",
			     argv[2]);
		return 2;
	}
	unsigned workers = (unsigned)w;
	// keep freed fiber stacks in the heap for reuse (see the top)
	mallopt(M_TRIM_THRESHOLD, 1 << 30);

	std::vector<std::thread> threads;
	for (unsigned i = 1; i < workers; i++)
		threads.emplace_back(worker_thread, workers);
	// returns once all `workers` threads have installed theirs
	fibers::use_scheduling_algorithm<fibers::algo::work_stealing>(workers);

	Outcome warm, timed;
	int64_t ns = 0;
	spawn([&] {
		warm = fn(); // warm-up, as weft-bench
		auto t0 = clock_type::now();
		timed = fn();
		ns = timed.ns > 0 ? timed.ns : elapsed_ns(t0, clock_type::now());
	}).join();

	{
		std::lock_guard<fibers::mutex> lk(done_mtx);
		done = true;
	}
	done_cv.notify_all();
	for (auto &t : threads)
		t.join();

	bool ok = warm.ok && timed.ok;
	std::printf("RESULT name=%s impl=boost workers=%u ns=%" PRId64 " ops=%" PRId64
		    " value=%" PRId64 " check=%s%s%s\n",
		    argv[1], workers, ns, timed.ops, timed.value, ok ? "ok" : "fail",
		    timed.extra.empty() ? "" : " ", timed.extra.c_str());
	std::fflush(stdout);
	return ok ? 0 : 1;
}
