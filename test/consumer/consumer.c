/* SPDX-License-Identifier: MIT */
/* A tiny program built against an installed weft (pkg-config) and against
 * weft as a meson subproject (scripts/check-install). */
#include <stdio.h>

#include <weft.h>

static void produce(void *arg)
{
	for (int i = 1; i <= 100; i++)
		weft_chan_send(arg, &i, -1);
	weft_chan_close(arg);
}

static void consume(void *arg)
{
	int *sum = arg, v;
	weft_chan *ch = weft_chan_new(sizeof v, 4);
	weft_co *p = weft_spawn(produce, ch);
	while (weft_chan_recv(ch, &v, -1) == 0)
		*sum += v;
	weft_join(p);
	weft_chan_free(ch);
}

int main(void)
{
	int sum = 0;
	if (weft_main(consume, &sum, NULL) != 0 || sum != 5050) {
		fprintf(stderr, "consumer: wrong sum %d\n", sum);
		return 1;
	}
	puts("consumer ok");
	return 0;
}
