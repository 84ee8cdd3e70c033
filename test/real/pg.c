/* SPDX-License-Identifier: MIT */
/*
 * libpq's blocking API (PQexec) in coroutines against a real PostgreSQL
 * server: initdb into the test's throwaway directory and postgres on a free
 * loopback port with its socket there, as the unprivileged user `nobody`
 * when the test runs as root (initdb refuses root).  100 coroutines each
 * connect and run 200 queries `SELECT n + 1`, every result checked, beside
 * the ticker of real.c.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "real.h"

#if defined(WEFT_TEST_ASAN) || defined(WEFT_TEST_TSAN)
enum { CLIENTS = 100, QUERIES = 100 };
#else
enum { CLIENTS = 100, QUERIES = 200 };
#endif

static char *initdb_bin, *postgres_bin;

static int initdb(struct real_env *env, char *data)
{
	char *argv[] = { initdb_bin, "-D", data, "-U", "weft", "--auth=trust",
			 "--no-sync", "--no-locale", "-E", "UTF8", NULL };

	return real_give_dir(env) == 0 ? real_run_cmd(env, argv, true) : -1;
}

static int start(struct real_env *env)
{
	char data[96], port[16];
	char *argv[] = { postgres_bin, "-D", data, "-p", port,
			 "-k", env->dir, "-c", "listen_addresses=127.0.0.1",
			 "-c", "max_connections=200", "-c", "fsync=off",
			 "-c", "shared_buffers=16MB", "-c", "dynamic_shared_memory_type=mmap", NULL };

	snprintf(data, sizeof data, "%s/data", env->dir);
	snprintf(port, sizeof port, "%d", env->port);
	if (initdb(env, data) != 0)
		return -1;
	return real_spawn(env, argv, true);
}

/* `SELECT n + 1` must answer n + 1. */
static int query(PGconn *c, unsigned n)
{
	char sql[64], want[32];
	PGresult *r;
	int ok;

	snprintf(sql, sizeof sql, "SELECT %u + 1", n);
	snprintf(want, sizeof want, "%u", n + 1);
	r = PQexec(c, sql);
	ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) == 1;
	ok = ok && strcmp(PQgetvalue(r, 0, 0), want) == 0;
	if (!ok)
		fprintf(stderr, "pg: %s: %s%s\n", sql, PQresStatus(PQresultStatus(r)),
			PQerrorMessage(c));
	PQclear(r);
	return ok ? 0 : -1;
}

static void conninfo(char *buf, size_t size, const struct real_env *env)
{
	snprintf(buf, size, "hostaddr=127.0.0.1 port=%d user=weft dbname=postgres "
		 "connect_timeout=60 sslmode=disable gssencmode=disable", env->port);
}

/* Accepting connections, and done starting up. */
static bool ready(struct real_env *env)
{
	char info[128];

	conninfo(info, sizeof info, env);
	return PQping(info) == PQPING_OK;
}

static int session(struct real_env *env, unsigned client)
{
	char info[128];
	PGconn *c;
	int rc = 0;

	conninfo(info, sizeof info, env);
	c = PQconnectdb(info);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "pg: connect: %s", PQerrorMessage(c));
		PQfinish(c);
		return -1;
	}
	for (unsigned i = 0; i < QUERIES && rc == 0; i++)
		rc = query(c, client * 1000 + i);
	PQfinish(c);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct real_test t = {
		.name = "pg", .start = start, .ready = ready, .stop_signal = SIGQUIT /* immediate shutdown */,
		.session = session, .clients = CLIENTS, .stack_size = 256 << 10,
	};

	initdb_bin = real_pg_bin("initdb");
	postgres_bin = real_pg_bin("postgres");
	if (!initdb_bin || !postgres_bin)
		real_skip(t.name, "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb "
			  "and postgres: Debian package postgresql)");
	const char *const needs[] = { initdb_bin, postgres_bin, NULL };
	return real_main(&t, needs, argc, argv, NULL);
}
