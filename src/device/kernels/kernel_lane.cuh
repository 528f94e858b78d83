/* The body of one block: a lane of steps on one channel (see kernel.cu).
 *
 * The lane runs in rounds: in each, every step moves its round's part (half
 * a queue of its bytes on this channel), so that no ring of ranks fills its
 * queues. A step moves its part piece by piece, a slot each: thread 0 takes
 * the block's turn on the connections (td_take_turn) and waits for a slot
 * to read and a free slot to write (td_take_slots), every thread moves the
 * piece (td_move_piece), and thread 0 posts the written slot and frees the
 * read one (td_give_slots). Once the lane is done, thread 0 hands its
 * connections to their next users in the launch, and the last block resets
 * the launch's counters (td_finish_lane). */
#ifndef TUTTI_DEVICE_KERNELS_KERNEL_LANE_CUH
#define TUTTI_DEVICE_KERNELS_KERNEL_LANE_CUH

struct td_block {
  td_devcomm* dc;
  const td_ticket* tickets;
  int nticket;
  int ch;
  int n;
  int me;
  char* mine; /* this rank's shared region (what peers write into) */
  char* priv; /* this rank's private counters */
};

/* The block's shared memory (declared in td_run_block): what thread 0 found
 * for the piece, whether to stop, and the block's places in its queues. */
struct td_shared {
  const char** in;    /* the slot to read */
  char** out;         /* the slot to write */
  uint32_t* in_flag;  /* LL: the flag of the lines to read */
  uint32_t* out_flag; /* LL: the flag of the lines to write */
  int* stop;
  uint64_t* pos; /* [TD_CTA_TICKETS]: slots moved on each connection */
  uint8_t* held; /* [TD_CTA_TICKETS]: whether the block holds its turn */
};

/* This rank's count of slots moved on connection `conn` of the block's
 * channel: sent[ch][peer] (conn < n) or recvd[ch][peer]. */
__device__ __forceinline__ volatile uint64_t* td_moved(const td_block& b, int conn) {
  const td_layout& L = b.dc->lay;
  const int peer = conn % b.n;
  const uint64_t off = conn < b.n ? L.sent_off : L.recvd_off;
  return (volatile uint64_t*)(b.priv + td_ctr(off, b.ch, peer, b.n));
}

/* The turns served on connection `conn` of channel `ch` in this launch. */
__device__ __forceinline__ uint64_t* td_served(const td_block& b, int ch, int conn) {
  return (uint64_t*)(b.priv + td_ctr(b.dc->lay.served_off, ch, conn, 2 * b.n));
}

/* The channels on which lane `done_idx` of this launch has finished. */
__device__ __forceinline__ uint64_t* td_done(const td_block& b, int done_idx) {
  return (uint64_t*)(b.priv + b.dc->lay.done_off + (uint64_t)done_idx * TD_LINE);
}

/* LL slot `sl` of queue `q` (channel x sender) in a region. */
__device__ __forceinline__ char* td_ll_slot(char* region, const td_layout& L, uint64_t q,
                                            uint64_t sl) {
  return region + L.ll_off + (q * TD_SLOTS + sl) * TD_LL_SLOT_BYTES;
}

/* Index of connection `conn` among the block's tickets; takes the turn
 * (waits until every earlier user finished) on first use. Thread 0 only. */
__device__ int td_take_turn(const td_block& b, int conn, uint8_t* held, uint64_t* pos) {
  for (int k = 0; k < b.nticket; k++) {
    if (b.tickets[k].conn != conn) {
      continue;
    }
    if (!held[k]) {
      if (!td_wait_ge(td_served(b, b.ch, conn), b.tickets[k].turn, b.dc)) {
        return -1;
      }
      pos[k] = *td_moved(b, conn);
      held[k] = 1;
    }
    return k;
  }
  *b.dc->error = TD_STOP_NO_TICKET;
  return -1;
}

