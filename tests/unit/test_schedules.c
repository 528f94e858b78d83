/* Every algorithm x collective x rank count (1..16, 24, 32, 64) x
 * in-place/out-of-place x count, with all ranks simulated in one thread over
 * in-memory queues and run by the real host executor. A deadlock shows up as
 * the executor's no-progress error. Results are compared bit for bit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "cuts.h"
#include "exec/exec.h"
#include "harness.h"
#include "transport/mem.h"
#include "util/check.h"

static int32_t input(int q, size_t j) {
  return (int32_t)((q + 1) * (int)((j % 13) + 1)) - 7;
}

struct rankbuf {
  int32_t* send;
  int32_t* recv;
  int32_t* sendbase;
  int32_t* recvbase;
};

static size_t send_elems(enum tutti_coll c, size_t count, int n) {
  return (c == TUTTI_COLL_REDUCESCATTER || c == TUTTI_COLL_ALLTOALL || c == TUTTI_COLL_SCATTER)
             ? count * (size_t)n
             : count;
}

static size_t recv_elems(enum tutti_coll c, size_t count, int n) {
  return (c == TUTTI_COLL_ALLGATHER || c == TUTTI_COLL_ALLTOALL || c == TUTTI_COLL_GATHER)
             ? count * (size_t)n
             : count;
}

/* The value rank r must hold at recv[i]; sets *check=0 where nothing is defined. */
static int32_t expect(enum tutti_coll c, int n, int r, int root, size_t count, size_t i,
                      int* check) {
  int32_t s = 0;
  *check = 1;
  switch (c) {
    case TUTTI_COLL_ALLREDUCE:
      for (int q = 0; q < n; q++)
        s += input(q, i);
      return s;
    case TUTTI_COLL_REDUCE:
      *check = r == root;
      for (int q = 0; q < n; q++)
        s += input(q, i);
      return s;
    case TUTTI_COLL_BROADCAST:
      return input(root, i);
    case TUTTI_COLL_ALLGATHER:
      return input((int)(i / count), i % count);
    case TUTTI_COLL_REDUCESCATTER:
      for (int q = 0; q < n; q++)
        s += input(q, (size_t)r * count + i);
      return s;
    case TUTTI_COLL_ALLTOALL:
      return input((int)(i / count), (size_t)r * count + i % count);
    case TUTTI_COLL_GATHER:
      *check = r == root;
      return input((int)(i / count), i % count);
    case TUTTI_COLL_SCATTER:
      return input(root, (size_t)r * count + i);
    default:
      *check = 0;
      return 0;
  }
}

static void setup_buffers(struct rankbuf* b, enum tutti_coll c, int n, int r, int root,
                          size_t count, int in_place) {
  size_t ns = send_elems(c, count, n), nr = recv_elems(c, count, n);
  b->sendbase = calloc(ns + 1, sizeof(int32_t));
  b->recvbase = calloc(nr + 1, sizeof(int32_t));
  b->send = b->sendbase;
  b->recv = b->recvbase;
  for (size_t j = 0; j < nr; j++)
    b->recv[j] = -999;
  for (size_t j = 0; j < ns; j++)
    b->send[j] = input(r, j);
  if (!in_place)
    return;
  switch (c) {
    case TUTTI_COLL_ALLGATHER:
      b->send = b->recv + (size_t)r * count;
      break;
    case TUTTI_COLL_REDUCESCATTER:
      b->recv = b->send + (size_t)r * count;
      return;
    case TUTTI_COLL_GATHER:
      if (r != root)
        return;
      b->send = b->recv + (size_t)r * count;
      break;
    case TUTTI_COLL_SCATTER:
      if (r != root)
        return;
      b->recv = b->send + (size_t)r * count;
      return;
    default:
      b->send = b->recv;
      break;
  }
  for (size_t j = 0; j < ns; j++)
    b->send[j] = input(r, j);
}

static const int32_t* host_layout; /* for the hierarchical algorithm; NULL: one host */
static int inter_algo;             /* its exchange among hosts: ring or tree */
static int deterministic;          /* the ordered builders (algo/ordered.c) */
#define QUEUE_BYTES (32 * 1024)    /* the in-memory world's queues */

/* The board of the simulated host: 16 KB slots, so that the largest count
 * tested takes an all-gather several rounds (and is too large for a board
 * allreduce, which is then not built). */
