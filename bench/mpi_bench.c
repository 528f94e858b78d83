/* The Open MPI side of the CPU comparison: the same collectives, sizes,
 * timing method and busbw formulas as tutti-perf, on host float buffers,
 * written as tutti-perf JSON so one plot shows both.
 *   mpirun -np N mpi_bench <allreduce|allgather|reducescatter|broadcast> \
 *          [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-i 1] [--json FILE]
 * -i 1: in place (MPI_IN_PLACE; broadcast always is).
 * As tutti-perf and nccl-tests, call i of a size works on the buffers at
 * offset size * (i % (max / size)): every row walks the whole max-sized
 * buffers, so the smaller sizes of a long sweep are not timed on lines the
 * previous call left in the caches while tutti's are timed on cold ones. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static size_t parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1024;
      break;
    case 'M':
    case 'm':
      v *= 1024 * 1024;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return (size_t)v;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char* coll = argc > 1 ? argv[1] : "allreduce";
  size_t minb = 8, maxb = 128 << 20;
  int factor = 2, iters = 20, warm = 5, inplace = 0;
  const char* json = NULL;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b"))
      minb = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-e"))
      maxb = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-f"))
      factor = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-n"))
      iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-w"))
      warm = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-i"))
      inplace = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--json"))
      json = argv[i + 1];
  }
  int ag = !strcmp(coll, "allgather"), rs = !strcmp(coll, "reducescatter");
  int bc = !strcmp(coll, "broadcast");
  double bus = bc ? 1.0 : (ag || rs) ? (double)(n - 1) / n : 2.0 * (n - 1) / n;
  float* s = malloc(maxb + 64);
  float* d = malloc(maxb + 64);
  memset(s, 0, maxb);
  memset(d, 0, maxb);
  int* counts = malloc((size_t)n * sizeof(int));
  FILE* jf = NULL;
  char host[64] = "";
  gethostname(host, sizeof host);
  char ver[MPI_MAX_LIBRARY_VERSION_STRING];
  int vlen;
  MPI_Get_library_version(ver, &vlen);
  ver[strcspn(ver, ",\n")] = '\0';
  time_t now = time(NULL);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  if (rank == 0) {
    printf("# %s, %s%s, %d ranks\n#%12s %12s %10s %10s %10s\n", ver, coll,
           inplace && !bc ? " in place" : "", n, "size", "count", "time(us)", "algbw", "busbw");
    if (json) {
      jf = fopen(json, "w");
      fprintf(jf,
              "{\n  \"format\": \"tutti-perf/1\",\n  \"library\": {\"name\": \"%s\", \"path\": "
              "\"mpi\", \"version\": 0},\n"
              "  \"collective\": \"%s\", \"hostname\": \"%s\", \"date\": \"%s\", \"nranks\": %d,\n "
              " \"records\": [",
              ver, coll, host, date, n);
    }
  }
  int nrec = 0;
  for (size_t bytes = minb; bytes <= maxb; bytes *= (size_t)factor) {
    size_t count = bytes / sizeof(float);
    size_t per = (ag || rs) ? count / (size_t)n : count;
    if (per == 0)
      continue;
    for (int i = 0; i < n; i++)
      counts[i] = (int)per;
    const size_t size = (ag || rs) ? per * (size_t)n * sizeof(float) : bytes;
    const size_t steps = maxb / size;
    double t = 0;
    for (int it = -warm; it < iters; it++) {
      const size_t shift = size * ((size_t)(it < 0 ? it + warm : it) % steps);
      float* sb = (float*)((char*)s + shift);
      float* db = (float*)((char*)d + shift);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      if (ag)
        MPI_Allgather(inplace ? MPI_IN_PLACE : sb, (int)per, MPI_FLOAT, db, (int)per, MPI_FLOAT,
                      MPI_COMM_WORLD);
      else if (rs)
        MPI_Reduce_scatter(inplace ? MPI_IN_PLACE : sb, db, counts, MPI_FLOAT, MPI_SUM,
                           MPI_COMM_WORLD);
      else if (bc)
        MPI_Bcast(sb, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
      else
        MPI_Allreduce(inplace ? MPI_IN_PLACE : sb, db, (int)count, MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      if (it >= 0)
        t += MPI_Wtime() - t0;
    }
    double tmax;
    t /= iters;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    double algbw = (double)size / tmax / 1e9;
    if (rank == 0) {
      printf("%13zu %12zu %10.2f %10.2f %10.2f\n", size, (ag || rs) ? per * (size_t)n : count,
             tmax * 1e6, algbw, algbw * bus);
      fflush(stdout);
      if (jf) {
        fprintf(
            jf,
            "%s\n    {\"library\": \"%s\", \"collective\": \"%s\", \"nranks\": %d, \"bytes\": %zu, "
            "\"count\": %zu, \"type\": \"float\", \"op\": \"sum\", \"root\": 0, "
            "\"out_of_place\": {\"time_us\": %.3f, \"algbw_gbs\": %.4f, \"busbw_gbs\": %.4f, "
            "\"wrong\": null}, "
            "\"in_place\": null, \"date\": \"%s\", \"hostname\": \"%s\"}",
            nrec++ ? "," : "", ver, coll, n, size, (ag || rs) ? per * (size_t)n : count, tmax * 1e6,
            algbw, algbw * bus, date, host);
      }
    }
  }
  if (jf) {
    fprintf(jf, "\n  ],\n  \"status\": \"ok\"\n}\n");
    fclose(jf);
  }
  free(s);
  free(d);
  free(counts);
  MPI_Finalize();
  return 0;
}
