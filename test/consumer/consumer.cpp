/* SPDX-License-Identifier: MIT */
// A C++17 program built against an installed weft: scripts/check-install
// builds it with g++ and clang++ (-std=c++17 -Wall -Wextra -Werror) and via
// CMake (test/consumer/CMakeLists.txt).  A pipeline on two workers: a
// producer feeds numbers into a channel, eight coroutines square them into
// another, the root sums the squares; a mutex-guarded counter, errno after a
// suspension, and an exception thrown and caught inside a coroutine.
#define WEFT_ERRNO_GUARD
#include <weft.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace {

constexpr int kNumbers = 1000;
constexpr int kSquarers = 8;

// Owns a weft object and frees it with its _free call.
template <typename T, void (*Free)(T *)> class Owned {
public:
	explicit Owned(T *p) : p_(p) {}
	~Owned() { Free(p_); }
	Owned(const Owned &) = delete;
	Owned &operator=(const Owned &) = delete;
	T *get() const { return p_; }
	explicit operator bool() const { return p_ != nullptr; }

private:
	T *p_;
};
using Chan = Owned<weft_chan, weft_chan_free>;
using Mutex = Owned<weft_mutex, weft_mutex_free>;

struct Pipeline {
	weft_chan *numbers;
	weft_chan *squares;
	weft_mutex *lock;
	int squared = 0;		// under lock
	long long sum = 0;
	bool errno_ok = false;
	bool caught = false;
	bool ok = false;
};

void produce(void *arg)
{
	auto *p = static_cast<Pipeline *>(arg);
	for (int i = 1; i <= kNumbers; i++)
		weft_chan_send(p->numbers, &i, -1);
	weft_chan_close(p->numbers);
}

void square(void *arg)
{
	auto *p = static_cast<Pipeline *>(arg);
	int v;
	while (weft_chan_recv(p->numbers, &v, -1) == 0) {
		long long sq = static_cast<long long>(v) * v;
		weft_chan_send(p->squares, &sq, -1);
		weft_mutex_lock(p->lock);
		p->squared++;
		weft_mutex_unlock(p->lock);
	}
}

// Throws and catches within the coroutine, after a suspension (it may have
// moved to the other worker).  Nothing suspends inside the catch block.
void throw_and_catch(void *arg)
{
	auto *p = static_cast<Pipeline *>(arg);
	weft_yield();
	try {
		throw std::runtime_error("inside a coroutine");
	} catch (const std::runtime_error &e) {
		p->caught = std::strcmp(e.what(), "inside a coroutine") == 0;
	}
}

void root(void *arg)
{
	auto *p = static_cast<Pipeline *>(arg);
	Chan numbers(weft_chan_new(sizeof(int), 16));
	Chan squares(weft_chan_new(sizeof(long long), 0));
	Mutex lock(weft_mutex_new());
	if (!numbers || !squares || !lock)
		return;
	p->numbers = numbers.get();
	p->squares = squares.get();
	p->lock = lock.get();

	std::vector<weft_co *> cos;
	cos.push_back(weft_spawn(produce, p));
	for (int i = 0; i < kSquarers; i++)
		cos.push_back(weft_spawn(square, p));
	cos.push_back(weft_spawn(throw_and_catch, p));
	for (int i = 0; i < kNumbers; i++) {
		long long sq;
		if (weft_chan_recv(p->squares, &sq, -1) != 0)
			return;
		p->sum += sq;
	}
	bool spawned = true;
	for (weft_co *co : cos)
		spawned = co != nullptr && weft_join(co) == 0 && spawned;

	// errno as seen after the calls above suspended (WEFT_ERRNO_GUARD)
	int v = 0;
	p->errno_ok = weft_chan_send(p->numbers, &v, -1) == -1 && errno == EPIPE;
	p->ok = spawned && p->squared == kNumbers;
}

} // namespace

int main()
{
	if (std::strcmp(weft_version(), WEFT_VERSION) != 0) {
		std::fprintf(stderr, "consumer++: library %s, header %s\n", weft_version(), WEFT_VERSION);
		return 1;
	}
	Pipeline p{};
	weft_config cfg = WEFT_CONFIG_INIT;
	cfg.workers = 2;
	const long long want = 1LL * kNumbers * (kNumbers + 1) * (2 * kNumbers + 1) / 6;
	if (weft_main(root, &p, &cfg) != 0 || !p.ok || p.sum != want || !p.errno_ok || !p.caught) {
		std::fprintf(stderr, "consumer++: ok %d sum %lld (want %lld) errno %d caught %d\n",
			     p.ok, p.sum, want, p.errno_ok, p.caught);
		return 1;
	}
	std::puts("consumer ok (C++)");
	return 0;
}
