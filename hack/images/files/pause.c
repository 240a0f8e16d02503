/*
 * The pod sandbox's process: it holds the pod's namespaces open and does
 * nothing else. It sleeps until SIGINT or SIGTERM ends it, and reaps any
 * orphan re-parented to it (it is PID 1 when the pod shares its PID namespace).
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signo) {
    (void)signo;
    _exit(0);
}

static void reap(int signo) {
    (void)signo;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction on_stop = {.sa_handler = stop};
    struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
    if (sigaction(SIGINT, &on_stop, NULL) != 0 || sigaction(SIGTERM, &on_stop, NULL) != 0 ||
        sigaction(SIGCHLD, &on_child, NULL) != 0) {
        return 1;
    }
    for (;;) {
        pause();
    }
}
