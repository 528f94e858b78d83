/* The measuring loop each thread runs (nccl-tests' TimeTest/BenchTime). */
#ifndef TUTTI_PERF_BENCH_H
#define TUTTI_PERF_BENCH_H

/* pthread entry; the argument is the thread's struct perf_thread. */
void* perf_bench_thread(void* arg);

#endif
