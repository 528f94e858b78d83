/* How many CUDA devices this host has, asked in a child process (a process
 * that forks ranks must not initialize CUDA first). A skip is honest only
 * where CUDA says there is no device (or no driver for one): any other
 * failure to start CUDA is a failure of the test. */
#ifndef TUTTI_TEST_GPU_PROBE_H
#define TUTTI_TEST_GPU_PROBE_H

/* The number of devices; 0 when there is none (cudaErrorNoDevice,
 * cudaErrorInsufficientDriver); -1, after saying why on stderr, when CUDA
 * fails otherwise. */
int gpu_probe(void);

/* main()'s answer to a probe that found no device (prints "SKIPPED: " and
 * `why`, returns 77) or that failed (prints "0 passed, 1 failed", returns 1);
 * 0 when there are devices and the test goes on. */
int gpu_probe_exit(int ngpu, const char* why);

#endif