#define BOARD_SLOT (16 * 1024)
static struct tutti_board board_for(int n) {
  struct tutti_board b = {calloc(2 * (size_t)n, TUTTI_BOARD_HEADER + BOARD_SLOT), BOARD_SLOT, n};
  return b;
}

/* Set: run_group makes board steps name the root as a peer, which they never
 * use (the executor must refuse that, not hang); last_run: what the run
 * returned. */
static int misname_board;
static ncclResult_t last_run;

/* One operation of a group: its algorithm, collective, placement and root. */
struct op_spec {
  enum tutti_algo_id algo;
  enum tutti_coll coll;
  int in_place;
  int root;
};

/* Every rank runs the k operations of `spec` as one group over one set of
 * connections and one board (board generations numbered as the API does),
 * each of `count` elements; every result is checked. 1 passed, 0 failed,
 * -1 some algorithm does not implement its collective. */
static int run_group(int n, size_t count, const struct op_spec* spec, int k) {
  struct tutti_mem_world* w = NULL;
  if (tutti_mem_world_create(n, QUEUE_BYTES, &w) != ncclSuccess)
    return 0;
  struct tutti_board board = board_for(n);
  struct tutti_exec_rank* er = calloc((size_t)n, sizeof *er);
  struct tutti_op* ops = calloc((size_t)n * k, sizeof *ops);
  struct tutti_op** opp = calloc((size_t)n * k, sizeof *opp);
  struct rankbuf* b = calloc((size_t)n * k, sizeof *b);
  int ok = 1, built = 1;
  /* The simulated hosts: how many, and the most ranks one holds. */
  int nh = 0, most = 0;
  for (int q = 0; q < n && host_layout != NULL; q++) {
    int h = host_layout[q], seen = 0, local = 0;
    for (int p = 0; p < n; p++) {
      seen |= p < q && host_layout[p] == h;
      local += host_layout[p] == h;
    }
    nh += !seen;
    most = local > most ? local : most;
  }
  for (int r = 0; r < n; r++) {
    er[r] = (struct tutti_exec_rank){.rank = r,
                                     .nranks = n,
                                     .send = tutti_mem_world_send(w, r),
                                     .recv = tutti_mem_world_recv(w, r),
                                     .piece_bytes = tutti_mem_world_piece(w),
                                     .timeout_s = 2,
                                     .stream_min_bytes = 4 << 20,
                                     .board_stream_min_bytes = 1 << 20,
                                     .board = board};
    uint64_t issued = 0;
    for (int g = 0; g < k; g++) {
      const struct op_spec* sp = &spec[g];
      struct rankbuf* rb = &b[r * k + g];
      setup_buffers(rb, sp->coll, n, r, sp->root, count, sp->in_place);
      struct tutti_op* op = &ops[r * k + g];
      op->er = &er[r];
      op->args = (struct tutti_coll_args){
          sp->coll, count,    sizeof(int32_t), n,
          r,        sp->root, sp->in_place,    cuts_chunk_of_queue(QUEUE_BYTES)};
      op->args.deterministic = deterministic;
      if (host_layout != NULL) {
        op->args.host_of = host_layout;
        op->args.nhosts = nh;
        op->args.max_local = most;
        op->args.inter_algo = inter_algo;
      }
      op->args.board_bytes = board.slot_bytes;
      op->redop.type = ncclInt32;
      op->redop.kind = TUTTI_RED_SUM;
      if (tutti_schedule_build(sp->algo, &op->args, &op->sched) != ncclSuccess)
        built = 0;
      for (int j = 0; j < op->sched.nsteps && misname_board && sp->algo == TUTTI_ALGO_BOARD; j++)
        op->sched.steps[j].recv_peer = sp->root; /* a peer the step never uses */
      op->board_gen = issued + 1;
      issued += (uint64_t)op->sched.board_gens;
      op->scratch = op->sched.scratch_bytes ? malloc(op->sched.scratch_bytes) : NULL;
      op->bufs[TUTTI_BUF_SEND] = rb->send;
      op->bufs[TUTTI_BUF_RECV] = rb->recv;
      op->bufs[TUTTI_BUF_SCRATCH] = op->scratch;
      op->seq = (uint64_t)g + 1;
      opp[r * k + g] = op;
    }
  }
  if (!built) {
    ok = -1; /* not implemented by this algorithm */
  } else if ((last_run = tutti_exec_run(opp, n * k)) != ncclSuccess) {
    ok = 0;
    if (!misname_board)
      fprintf(stderr, "  run failed: %s\n", tutti_last_error());
  } else {
    for (int i = 0; i < n * k && ok; i++) {
      const struct op_spec* sp = &spec[i % k];
      const int r = i / k;
      for (size_t e = 0; e < recv_elems(sp->coll, count, n); e++) {
        int check;
        int32_t want = expect(sp->coll, n, r, sp->root, count, e, &check);
        if (check && b[i].recv[e] != want) {
          fprintf(stderr, "  rank %d operation %d elem %zu: got %d want %d\n", r, i % k, e,
                  b[i].recv[e], want);
          ok = 0;
          break;
        }
      }
    }
  }
  for (int i = 0; i < n * k; i++) {
    tutti_schedule_free(&ops[i].sched);
    free(ops[i].scratch);
    free(ops[i].lanes);
    free(b[i].sendbase);
    free(b[i].recvbase);
  }
  free(er);
  free(ops);
  free(opp);
  free(b);
  free(board.base);
  tutti_mem_world_destroy(w);
  return ok;
}

