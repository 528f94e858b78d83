/* The ceiling of the CPU comparison: single-core memcpy bandwidth on
 * buffers far larger than the caches (bytes copied per second; the memory
 * traffic is twice that: read plus write). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char** argv) {
  size_t bytes = (size_t)(argc > 1 ? atof(argv[1]) : 256) * (1 << 20);
  char* a = malloc(bytes);
  char* b = malloc(bytes);
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  double best = 0;
  for (int i = 0; i < 8; i++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memcpy(b, a, bytes);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    double gbs = (double)bytes / s / 1e9;
    best = gbs > best ? gbs : best;
  }
  printf("memcpy %zu MB: %.2f GB/s (%.2f GB/s of memory traffic)\n", bytes >> 20, best, 2 * best);
  free(a);
  free(b);
  return 0;
}
