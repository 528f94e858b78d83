/* Unit test of src/bootstrap/launcher.c: the variable sets of torchrun/tuttirun,
 * Open MPI, MPICH and Slurm (fed through a fake getenv), their precedence,
 * malformed values, Slurm hostlists and tasks-per-node lists. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util/check.h"
#include "bootstrap/launcher.h"

/* A fake environment: "NAME=value" strings, NULL-terminated. */
static const char* fake_get(const char* name, void* ctx) {
  size_t n = strlen(name);
  for (const char** v = ctx; *v != NULL; v++) {
    if (strncmp(*v, name, n) == 0 && (*v)[n] == '=') {
      return *v + n + 1;
    }
  }
  return NULL;
}

static int rd(const char** vars, struct tutti_launcher* e) {
  return tutti_launcher_read_from(fake_get, vars, e);
}

#define EXPECT(e, l, r, w, lr, lw, id)                                                       \
  do {                                                                                       \
    CHECK(strcmp((e).launcher, (l)) == 0, "launcher %s, want %s", (e).launcher, (l));        \
    CHECK((e).rank == (r) && (e).world_size == (w), "rank %d/%d, want %d/%d", (e).rank,      \
          (e).world_size, (r), (w));                                                         \
    CHECK((e).local_rank == (lr) && (e).local_world_size == (lw), "local %d/%d, want %d/%d", \
          (e).local_rank, (e).local_world_size, (lr), (lw));                                 \
    CHECK(strcmp((e).comm_id, (id)) == 0, "comm_id \"%s\", want \"%s\"", (e).comm_id, (id)); \
  } while (0)

