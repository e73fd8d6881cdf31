/* print_stacks.h — every thread's stack of this process on stderr, one line each
 * (scripts/stacks.sh, FASTRMA_STACKS_SCRIPT; nothing without gdb), from a signal handler
 * too (fork, exec and wait only), for C test programs whose watchdog finds them stuck. */
#ifndef FASTRMA_TESTS_PRINT_STACKS_H
#define FASTRMA_TESTS_PRINT_STACKS_H

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static void print_stacks_here(void) {
    char pid[24];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    const pid_t child = fork();
    if (child == 0) {
        dup2(2, 1);
        execl("/bin/bash", "bash", FASTRMA_STACKS_SCRIPT, pid, (char*)NULL);
        _exit(127);
    }
    if (child > 0) waitpid(child, NULL, 0);
}

#endif
