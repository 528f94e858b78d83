/* The body of one block: a lane of steps on one channel (see kernel.cu). */
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

/* Index of connection `conn` among the block's tickets; takes the turn
 * (waits until every earlier user finished) on first use. Thread 0 only. */
__device__ int td_take_turn(const td_block& b, int conn, uint8_t* held, uint64_t* pos) {
  const td_layout& L = b.dc->lay;
  for (int k = 0; k < b.nticket; k++) {
    if (b.tickets[k].conn != conn) {
      continue;
    }
    if (!held[k]) {
      uint64_t* served = (uint64_t*)(b.priv + td_ctr(L.served_off, b.ch, conn, 2 * b.n));
      if (!td_wait_ge(served, b.tickets[k].turn, b.dc)) {
        return -1;
      }
      const int peer = conn % b.n;
      const uint64_t off = conn < b.n ? L.sent_off : L.recvd_off;
      pos[k] = *(volatile uint64_t*)(b.priv + td_ctr(off, b.ch, peer, b.n));
      held[k] = 1;
    }
    return k;
  }
  *b.dc->error = TD_STOP_NO_TICKET;
  return -1;
}

__device__ void td_run_block(td_devcomm* dc, const td_op* ops, const td_lane* lanes,
                             const td_cta* ctas, const td_ticket* tickets, const td_step* steps,
                             uint32_t ncta, uint32_t nlanes, uint32_t simple_chunk,
                             uint32_t simple_slot, uint32_t flags) {
  __shared__ const char* s_in;
  __shared__ char* s_out;
  __shared__ uint32_t s_in_flag, s_out_flag;
  __shared__ int s_stop;
  __shared__ uint64_t s_scalar;
  __shared__ uint64_t s_pos[TD_CTA_TICKETS];
  __shared__ uint8_t s_held[TD_CTA_TICKETS];
  const td_cta cta = ctas[blockIdx.x];
  const td_lane lane = lanes[cta.lane];
  const td_op& op = ops[lane.op];
  const td_layout& L = dc->lay;
  td_block b = {dc,       tickets + cta.first_ticket, cta.nticket, cta.channel, dc->nranks,
                dc->rank, dc->base[dc->rank],         dc->priv};
  const int tid = threadIdx.x;
  if (tid == 0 && blockIdx.x == 0) {
    td_kernel_started(dc); /* one launch of a communicator runs at a time (launch/order.cu) */
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
  uint64_t rounds = 1;
  for (int j = 0; j < lane.nsteps; j++) {
    uint64_t o, l;
    td_chan_slice(ls[j].bytes, op.nch, b.ch, &o, &l);
    uint64_t r = (l + chunk - 1) / chunk;
    rounds = r > rounds ? r : rounds;
  }
  for (uint64_t r = 0; r < rounds; r++) {
    for (int j = 0; j < lane.nsteps; j++) {
      const td_step& st = ls[j];
      if (st.kind == TUTTI_STEP_WAIT_LANE) {
        if (r == 0 && tid == 0) {
          const td_lane& wl = lanes[st.wait_lane];
          uint64_t* done = (uint64_t*)(b.priv + L.done_off + (uint64_t)wl.done_idx * TD_LINE);
          s_stop = !td_wait_ge(done, ops[wl.op].nch, dc);
        }
        __syncthreads();
        if (s_stop) {
          return;
        }
        continue;
      }
      uint64_t co, cl;
      td_chan_slice(st.bytes, op.nch, b.ch, &co, &cl);
      const uint64_t ro = r * chunk;
      if (ro >= cl) {
        continue;
      }
      const uint64_t rl = cl - ro < chunk ? cl - ro : chunk;
      const uint64_t off = co + ro;
      const int scale = st.src_buf == TUTTI_BUF_SEND;
      const int final = (st.flags & TUTTI_STEP_FINAL) != 0;
      char* src = st.src_buf ? (char*)op.bufs[st.src_buf] + st.src_off + off : NULL;
      char* dst = st.dst_buf ? (char*)op.bufs[st.dst_buf] + st.dst_off + off : NULL;
      const int sk = st.send_peer >= 0 ? st.send_peer : -1;
      const int rk = st.recv_peer >= 0 ? st.recv_peer : -1;
      /* A local step (copy, reduce) runs in one piece; the others slot by slot. */
      const int local = sk < 0 && rk < 0;
      const uint64_t piece = local ? rl : slot;
      for (uint64_t pc = 0; pc < rl; pc += piece) {
        const uint64_t len = rl - pc < piece ? rl - pc : piece;
        if (tid == 0 && !local) {
          int ok = 1;
          if (rk >= 0) {
            int k = td_take_turn(b, b.n + rk, s_held, s_pos);
            ok = k >= 0;
            const uint64_t q = (uint64_t)b.ch * b.n + rk, sl = s_pos[k] % TD_SLOTS;
            if (ok && op.ll) {
              s_in = b.mine + L.ll_off + (q * TD_SLOTS + sl) * TD_LL_LINES * 16;
              s_in_flag = (uint32_t)(s_pos[k] + 1);
            } else if (ok) {
              const uint64_t* tail = (const uint64_t*)(b.mine + td_ctr(L.tail_off, b.ch, rk, b.n));
              ok = td_wait_ge(tail, s_pos[k] + 1, dc);
              s_in = b.mine + td_queue_off(&L, b.ch, rk, b.me, b.n) + sl * slot;
            }
          }
          if (ok && sk >= 0) {
            int k = td_take_turn(b, sk, s_held, s_pos);
            const uint64_t* head = (const uint64_t*)(b.mine + td_ctr(L.head_off, b.ch, sk, b.n));
            ok = k >= 0 && (s_pos[k] < TD_SLOTS || td_wait_ge(head, s_pos[k] + 1 - TD_SLOTS, dc));
            const uint64_t q = (uint64_t)b.ch * b.n + b.me, sl = s_pos[k] % TD_SLOTS;
            s_out = op.ll ? dc->base[sk] + L.ll_off + (q * TD_SLOTS + sl) * TD_LL_LINES * 16
                          : dc->base[sk] + td_queue_off(&L, b.ch, b.me, sk, b.n) + sl * slot;
            s_out_flag = (uint32_t)(s_pos[k] + 1);
          }
          s_stop = !ok;
        }
        if (!local) {
          __syncthreads();
          if (s_stop) {
            return;
          }
        }
        const char* in = rk >= 0 ? s_in : NULL;
        char* out = sk >= 0 ? s_out : NULL;
        char* psrc = src ? src + pc : NULL;
        char* pdst = dst ? dst + pc : NULL;
        /* What each kind computes: x = in (or src), combined with src or transformed. */
        const char* x = in;
        const char* y = NULL;
        char* w1 = pdst;
        char* w2 = NULL;
        int eop = TD_COPY;
        switch (st.kind) {
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
        if (op.ll && !local) {
          td_llpass lp;
          lp.in = (const uint4*)in;
          lp.in_flag = s_in_flag;
          lp.out_flag = s_out_flag;
          lp.src = in != NULL ? y : x;
          lp.dst = w1 == out ? NULL : w1;
          lp.out = (uint4*)out;
          lp.len = len;
          lp.dc = dc;
          td_ll_typed(&op, scalar, eop, &lp);
        } else if (eop != TD_COPY || x != w1) { /* an in-place copy has nothing to do */
          td_pass p = {x, y, w1, w2, len};
          td_pass_typed(&op, scalar, eop, &p);
        }
        __syncthreads();
        if (tid == 0) {
          if (sk >= 0) {
            int k = td_take_turn(b, sk, s_held, s_pos);
            ++s_pos[k];
            if (!op.ll) {
              if (dc->net) { /* a proxy forwards the slot: it needs the length */
                *(volatile uint32_t*)(dc->base[sk] + td_ctr(L.len_off, b.ch, b.me, b.n) +
                                      (s_pos[k] - 1) % TD_SLOTS * sizeof(uint32_t)) = (uint32_t)len;
              }
              /* The barrier ordered every thread's stores before this fence, whose
               * cumulativity carries them to the peer before the tail moves. */
              __threadfence_system();
              td_st_release((uint64_t*)(dc->base[sk] + td_ctr(L.tail_off, b.ch, b.me, b.n)),
                            s_pos[k]);
            }
          }
          if (rk >= 0) {
            /* Freeing a slot needs no fence: the barrier above waited for
             * every thread's loads of it, which a later store cannot pass. */
            int k = td_take_turn(b, b.n + rk, s_held, s_pos);
            *(volatile uint64_t*)(dc->base[rk] + td_ctr(L.head_off, b.ch, b.me, b.n)) = ++s_pos[k];
          }
        }
      }
    }
  }
  if (tid != 0) {
    return;
  }
  unsigned long long* finished = (unsigned long long*)(b.priv + L.finished_off);
  if (flags & TD_SOLE) {
    /* Nobody else in this launch uses these connections and nobody waits for
     * this lane: the positions are for the next launch, which the kernel
     * boundary orders, so no fence and no hand-over. */
    for (int k = 0; k < b.nticket; k++) {
      if (s_held[k]) {
        const int conn = b.tickets[k].conn;
        const uint64_t off = conn < b.n ? L.sent_off : L.recvd_off;
        *(volatile uint64_t*)(b.priv + td_ctr(off, b.ch, conn % b.n, b.n)) = s_pos[k];
      }
    }
    if (atomicAdd(finished, 1ull) + 1 == ncta) {
      *(volatile unsigned long long*)finished = 0;
      td_kernel_finished(dc);
    }
    return;
  }
  /* The lane is done on this channel: hand each connection to its next user. */
  __threadfence();
  for (int k = 0; k < b.nticket; k++) {
    const int conn = b.tickets[k].conn;
    /* A lane that never used a connection (its parts were empty) still waits
     * for its turn, or it would hand the connection past a lane holding it. */
    if (!s_held[k] && td_take_turn(b, conn, s_held, s_pos) < 0) {
      return;
    }
    if (s_held[k]) {
      const uint64_t off = conn < b.n ? L.sent_off : L.recvd_off;
      *(volatile uint64_t*)(b.priv + td_ctr(off, b.ch, conn % b.n, b.n)) = s_pos[k];
    }
    __threadfence();
    *(volatile uint64_t*)(b.priv + td_ctr(L.served_off, b.ch, conn, 2 * b.n)) =
        b.tickets[k].turn + 1;
  }
  atomicAdd((unsigned long long*)(b.priv + L.done_off + (uint64_t)lane.done_idx * TD_LINE), 1ull);
  __threadfence();
  /* The last block to finish resets the launch's counters for the next one. */
  if (atomicAdd(finished, 1ull) + 1 == ncta) {
    __threadfence();
    for (uint32_t c = 0; c < ncta; c++) {
      for (int k = 0; k < ctas[c].nticket; k++) {
        const int conn = tickets[ctas[c].first_ticket + k].conn;
        *(volatile uint64_t*)(b.priv + td_ctr(L.served_off, ctas[c].channel, conn, 2 * b.n)) = 0;
      }
    }
    for (uint32_t l = 0; l < nlanes; l++) {
      *(volatile uint64_t*)(b.priv + L.done_off + (uint64_t)lanes[l].done_idx * TD_LINE) = 0;
    }
    *(volatile unsigned long long*)finished = 0;
    td_kernel_finished(dc);
  }
}

#endif
