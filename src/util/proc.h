/* Whether another process of this host is still there. */
#ifndef TUTTI_UTIL_PROC_H
#define TUTTI_UTIL_PROC_H

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

#ifdef __cplusplus
}
#endif

#endif