static int run_case(enum tutti_algo_id algo, enum tutti_coll c, int n, size_t count, int in_place,
                    int root) {
  const struct op_spec one = {algo, c, in_place, root};
  return run_group(n, count, &one, 1);
}

/* Board operations grouped with operations over connections: a ring
 * allreduce, a board broadcast of several rounds, a chain broadcast and a
 * board all-gather. Board steps take no turn on any connection, so the ring
 * and chain lanes keep theirs in issue order. */
static int run_mixed_group(int n, size_t count) {
  const int root = n / 2;
  const struct op_spec mix[] = {
      {TUTTI_ALGO_RING, TUTTI_COLL_ALLREDUCE, 0, root},
      {TUTTI_ALGO_BOARD, TUTTI_COLL_BROADCAST, 1, root},
      {TUTTI_ALGO_RING, TUTTI_COLL_BROADCAST, 1, root},
      {TUTTI_ALGO_BOARD, TUTTI_COLL_ALLGATHER, 0, root},
      {TUTTI_ALGO_RING, TUTTI_COLL_ALLREDUCE, 1, root},
  };
  return run_group(n, count, mix, (int)(sizeof mix / sizeof mix[0]));
}

/* Frees what run_board_group and run_p2p allocate: ranks, operations (with
 * their schedules and lane states), the pointer array and the buffers. */
static void free_run(struct tutti_exec_rank* er, struct tutti_op* ops, int nops,
                     struct tutti_op** opp, void* bufs) {
  for (int i = 0; i < nops; i++) {
    tutti_schedule_free(&ops[i].sched);
    free(ops[i].lanes);
  }
  free(er);
  free(ops);
  free(opp);
  free(bufs);
}

/* Several board collectives of one rank in one group, run together:
 * allreduces (one generation each) between all-gathers of several rounds
 * (one generation per round, in place, blocks of `count`; the allreduces
 * have count / 5 elements, within a slot). Each generation
 * waits for the one before it to be read before reusing its slot set;
 * every allreduce result is its sum, every all-gather block its rank's. */
