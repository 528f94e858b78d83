/* TUTTI_DUMP_ON_SIGNAL: on SIGUSR1 (or SIGUSR2) each rank logs what it waits
 * for. The handler only counts; the executor, which wakes on the signal,
 * notices the count change in its idle checks and writes the lines. */
#include <signal.h>
#include <string.h>
#include <strings.h>

#include "exec/exec.h"
#include "util/log.h"

static volatile sig_atomic_t requests;
static struct sigaction previous;
static int signo;

static void on_signal(int sig, siginfo_t* info, void* ctx) {
  requests++;
  /* Chain to whoever had the signal before. */
  if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction != NULL) {
    previous.sa_sigaction(sig, info, ctx);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN &&
             previous.sa_handler != NULL) {
    previous.sa_handler(sig);
  }
}

void tutti_dump_install(const char* v) {
  if (__atomic_load_n(&signo, __ATOMIC_ACQUIRE) != 0) {
    return;
  }
  if (v == NULL || *v == '\0' || strcmp(v, "0") == 0) {
    return;
  }
  int sig = strcasecmp(v, "USR2") == 0 || strcasecmp(v, "SIGUSR2") == 0 ? SIGUSR2 : SIGUSR1;
  int expected = 0;
  if (!__atomic_compare_exchange_n(&signo, &expected, sig, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    return; /* another thread installed it */
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, &previous);
  INFO(TUTTI_INIT,
       "TUTTI_DUMP_ON_SIGNAL: %s makes every rank of this process log what it "
       "waits for",
       sig == SIGUSR2 ? "SIGUSR2" : "SIGUSR1");
}

unsigned tutti_dump_requests(void) {
  return (unsigned)requests;
}