/* The lane's rounds: its largest part of a step on this channel, in chunks. */
__device__ __forceinline__ uint64_t td_lane_rounds(const td_step* ls, int nsteps, int nch, int ch,
                                                   uint64_t chunk) {
  uint64_t rounds = 1;
  for (int j = 0; j < nsteps; j++) {
    uint64_t o, l;
    td_chan_slice(ls[j].bytes, nch, ch, &o, &l);
    uint64_t r = (l + chunk - 1) / chunk;
    rounds = r > rounds ? r : rounds;
  }
  return rounds;
}

/* A step that waits for another lane: in round 0, thread 0 waits until the
 * lane finished on every channel of its operation; then the block meets,
 * and stops if the wait failed (*sh.stop). */
__device__ __forceinline__ void td_wait_lane(const td_block& b, const td_shared& sh,
                                             const td_op* ops, const td_lane* lanes,
                                             const td_step& st, uint64_t r) {
  if (r == 0 && threadIdx.x == 0) {
    const td_lane& wl = lanes[st.wait_lane];
    *sh.stop = !td_wait_ge(td_done(b, wl.done_idx), ops[wl.op].nch, b.dc);
  }
  __syncthreads();
}

/* Thread 0, before a piece: the slot to read from rk (the block's turn on
 * the connection, and for simple slots rk's tail past it) and the slot to
 * write to sk (the turn, and sk's head past the slot's last use). 0: the
 * block stops. */
__device__ __forceinline__ int td_take_slots(const td_block& b, const td_shared& sh,
                                             const td_op& op, int rk, int sk, uint64_t slot) {
  td_devcomm* dc = b.dc;
  const td_layout& L = dc->lay;
  uint64_t* pos = sh.pos;
  int ok = 1;
  if (rk >= 0) {
    int k = td_take_turn(b, b.n + rk, sh.held, pos);
    ok = k >= 0;
    const uint64_t q = (uint64_t)b.ch * b.n + rk, sl = pos[k] % TD_SLOTS;
    if (ok && op.ll) {
      *sh.in = td_ll_slot(b.mine, L, q, sl);
      *sh.in_flag = (uint32_t)(pos[k] + 1);
    } else if (ok) {
      const uint64_t* tail = (const uint64_t*)(b.mine + td_ctr(L.tail_off, b.ch, rk, b.n));
      ok = td_wait_ge(tail, pos[k] + 1, dc);
      *sh.in = b.mine + td_queue_off(&L, b.ch, rk, b.me, b.n) + sl * slot;
    }
  }
  if (ok && sk >= 0) {
    int k = td_take_turn(b, sk, sh.held, pos);
    const uint64_t* head = (const uint64_t*)(b.mine + td_ctr(L.head_off, b.ch, sk, b.n));
    ok = k >= 0 && (pos[k] < TD_SLOTS || td_wait_ge(head, pos[k] + 1 - TD_SLOTS, dc));
    const uint64_t q = (uint64_t)b.ch * b.n + b.me, sl = pos[k] % TD_SLOTS;
    *sh.out = op.ll ? td_ll_slot(dc->base[sk], L, q, sl)
                    : dc->base[sk] + td_queue_off(&L, b.ch, b.me, sk, b.n) + sl * slot;
    *sh.out_flag = (uint32_t)(pos[k] + 1);
  }
  return ok;
}

/* What a step of kind `kind` computes on a piece: p->a (the slot read, or
 * src) combined with p->b, or transformed, into p->w1 (and p->w2). Returns
 * the element-wise operation. */
__device__ __forceinline__ int td_step_operands(int kind, const td_op& op, int scale, int final,
                                                const char* in, char* out, char* psrc, char* pdst,
                                                uint64_t len, td_pass* p) {
  const char* x = in;
  const char* y = NULL;
  char* w1 = pdst;
  char* w2 = NULL;
  int eop = TD_COPY;
  switch (kind) {
    case TUTTI_STEP_COPY:
      x = psrc;
      eop = td_unary_eop(op, scale, final);
      break;
    case TUTTI_STEP_REDUCE:
      x = pdst;
      y = psrc;
      eop = td_binary_eop(op, scale, final);
      break;
    case TUTTI_STEP_SEND:
      x = psrc;
      w1 = out;
      eop = td_unary_eop(op, scale, 0);
      break;
    case TUTTI_STEP_RECV:
      eop = td_unary_eop(op, 0, final);
      break;
    case TUTTI_STEP_RECV_REDUCE_SEND:
      y = psrc;
      w1 = out;
      eop = td_binary_eop(op, scale, 0);
      break;
    case TUTTI_STEP_RECV_REDUCE_COPY:
      y = psrc;
      eop = td_binary_eop(op, scale, final);
      break;
    case TUTTI_STEP_RECV_REDUCE_COPY_SEND:
      y = psrc;
      w2 = out;
      eop = td_binary_eop(op, scale, final);
      break;
    case TUTTI_STEP_RECV_COPY_SEND:
      w2 = out;
      break;
    default:
      break;
  }
  *p = {x, y, w1, w2, len};
  return eop;
}