static int run_board_group(int n, size_t count) {
  enum { K = 5 };
  struct tutti_board board = board_for(n);
  struct tutti_exec_rank* er = calloc((size_t)n, sizeof *er);
  struct tutti_op* ops = calloc((size_t)n * K, sizeof *ops);
  struct tutti_op** opp = calloc((size_t)n * K, sizeof *opp);
  const size_t stride = (size_t)n * count; /* elements per operation and rank */
  int32_t* bufs = calloc((size_t)n * K * stride, sizeof(int32_t));
  int ok = 1;
  for (int r = 0; r < n; r++) {
    er[r] = (struct tutti_exec_rank){.rank = r, .nranks = n, .timeout_s = 2, .board = board};
    uint64_t issued = 0;
    for (int g = 0; g < K; g++) {
      struct tutti_op* op = &ops[r * K + g];
      int32_t* buf = bufs + ((size_t)r * K + (size_t)g) * stride;
      const int gather = g % 2 == 1;
      int32_t* in = gather ? buf + (size_t)r * count : buf;
      const size_t c = gather ? count : count / 5;
      for (size_t i = 0; i < c; i++)
        in[i] = input(r + 3 * g, i);
      op->er = &er[r];
      op->args = (struct tutti_coll_args){gather ? TUTTI_COLL_ALLGATHER : TUTTI_COLL_ALLREDUCE, c,
                                          sizeof(int32_t), n, r};
      op->args.in_place = 1;
      op->args.board_bytes = board.slot_bytes;
      op->redop.type = ncclInt32;
      op->redop.kind = TUTTI_RED_SUM;
      op->seq = (uint64_t)g + 1;
      op->bufs[TUTTI_BUF_SEND] = in;
      op->bufs[TUTTI_BUF_RECV] = buf;
      ok = ok && tutti_schedule_build(TUTTI_ALGO_BOARD, &op->args, &op->sched) == ncclSuccess;
      op->board_gen = issued + 1; /* as the API numbers them */
      issued += (uint64_t)op->sched.board_gens;
      opp[r * K + g] = op;
    }
    /* Blocks larger than a slot: the all-gathers took several rounds. */
    ok = ok && (count * sizeof(int32_t) <= BOARD_SLOT || issued > K);
  }
  if (ok && tutti_exec_run(opp, n * K) != ncclSuccess) {
    fprintf(stderr, "  board group run failed: %s\n", tutti_last_error());
    ok = 0;
  }
  for (int i = 0; i < n * K && ok; i++) {
    const int g = i % K;
    const int32_t* buf = bufs + (size_t)i * stride;
    for (size_t e = 0; e < (g % 2 ? stride : count / 5) && ok; e++) {
      int32_t want = 0;
      if (g % 2) {
        want = input((int)(e / count) + 3 * g, e % count);
      } else {
        for (int q = 0; q < n; q++)
          want += input(q + 3 * g, e);
      }
      if (buf[e] != want) {
        fprintf(stderr, "  board group n=%d rank %d operation %d elem %zu: got %d want %d\n", n,
                i / K, g, e, buf[e], want);
        ok = 0;
      }
    }
  }
  for (int r = 0; r < n && ok; r++)
    ok = er[r].board_finished == ops[r * K + K - 1].board_gen;
  free_run(er, ops, n * K, opp, bufs);
  free(board.base);
  return ok;
}

/* A group of point-to-point calls: each rank sends to r+1, r+3 and itself,
 * and receives the matching messages, all as one fused operation set. */
static int run_p2p(int n, size_t count) {
  struct tutti_mem_world* w = NULL;
  if (tutti_mem_world_create(n, QUEUE_BYTES, &w) != ncclSuccess)
    return 0;
  const int k = 3, offs[3] = {1, 3, 0};
  struct tutti_exec_rank* er = calloc((size_t)n, sizeof *er);
  struct tutti_op* ops = calloc((size_t)n * 2 * k, sizeof *ops);
  struct tutti_op** opp = calloc((size_t)n * 2 * k, sizeof *opp);
  int32_t* bufs = calloc((size_t)n * 2 * k * (count + 1), sizeof(int32_t));
  int nops = 0, ok = 1;
  for (int r = 0; r < n; r++) {
    er[r] = (struct tutti_exec_rank){.rank = r,
                                     .nranks = n,
                                     .send = tutti_mem_world_send(w, r),
                                     .recv = tutti_mem_world_recv(w, r),
                                     .piece_bytes = tutti_mem_world_piece(w),
                                     .timeout_s = 2,
                                     .stream_min_bytes = 4 << 20};
    for (int j = 0; j < 2 * k; j++) {
      int is_send = j < k, o = offs[j % k];
      int peer = is_send ? (r + o) % n : ((r - o) % n + n) % n;
      struct tutti_op* op = &ops[nops];
      int32_t* buf = bufs + (size_t)nops * (count + 1);
      for (size_t i = 0; i < count; i++)
        buf[i] = is_send ? input(r * 7 + o, i) : -1;
      op->er = &er[r];
      op->args = (struct tutti_coll_args){
          is_send ? TUTTI_COLL_SEND : TUTTI_COLL_RECV, count, sizeof(int32_t), n, r, peer, 0};
      op->redop.type = ncclInt32;
      tutti_schedule_build(TUTTI_ALGO_DIRECT, &op->args, &op->sched);
      op->bufs[is_send ? TUTTI_BUF_SEND : TUTTI_BUF_RECV] = buf;
      opp[nops++] = op;
    }
  }
  if (tutti_exec_run(opp, nops) != ncclSuccess) {
    fprintf(stderr, "  p2p run failed: %s\n", tutti_last_error());
    ok = 0;
  }
  /* Messages between one pair match in issue order, so the receive posted
   * for offset o gets the send posted for offset o. */
  for (int i = 0; i < nops && ok; i++) {
    struct tutti_op* op = &ops[i];
    if (op->args.coll != TUTTI_COLL_RECV)
      continue;
    int peer = op->args.root, o = offs[(i % (2 * k)) - k];
    const int32_t* buf = op->bufs[TUTTI_BUF_RECV];
    for (size_t e = 0; e < count && ok; e++) {
      if (buf[e] != input(peer * 7 + o, e)) {
        fprintf(stderr, "  p2p n=%d rank %d from %d elem %zu: got %d\n", n, op->args.rank, peer, e,
                buf[e]);
        ok = 0;
      }
    }
  }
  free_run(er, ops, nops, opp, bufs);
  tutti_mem_world_destroy(w);
  return ok;
}

