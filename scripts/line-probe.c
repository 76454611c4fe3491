/* Raw cache-line probe behind docs/engine.md's small-payload decision:
 * two pinned threads ping-pong P payload bytes through
 * a ring of 64 stamped slots, the payload placed
 *   mode 0: in a separate frame (stride 64 + 8192, payload at +64), as the
 *           shared-memory transport's dedicated frames are;
 *   mode 1: in the lines right after the stamp line (a multi-line slot);
 *   mode 2: in the lines right before the stamp line (stamp written last);
 *   mode 3: in the stamp line itself (P <= 48).
 * The writer copies the payload, then stores the stamp with Release; the
 * reader spins on the stamp with Acquire, then copies the payload out.
 *
 *   gcc -O2 -march=native -pthread scripts/line-probe.c -o line-probe
 *   chrt -f 10 ./line-probe 64 0 1000000    # P mode iterations
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdatomic.h>
#include <immintrin.h>

static int P;         /* payload bytes */
static int MODE;      /* 0 far frame, 1 payload after stamp line, 2 payload before stamp line (stamp last), 3 inline in stamp line (P<=48) */
static long ITERS = 200000;
#define NS 64
#define FRAME_STRIDE (64+8192)
typedef struct { char *slots; char *frames; size_t stride; } ring_t;
static ring_t R[2];

static inline uint64_t now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000ull+t.tv_nsec;}
static inline _Atomic uint64_t *stamp_of(ring_t *r, long i){
  char *s = r->slots + (i%NS)*r->stride;
  if (MODE==2) s += r->stride-64;
  return (_Atomic uint64_t*)s;
}
static inline char *payload_of(ring_t *r, long i){
  char *s = r->slots + (i%NS)*r->stride;
  switch(MODE){case 0: return r->frames + (i%NS)*FRAME_STRIDE + 64; case 1: return s+64; case 2: return s; default: return s+16;}
}
static char local[2][65536];
static void sendm(ring_t *r, long i, char *src){
  memcpy(payload_of(r,i), src, P);
  atomic_store_explicit(stamp_of(r,i), i+1, memory_order_release);
}
static void recvm(ring_t *r, long i, char *dst){
  _Atomic uint64_t *s = stamp_of(r,i);
  while (atomic_load_explicit(s, memory_order_acquire)!=(uint64_t)i+1) _mm_pause();
  memcpy(dst, payload_of(r,i), P);
}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static void *pong(void*a){pin(1);for(long i=0;i<ITERS;i++){recvm(&R[1],i,local[1]);sendm(&R[0],i,local[1]);}return 0;}
int main(int argc,char**argv){
  P=atoi(argv[1]);MODE=atoi(argv[2]); if(argc>3)ITERS=atol(argv[3]);
  for(int k=0;k<2;k++){
    size_t st = MODE==0||MODE==3 ? 64 : 64 + ((P+63)/64)*64;
    R[k].stride=st; R[k].slots=aligned_alloc(4096, st*NS); memset(R[k].slots,0,st*NS);
    R[k].frames=aligned_alloc(4096,(size_t)FRAME_STRIDE*NS); memset(R[k].frames,0,(size_t)FRAME_STRIDE*NS);
  }
  pthread_t t;pthread_create(&t,0,pong,0);pin(0);
  uint64_t t0=0; long warm=ITERS/10;
  for(long i=0;i<ITERS;i++){ if(i==warm)t0=now(); sendm(&R[1],i,local[0]); recvm(&R[0],i,local[0]);}
  uint64_t t1=now(); pthread_join(t,0);
  printf("P=%d mode=%d one-way %.1f ns\n",P,MODE,(double)(t1-t0)/(ITERS-warm)/2);
}
