/* Adversarial repro (issue 44 hooks review), a nit: depth.c's prepare handler
 * (weft_stats_get without a runtime) leaves errno ESRCH after a successful
 * fork, in the parent and the child.  POSIX leaves errno unspecified on
 * success; glibc leaves it alone.  Usage: fork_errno (prints both). */
#include <errno.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void){ errno = 0; pid_t p = fork(); int e = errno; if (p == 0) _exit(e); int st; waitpid(p,&st,0); printf("parent errno after fork: %d, child's: %d\n", e, WEXITSTATUS(st)); return 0; }
