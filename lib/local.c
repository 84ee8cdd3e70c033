/* SPDX-License-Identifier: MIT */
/*
 * local.c — coroutine-local storage.
 *
 * Keys live in a process-wide registry of WEFT_KEYS_MAX slots, independent
 * of weft_init/weft_shutdown.  A key is (slot index, generation); freeing a
 * key bumps its slot's generation, so a value stored under an old key is
 * never seen through a new key that reuses the slot.
 *
 * Each coroutine has a table indexed by slot: get and set are an index and
 * a generation compare, O(1), with no lock and no hash.  The table grows (to
 * cover the highest slot used, doubling) only when a key's slot lies beyond
 * it, so after the first set of a key in a coroutine, set and get never
 * allocate.
 *
 * When the coroutine's function returns, still on its own stack, the
 * destructors of its non-NULL values run in ascending slot order (keys
 * created earlier first); a destructor may use keys, and passes repeat while
 * values remain, at most WEFT_KEY_PASSES times (POSIX's
 * PTHREAD_DESTRUCTOR_ITERATIONS is 4).  Values of freed keys are dropped
 * without their destructor, as pthread_key_delete does.
 *
 * Orderings: a slot's destructor is published before its generation
 * (release), and read after it (acquire); key creation and deletion
 * serialise on a mutex.  Deleting a key while coroutines that hold values
 * for it are finishing is a race the user must avoid for the destructor to
 * run; it never crashes (a destructor pointer, once published, stays valid
 * code).
 */
#include "local.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "atomic.h"
#include "coro.h"
#include "errors.h"
#include "fault.h"

enum { WEFT_KEYS_MAX = 1024, WEFT_KEY_PASSES = 4, TABLE_MIN = 8 };

struct weft_key {
	unsigned slot;
	uint64_t gen;
};

static struct {
	uint64_t gen;			/* atomic: odd while the slot holds a live key */
	void *destructor;		/* atomic: void (*)(void *) */
} registry[WEFT_KEYS_MAX];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

weft_key *weft_key_new(void (*destructor)(void *value))
{
	weft_key *key = weft__fault() ? NULL : malloc(sizeof *key);
	if (!key) {
		weft__err_fail(ENOMEM);
		return NULL;
	}
	pthread_mutex_lock(&registry_lock);
	unsigned slot;
	for (slot = 0; slot < WEFT_KEYS_MAX; slot++)
		if (!(registry[slot].gen & 1))
			break;
	if (slot == WEFT_KEYS_MAX) {
		pthread_mutex_unlock(&registry_lock);
		free(key);
		weft__err_fail(EAGAIN);
		return NULL;
	}
	at_store_ptr(&registry[slot].destructor, (void *)(uintptr_t)destructor);
	at_fence_release();
	uint64_t gen = registry[slot].gen + 1;
	at_store_64(&registry[slot].gen, gen);
	pthread_mutex_unlock(&registry_lock);
	key->slot = slot;
	key->gen = gen;
	return key;
}

void weft_key_free(weft_key *key)
{
	if (!key)
		return;
	pthread_mutex_lock(&registry_lock);
	at_store_64(&registry[key->slot].gen, key->gen + 1);
	pthread_mutex_unlock(&registry_lock);
	free(key);
}

static struct weft__local *entry(struct weft_co *co, const weft_key *key)
{
	if (key->slot >= co->nlocals)
		return NULL;
	return &co->locals[key->slot];
}

void *weft_local_get(weft_key *key)
{
	struct weft_co *co = weft_self();
	if (!co || !key)
		return NULL;
	struct weft__local *e = entry(co, key);
	return e && e->gen == key->gen ? e->value : NULL;
}

static int grow(struct weft_co *co, unsigned slot)
{
	unsigned n = co->nlocals ? co->nlocals : TABLE_MIN;
	while (n <= slot)
		n *= 2;
	struct weft__local *t = weft__fault() ? NULL : realloc(co->locals, n * sizeof *t);
	if (!t)
		return weft__err_fail(ENOMEM);
	for (unsigned i = co->nlocals; i < n; i++)
		t[i] = (struct weft__local){ NULL, 0 };
	co->locals = t;
	co->nlocals = n;
	return 0;
}

int weft_local_set(weft_key *key, void *value)
{
	struct weft_co *co = weft_self();
	if (!co)
		return weft__err_fail(EPERM);
	if (!key)
		return weft__err_fail(EINVAL);
	if (key->slot >= co->nlocals && grow(co, key->slot) != 0)
		return -1;
	co->locals[key->slot] = (struct weft__local){ value, key->gen };
	return 0;
}

/* The destructor of the live key (slot, gen), or NULL if it was freed. */
static void (*live_destructor(unsigned slot, uint64_t gen))(void *)
{
	if (at_load_64(&registry[slot].gen) != gen)
		return NULL;
	at_fence_acquire();
	return (void (*)(void *))(uintptr_t)at_load_ptr(&registry[slot].destructor);
}

void weft__locals_destroy(struct weft_co *co)
{
	for (int pass = 0; pass < WEFT_KEY_PASSES; pass++) {
		bool ran = false;
		for (unsigned i = 0; i < co->nlocals; i++) {
			struct weft__local e = co->locals[i];
			if (!e.value)
				continue;
			co->locals[i].value = NULL;
			void (*destructor)(void *) = live_destructor(i, e.gen);
			if (destructor) {
				destructor(e.value);
				ran = true;
			}
		}
		if (!ran)
			break;
	}
	free(co->locals);
	co->locals = NULL;
	co->nlocals = 0;
}