/* A step's part of one round on the block's channel. */
struct td_part {
  char* src; /* its bytes in the operation's buffers, or NULL */
  char* dst;
  int sk;    /* the peer it sends to, -1 none */
  int rk;    /* the peer it hears from, -1 none */
  int scale; /* it reads the send buffer: PreMulSum scales */
  int final; /* the last step on these bytes: SumPostDiv divides */
  int local; /* it neither sends nor receives: one piece */
};

/* Every thread: the piece at `pc` of part `pt` of step `st`, `len` bytes,
 * through LL lines or the generic pass. */
__device__ __forceinline__ void td_move_piece(const td_block& b, const td_shared& sh,
                                              const td_step& st, const td_op& op, uint64_t scalar,
                                              const td_part& pt, uint64_t pc, uint64_t len) {
  const char* in = pt.rk >= 0 ? *sh.in : NULL;
  char* out = pt.sk >= 0 ? *sh.out : NULL;
  char* psrc = pt.src ? pt.src + pc : NULL;
  char* pdst = pt.dst ? pt.dst + pc : NULL;
  td_pass p;
  const int eop = td_step_operands(st.kind, op, pt.scale, pt.final, in, out, psrc, pdst, len, &p);
  /* RECV_REDUCE_COPY folding in rank order: the accumulator (src) on the
   * left, unless src is scaled as read (a PreMulSum sum, whose operands commute). */
  const int acc_left = (st.flags & TUTTI_STEP_ACC_LEFT) != 0 && eop != TD_SUMSCALE;
  if (op.ll && !pt.local) {
    td_llpass lp;
    lp.in = (const uint4*)in;
    lp.in_flag = *sh.in_flag;
    lp.out_flag = *sh.out_flag;
    lp.src = in != NULL ? p.b : p.a;
    lp.dst = p.w1 == out ? NULL : p.w1;
    lp.out = (uint4*)out;
    lp.len = len;
    lp.dc = b.dc;
    lp.swap = acc_left;
    td_ll_typed(&op, scalar, eop, &lp);
  } else if (eop != TD_COPY || p.a != p.w1) { /* an in-place copy has nothing to do */
    if (acc_left) {
      const char* t = p.a;
      p.a = p.b;
      p.b = t;
    }
    td_pass_typed(&op, scalar, eop, &p);
  }
}

/* Thread 0, after a piece: the written slot posted to sk (simple slots:
 * its length for a proxy, a fence, the tail) and the read slot freed to rk. */
__device__ __forceinline__ void td_give_slots(const td_block& b, const td_shared& sh,
                                              const td_op& op, int sk, int rk, uint64_t len) {
  td_devcomm* dc = b.dc;
  const td_layout& L = dc->lay;
  uint64_t* pos = sh.pos;
  if (sk >= 0) {
    int k = td_take_turn(b, sk, sh.held, pos);
    ++pos[k];
    if (!op.ll) {
      if (dc->net) { /* a proxy forwards the slot: it needs the length */
        *(volatile uint32_t*)(dc->base[sk] + td_ctr(L.len_off, b.ch, b.me, b.n) +
                              (pos[k] - 1) % TD_SLOTS * sizeof(uint32_t)) = (uint32_t)len;
      }
      /* The barrier ordered every thread's stores before this fence, whose
       * cumulativity carries them to the peer before the tail moves. */
      __threadfence_system();
      td_st_release((uint64_t*)(dc->base[sk] + td_ctr(L.tail_off, b.ch, b.me, b.n)), pos[k]);
    }
  }
  if (rk >= 0) {
    /* Freeing a slot needs no fence: the barrier above waited for
     * every thread's loads of it, which a later store cannot pass. */
    int k = td_take_turn(b, b.n + rk, sh.held, pos);
    *(volatile uint64_t*)(dc->base[rk] + td_ctr(L.head_off, b.ch, b.me, b.n)) = ++pos[k];
  }
}