static void test_launchers(void) {
  struct tutti_launcher e;
  const char* none[] = {"HOME=/root", "PATH=/bin", NULL};
  CHECK(rd(none, &e) == 0 && e.found == 0 && e.launcher[0] == '\0', "no launcher");

  const char* torch[] = {"RANK=3",
                         "WORLD_SIZE=8",
                         "LOCAL_RANK=1",
                         "LOCAL_WORLD_SIZE=2",
                         "MASTER_ADDR=10.0.0.1",
                         "MASTER_PORT=29500",
                         NULL};
  CHECK(rd(torch, &e) == 1 && e.found == 1, "torchrun found: %s", tutti_last_error());
  EXPECT(e, "torchrun", 3, 8, 1, 2, "10.0.0.1:29501");

  const char* tutti[] = {"TUTTI_LAUNCHER=tuttirun",
                         "RANK=0",
                         "WORLD_SIZE=4",
                         "LOCAL_RANK=0",
                         "LOCAL_WORLD_SIZE=4",
                         "MASTER_ADDR=127.0.0.1",
                         "MASTER_PORT=4000",
                         "NCCL_COMM_ID=127.0.0.1:4001",
                         NULL};
  CHECK(rd(tutti, &e) == 1, "tuttirun found");
  EXPECT(e, "tuttirun", 0, 4, 0, 4, "127.0.0.1:4001");

  const char* v6[] = {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=fd00::1", "MASTER_PORT=600", NULL};
  CHECK(rd(v6, &e) == 1, "IPv6 master");
  EXPECT(e, "torchrun", 1, 2, -1, -1, "[fd00::1]:601");

  const char* ompi[] = {"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=6",
                        "OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=3", NULL};
  CHECK(rd(ompi, &e) == 1, "mpirun found");
  EXPECT(e, "mpirun", 5, 6, 2, 3, "");

  /* mpirun inside a Slurm allocation: the innermost launcher wins. */
  const char* ompi_slurm[] = {"SLURM_PROCID=0",
                              "SLURM_NTASKS=6",
                              "SLURM_STEP_ID=0",
                              "SLURM_JOB_NODELIST=n[1-3]",
                              "OMPI_COMM_WORLD_RANK=4",
                              "OMPI_COMM_WORLD_SIZE=6",
                              "MASTER_ADDR=n1",
                              "MASTER_PORT=7000",
                              NULL};
  CHECK(rd(ompi_slurm, &e) == 1, "mpirun in Slurm");
  EXPECT(e, "mpirun", 4, 6, -1, -1, "n1:7001");

  const char* mpich[] = {"PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2",
                         NULL};
  CHECK(rd(mpich, &e) == 1, "mpiexec found");
  EXPECT(e, "mpiexec", 1, 2, 1, 2, "");

  const char* torch_in_srun[] = {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_STEP_ID=3",
                                 "RANK=7",         "WORLD_SIZE=16",  NULL};
  CHECK(rd(torch_in_srun, &e) == 1, "torchrun in srun");
  EXPECT(e, "torchrun", 7, 16, -1, -1, "");
}

static void test_slurm(void) {
  struct tutti_launcher e;
  char want[64];
  const char* srun[] = {"SLURM_PROCID=7",
                        "SLURM_STEP_NUM_TASKS=8",
                        "SLURM_NTASKS=99",
                        "SLURM_LOCALID=1",
                        "SLURM_NODEID=2",
                        "SLURM_STEP_TASKS_PER_NODE=3(x2),2",
                        "SLURM_NTASKS_PER_NODE=5",
                        "SLURM_STEP_NODELIST=node[03-05,07],gpu1",
                        "SLURM_JOB_NODELIST=other[1-9]",
                        "SLURM_JOB_ID=12345",
                        "SLURM_STEP_ID=0",
                        NULL};
  CHECK(rd(srun, &e) == 1, "srun found: %s", tutti_last_error());
  snprintf(want, sizeof want, "node03:%d", tutti_launcher_slurm_port(12345, 0));
  EXPECT(e, "srun", 7, 8, 1, 2, want);

  const char* job_list[] = {"SLURM_PROCID=0",
                            "SLURM_NTASKS=4",
                            "SLURM_STEPID=1",
                            "SLURM_LOCALID=0",
                            "SLURM_NODEID=3",
                            "SLURM_NTASKS_PER_NODE=4",
                            "SLURM_JOB_NODELIST=gpu-[10-13]",
                            "SLURM_JOB_ID=99",
                            NULL};
  CHECK(rd(job_list, &e) == 1, "srun with job-level variables");
  snprintf(want, sizeof want, "gpu-10:%d", tutti_launcher_slurm_port(99, 1));
  EXPECT(e, "srun", 0, 4, 0, 4, want);

  const char* master[] = {"SLURM_PROCID=1",
                          "SLURM_NTASKS=2",
                          "SLURM_STEP_ID=0",
                          "SLURM_STEP_NODELIST=a[1-2]",
                          "MASTER_ADDR=10.1.1.1",
                          "MASTER_PORT=29500",
                          NULL};
  CHECK(rd(master, &e) == 1, "srun with MASTER_*");
  EXPECT(e, "srun", 1, 2, -1, -1, "10.1.1.1:29501");

  /* A program run directly in a batch script is nobody's rank. */
  const char* batch[] = {"SLURM_PROCID=0", "SLURM_NTASKS=8", "SLURM_JOB_ID=5",
                         "SLURM_JOB_NODELIST=n[1-2]", NULL};
  CHECK(rd(batch, &e) == 0 && e.found == 0, "batch script is not a launch");

  int p1 = tutti_launcher_slurm_port(1000, 0), p2 = tutti_launcher_slurm_port(1001, 0);
  int p3 = tutti_launcher_slurm_port(1000, 1);
  CHECK(p1 != p2 && p1 != p3 && p2 != p3, "ports differ: %d %d %d", p1, p2, p3);
  for (long j = 0; j < 100000; j += 7) {
    int p = tutti_launcher_slurm_port(j, j % 5);
    if (p < 12000 || p >= 32000) {
      CHECK(0, "port %d of job %ld is out of range", p, j);
      break;
    }
  }
}

static void test_malformed(void) {
  struct tutti_launcher e;
  const char* bad_num[] = {"RANK=abc", "WORLD_SIZE=4", NULL};
  CHECK(rd(bad_num, &e) == -1 && e.found == 0, "RANK=abc is an error");
  CHECK(strstr(tutti_last_error(), "RANK=\"abc\"") != NULL, "error names it: %s",
        tutti_last_error());
  const char* range[] = {"RANK=4", "WORLD_SIZE=4", NULL};
  CHECK(rd(range, &e) == -1, "rank out of range");
  CHECK(strstr(tutti_last_error(), "out of range") != NULL, "error says so: %s",
        tutti_last_error());
  const char* local[] = {"RANK=0", "WORLD_SIZE=4", "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2", NULL};
  CHECK(rd(local, &e) == -1, "local rank out of range");
  const char* zero[] = {"RANK=0", "WORLD_SIZE=0", NULL};
  CHECK(rd(zero, &e) == -1, "world size 0");
  const char* list[] = {"SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_STEP_ID=0",
                        "SLURM_STEP_NODELIST=node[1-", NULL};
  CHECK(rd(list, &e) == -1, "broken hostlist");
  const char* tpn[] = {"SLURM_PROCID=0",
                       "SLURM_NTASKS=1",
                       "SLURM_STEP_ID=0",
                       "SLURM_NODEID=1",
                       "SLURM_STEP_TASKS_PER_NODE=1",
                       NULL};
  CHECK(rd(tpn, &e) == -1, "SLURM_NODEID past the tasks-per-node list");
}

static void test_hostlist(void) {
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"node[03-05,07],gpu1", "node03"},
      {"gpu1", "gpu1"},
      {"host-1,host-2", "host-1"},
      {"a[1-2]b[3-4],c", "a1b3"},
      {"rack[1]-n[007-9]", "rack1-n007"},
      {"n[10,2-3]", "n10"},
      {"node[", NULL},
      {"", NULL},
      {"n[]", NULL},
      {",n1", NULL},
      {"n]1", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[64] = "";
    int rc = tutti_launcher_hostlist_first(cases[i].in, out, sizeof out);
    if (cases[i].out == NULL) {
      CHECK(rc == -1, "\"%s\" must be rejected, got \"%s\"", cases[i].in, out);
    } else {
      CHECK(rc == 0 && strcmp(out, cases[i].out) == 0, "\"%s\" -> \"%s\", want \"%s\"", cases[i].in,
            out, cases[i].out);
    }
  }
  char small[7];
  CHECK(tutti_launcher_hostlist_first("node[10-11]", small, 7) == 0, "exact fit");
  CHECK(tutti_launcher_hostlist_first("node[10-11]", small, 6) == -1, "too small");

  CHECK(tutti_launcher_tasks_on_node("4(x2),3", 0) == 4, "tpn 0");
  CHECK(tutti_launcher_tasks_on_node("4(x2),3", 1) == 4, "tpn 1");
  CHECK(tutti_launcher_tasks_on_node("4(x2),3", 2) == 3, "tpn 2");
  CHECK(tutti_launcher_tasks_on_node("4(x2),3", 3) == -1, "tpn past the end");
  CHECK(tutti_launcher_tasks_on_node("2", 0) == 2, "tpn single");
  CHECK(tutti_launcher_tasks_on_node("1,2,3", 2) == 3, "tpn list");
  CHECK(tutti_launcher_tasks_on_node("x", 0) == -1, "tpn junk");
  CHECK(tutti_launcher_tasks_on_node("4(x", 0) == -1, "tpn cut short");
  CHECK(tutti_launcher_tasks_on_node("4;5", 1) == -1, "tpn bad separator");
}

