/* Whether another process of this host is still there; the library's own
 * threads. */
#ifndef TUTTI_UTIL_PROC_H
#define TUTTI_UTIL_PROC_H

#include <pthread.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Non-zero when process `pid` has exited or is a zombie (a zombie still
 * answers kill(pid, 0); its state in /proc tells). */
int tutti_process_gone(int pid);
/* Non-zero when process `pid` is stopped (SIGSTOP, a debugger). */
int tutti_process_stopped(int pid);
/* Bytes of memory this machine can give a process: RAM plus swap. */
unsigned long long tutti_host_mem_bytes(void);
/* One pass of a spin-wait: tells the core this thread only waits (x86
 * pause, Arm yield), so a sibling hyperthread runs meanwhile. */
static inline void tutti_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}
/* Starts one of the library's threads, named `name` (15 characters at
 * most), with every signal blocked: signals belong to the application's
 * threads. 0 or the error number. */
int tutti_thread_start(pthread_t* t, void* (*fn)(void*), void* arg, const char* name);

#ifdef __cplusplus
}
#endif

#endif