/* The counts of collective `c` at n ranks: a few small ones, then the cut
 * points of the chunk and the board's slot (tests/common/cuts.h): blocks of
 * k*chunk - 1, k*chunk and k*chunk + 1 elements (k = 1, 2 up to 2 ranks, 1
 * beyond), count % n in {0, 1, n - 1} where the vector is split by ranks
 * (and by hosts, `nhosts`). From 9 ranks on the small counts only, but at
 * 16 and 64 the cut points of allreduce (which splits the vector). */
static int counts_for(enum tutti_coll c, int n, int nhosts, size_t* out) {
  static const size_t small[] = {0, 1, 5};
  int len = 0;
  for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
    out[len++] = small[i];
  const int split =
      c == TUTTI_COLL_ALLREDUCE || c == TUTTI_COLL_REDUCE || c == TUTTI_COLL_BROADCAST;
  if (n > 8 && ((n != 16 && n != 64) || c != TUTTI_COLL_ALLREDUCE))
    return len;
  const int kmax = n <= 2 ? 2 : 1;
  const unsigned shape = CUTS_WHOLE | (split ? CUTS_SPLIT : 0);
  const size_t units[2] = {cuts_chunk_of_queue(QUEUE_BYTES), BOARD_SLOT};
  for (int u = 0; u < 2; u++) {
    cuts_counts(out, &len, 4 * CUTS_MAX, units[u], sizeof(int32_t), n, kmax,
                n > 8 ? CUTS_SPLIT : shape, 0);
    if (split && nhosts > 1 && nhosts < n)
      cuts_counts(out, &len, 4 * CUTS_MAX, units[u], sizeof(int32_t), nhosts, kmax, CUTS_SPLIT, 0);
  }
  if (n == 64) {
    /* 64 ranks (seconds a run): only block 0 one past the chunk, alone. */
    const size_t u = cuts_chunk_of_queue(QUEUE_BYTES) / sizeof(int32_t);
    int kept = 3;
    for (int i = 3; i < len; i++) {
      if (out[i] % 64 == 1 && out[i] / 64 % u == 0)
        out[kept++] = out[i];
    }
    len = kept;
  }
  return len;
}

/* Every rank runs in this one thread: scripts/test.sh leaves it out of
 * the ThreadSanitizer build, which has nothing to find here. */
#define SCHED_MAX_RANKS 64

