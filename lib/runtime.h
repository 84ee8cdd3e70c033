/*
 * runtime.h — the runtime's life cycle (runtime.c).
 */
#ifndef WEFT_RUNTIME_H
#define WEFT_RUNTIME_H

#include <stdbool.h>

/* True between weft_init and the end of weft_shutdown's drain. */
bool weft__runtime_accepting(void);

#endif