/* Step `st`'s part of round r: slot by slot, or in one piece when it sends
 * and receives nothing (a copy, a reduction). 0: the block stops. */
__device__ __forceinline__ int td_run_step(const td_block& b, const td_shared& sh,
                                           const td_step& st, const td_op& op, uint64_t scalar,
                                           uint64_t r, uint64_t chunk, uint64_t slot) {
  const int tid = threadIdx.x;
  uint64_t co, cl;
  td_chan_slice(st.bytes, op.nch, b.ch, &co, &cl);
  const uint64_t ro = r * chunk;
  if (ro >= cl) {
    return 1;
  }
  const uint64_t rl = cl - ro < chunk ? cl - ro : chunk;
  const uint64_t off = co + ro;
  td_part pt;
  pt.scale = st.src_buf == TUTTI_BUF_SEND;
  pt.final = (st.flags & TUTTI_STEP_FINAL) != 0;
  pt.src = st.src_buf ? (char*)op.bufs[st.src_buf] + st.src_off + off : NULL;
  pt.dst = st.dst_buf ? (char*)op.bufs[st.dst_buf] + st.dst_off + off : NULL;
  pt.sk = st.send_peer >= 0 ? st.send_peer : -1;
  pt.rk = st.recv_peer >= 0 ? st.recv_peer : -1;
  pt.local = pt.sk < 0 && pt.rk < 0;
  const uint64_t piece = pt.local ? rl : slot;
  for (uint64_t pc = 0; pc < rl; pc += piece) {
    const uint64_t len = rl - pc < piece ? rl - pc : piece;
    if (tid == 0 && !pt.local) {
      *sh.stop = !td_take_slots(b, sh, op, pt.rk, pt.sk, slot);
    }
    if (!pt.local) {
      __syncthreads();
      if (*sh.stop) {
        return 0;
      }
    }
    td_move_piece(b, sh, st, op, scalar, pt, pc, len);
    __syncthreads();
    if (tid == 0) {
      td_give_slots(b, sh, op, pt.sk, pt.rk, len);
    }
  }
  return 1;
}

/* Thread 0 of a lane that waits for no other and shares no connection in
 * this launch: the positions are for the next launch, which the kernel
 * boundary orders, so no fence and no hand-over. */
__device__ __forceinline__ void td_finish_sole(const td_block& b, const td_shared& sh,
                                               unsigned long long* finished, uint32_t ncta) {
  for (int k = 0; k < b.nticket; k++) {
    if (sh.held[k]) {
      const int conn = b.tickets[k].conn;
      volatile uint64_t* moved = td_moved(b, conn);
      *moved = sh.pos[k];
    }
  }
  if (atomicAdd(finished, 1ull) + 1 == ncta) {
    *(volatile unsigned long long*)finished = 0;
    td_kernel_finished(b.dc);
  }
}

/* Thread 0, once the lane is done on this channel: each connection handed
 * to its next user, the lane counted done here, and the launch's counters
 * reset by its last block for the next launch. */