int main(void) {
  const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 32, 64};
  size_t counts[4 * CUTS_MAX];
  for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
    int n = ns[ni];
    if (n > SCHED_MAX_RANKS) {
      printf("unit.schedules: %d ranks and more are left to the builds without ThreadSanitizer\n",
             n);
      break;
    }
    for (int algo = 0; algo < TUTTI_ALGO_COUNT; algo++) {
      if (algo == TUTTI_ALGO_PULL && n > 16) {
        continue; /* a lane per peer each way, as Direct: the sanitizer builds' time goes here */
      }
      /* The ordered builders replace Ring and Tree for reductions: both modes. */
      const int nmodes = algo == TUTTI_ALGO_RING || algo == TUTTI_ALGO_TREE ? 2 : 1;
      for (int c = 0; c < TUTTI_COLL_SEND; c++) {
        const int ncounts = counts_for(c, n, 1, counts);
        for (int ci = 0; ci < ncounts; ci++) {
          size_t count = counts[ci];
          if (n >= 24 && count > 1024 && c != TUTTI_COLL_ALLREDUCE && c != TUTTI_COLL_REDUCE &&
              c != TUTTI_COLL_BROADCAST) {
            count = 301; /* n^2 * count memory: keep the large cases moderate */
          }
          if (n > 8 && count > 1024 && algo != TUTTI_ALGO_RING &&
              (algo != TUTTI_ALGO_TREE || n > 16))
            continue; /* the cut points at 16 and 64 ranks: the ring's (ordered too), the tree's at
                         16 */
          for (int ip = 0; ip < 2; ip++) {
            if (count > 1024 && ip != (ci + c) % 2)
              continue; /* cut points: in place and out of place in turn */
            for (deterministic = 0; deterministic < nmodes; deterministic++) {
              if (deterministic && count < 1024)
                continue; /* ordered: the cut points */
              int root = n / 2;
              int ok = run_case(algo, c, n, count, ip, root);
              if (ok < 0)
                continue;
              CHECK(ok, "%s%s %s n=%d count=%zu %s root=%d", tutti_algo_get(algo)->name,
                    deterministic ? " (deterministic)" : "", tutti_coll_name(c), n, count,
                    ip ? "in-place" : "out-of-place", root);
            }
            deterministic = 0;
          }
        }
      }
    }
    CHECK(run_p2p(n, 1000), "p2p group n=%d", n);
    CHECK(run_mixed_group(n, n <= 8 ? 9000 : 1000) == 1, "mixed board/ring group n=%d", n);
    if (n == 8) {
      /* A lane that finishes before its turn on a connection came is an
       * error at once, not the stall of the lane whose turn it was. */
      misname_board = 1;
      const int r = run_mixed_group(n, 9000);
      misname_board = 0;
      CHECK(r == 0 && last_run == ncclInternalError &&
                strstr(tutti_last_error(), "before its turn") != NULL,
            "board steps naming an unused peer: %d, %s", (int)last_run, tutti_last_error());
    }
    CHECK(run_board_group(n, n <= 8 ? 9000 : 1000), "board group n=%d", n);
    /* Hierarchical allreduce on several host layouts: blocks of 1, 2 and 3
     * ranks per host, ranks dealt round-robin over 3 hosts, and uneven hosts. */
    int32_t layout[64];
    for (int kind = 0; kind < 5; kind++) {
      for (int r = 0; r < n; r++) {
        layout[r] = kind < 3 ? r / (kind + 1) : kind == 3 ? r % 3 : (r * r) % 5 / 2;
      }
      host_layout = layout;
      int nh = 0;
      for (int r = 0; r < n; r++)
        nh = layout[r] + 1 > nh ? layout[r] + 1 : nh;
      const int ncounts = n <= 8 ? counts_for(TUTTI_COLL_ALLREDUCE, n, nh, counts) : 3;
      for (int tree = 0; tree < 2; tree++) {
        inter_algo = tree ? TUTTI_ALGO_TREE : TUTTI_ALGO_RING;
        for (int ci = 0; ci < ncounts; ci++) {
          for (int ip = 0; ip < 2; ip++) {
            /* The cut points once per layout and exchange, placements and
             * the ordered builder in turn. */
            const int cut = counts[ci] > 1024;
            if (cut && ip != (ci + kind + tree) % 2)
              continue;
            deterministic = cut && (ci + kind) % 3 == 0;
            CHECK(run_case(TUTTI_ALGO_HIER, TUTTI_COLL_ALLREDUCE, n, counts[ci], ip, 0) == 1,
                  "Hier%s AllReduce n=%d layout %d (%s among hosts) count=%zu %s",
                  deterministic ? " (deterministic)" : "", n, kind, tree ? "tree" : "ring",
                  counts[ci], ip ? "in-place" : "out-of-place");
            deterministic = 0;
          }
        }
      }
      host_layout = NULL;
      inter_algo = 0;
    }
  }
  return test_summary("schedules");
}