static void test_export(void) {
  struct tutti_launcher e;
  memset(&e, 0, sizeof e);
  e.launcher = "torchrun";
  unsetenv("NCCL_COMM_ID");
  CHECK(tutti_launcher_export_comm_id(&e) == 0 && getenv("NCCL_COMM_ID") == NULL,
        "nothing to export");
  snprintf(e.comm_id, sizeof e.comm_id, "10.0.0.1:29501");
  CHECK(tutti_launcher_export_comm_id(&e) == 1, "exported");
  const char* v = getenv("NCCL_COMM_ID");
  CHECK(v != NULL && strcmp(v, "10.0.0.1:29501") == 0, "NCCL_COMM_ID=%s", v ? v : "(unset)");
  snprintf(e.comm_id, sizeof e.comm_id, "10.9.9.9:1");
  CHECK(tutti_launcher_export_comm_id(&e) == 0, "a set NCCL_COMM_ID is kept");
  v = getenv("NCCL_COMM_ID");
  CHECK(v != NULL && strcmp(v, "10.0.0.1:29501") == 0, "still %s", v ? v : "(unset)");
  unsetenv("NCCL_COMM_ID");

  /* The process reader sees the real environment. */
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  CHECK(tutti_launcher_read(&e) == 1 && e.rank == 1 && e.world_size == 3 &&
            strcmp(e.launcher, "mpirun") == 0,
        "tutti_launcher_read from the process environment");
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
}

int main(void) {
  /* Launcher variables of whatever started this test must not leak in. */
  const char* clear[] = {"RANK", "WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof clear / sizeof clear[0]; i++) {
    unsetenv(clear[i]);
  }
  test_launchers();
  test_slurm();
  test_malformed();
  test_hostlist();
  test_export();
  return test_summary("launcher");
}