__device__ __forceinline__ void td_finish_lane(const td_block& b, const td_shared& sh,
                                               unsigned long long* finished, const td_lane& lane,
                                               const td_lane* lanes, const td_cta* ctas,
                                               const td_ticket* tickets, uint32_t ncta,
                                               uint32_t nlanes) {
  __threadfence();
  for (int k = 0; k < b.nticket; k++) {
    const int conn = b.tickets[k].conn;
    /* A lane that never used a connection (its parts were empty) still waits
     * for its turn, or it would hand the connection past a lane holding it. */
    if (!sh.held[k] && td_take_turn(b, conn, sh.held, sh.pos) < 0) {
      return;
    }
    if (sh.held[k]) {
      volatile uint64_t* moved = td_moved(b, conn);
      *moved = sh.pos[k];
    }
    __threadfence();
    *(volatile uint64_t*)td_served(b, b.ch, conn) = b.tickets[k].turn + 1;
  }
  atomicAdd((unsigned long long*)td_done(b, lane.done_idx), 1ull);
  __threadfence();
  if (atomicAdd(finished, 1ull) + 1 == ncta) {
    __threadfence();
    for (uint32_t c = 0; c < ncta; c++) {
      for (int k = 0; k < ctas[c].nticket; k++) {
        const int conn = tickets[ctas[c].first_ticket + k].conn;
        *(volatile uint64_t*)td_served(b, ctas[c].channel, conn) = 0;
      }
    }
    for (uint32_t l = 0; l < nlanes; l++) {
      *(volatile uint64_t*)td_done(b, lanes[l].done_idx) = 0;
    }
    *(volatile unsigned long long*)finished = 0;
    td_kernel_finished(b.dc);
  }
}

__device__ void td_run_block(td_devcomm* dc, const td_op* ops, const td_lane* lanes,
                             const td_cta* ctas, const td_ticket* tickets, const td_step* steps,
                             uint32_t ncta, uint32_t nlanes, uint32_t simple_chunk,
                             uint32_t simple_slot, uint32_t flags, uint32_t nch, uint64_t tag) {
  __shared__ const char* s_in;
  __shared__ char* s_out;
  __shared__ uint32_t s_in_flag, s_out_flag;
  __shared__ int s_stop;
  __shared__ uint64_t s_scalar;
  __shared__ uint64_t s_pos[TD_CTA_TICKETS];
  __shared__ uint8_t s_held[TD_CTA_TICKETS];
  const td_shared sh = {&s_in, &s_out, &s_in_flag, &s_out_flag, &s_stop, s_pos, s_held};
  const td_cta cta = ctas[blockIdx.x];
  const td_lane lane = lanes[cta.lane];
  const td_op& op = ops[lane.op];
  td_block b = {dc,       tickets + cta.first_ticket, cta.nticket, cta.channel, dc->nranks,
                dc->rank, dc->base[dc->rank],         dc->priv};
  const int tid = threadIdx.x;
  if (tid == 0 && blockIdx.x == 0) {
    /* Its channels first: a proxy that sees the start then looks for data there. */
    ((volatile int*)dc->kstate)[2] = (int)nch;
    td_kernel_started(dc, tag); /* one launch of a communicator runs at a time (launch/order.cu) */
  }
  if (tid == 0) {
    s_stop = 0;
    s_scalar = td_scalar(op.scalar_dev, op.elem_size, op.scalar_bits);
    for (int k = 0; k < b.nticket; k++) {
      s_held[k] = 0;
    }
  }
  __syncthreads();
  const uint64_t scalar = s_scalar;
  const uint64_t chunk = op.ll ? TD_LL_CHUNK : simple_chunk;
  const uint64_t slot = op.ll ? TD_LL_PAYLOAD : simple_slot;
  const td_step* ls = steps + lane.first_step;
  const uint64_t rounds = td_lane_rounds(ls, lane.nsteps, op.nch, b.ch, chunk);
  for (uint64_t r = 0; r < rounds; r++) {
    for (int j = 0; j < lane.nsteps; j++) {
      const td_step& st = ls[j];
      if (st.kind == TUTTI_STEP_WAIT_LANE) {
        td_wait_lane(b, sh, ops, lanes, st, r);
        if (s_stop) {
          return;
        }
        continue;
      }
      if (!td_run_step(b, sh, st, op, scalar, r, chunk, slot)) {
        return;
      }
    }
  }
  if (tid != 0) {
    return;
  }
  unsigned long long* finished = (unsigned long long*)(b.priv + dc->lay.finished_off);
  if (flags & TD_SOLE) {
    td_finish_sole(b, sh, finished, ncta);
    return;
  }
  td_finish_lane(b, sh, finished, lane, lanes, ctas, tickets, ncta, nlanes);
}

#endif
