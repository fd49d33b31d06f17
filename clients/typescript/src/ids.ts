// SPDX-License-Identifier: MIT
// UUIDv7 (RFC 9562) for the ids the client makes itself: event, message,
// session and memory ids that make a retried write a replay instead of a
// second write. Uses only crypto.getRandomValues (browsers, Node 18+).

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/* Random bytes are drawn this many at a time (one getRandomValues call
 * per 256 ids, not one per id: the call costs more than the 16 bytes). */
const POOL_BYTES = 4096;
let pool = new Uint8Array(0);
let poolAt = 0;

/* 16 fresh random bytes, the caller's to overwrite. */
function random16(): Uint8Array {
  if (poolAt + 16 > pool.length) {
    pool = new Uint8Array(POOL_BYTES);
    globalThis.crypto.getRandomValues(pool);
    poolAt = 0;
  }
  poolAt += 16;
  return pool.subarray(poolAt - 16, poolAt);
}

/* The last timestamp and counter handed out, so that ids made in one
 * millisecond still sort in the order they were made (RFC 9562 §6.2,
 * method 1: a 12-bit counter in rand_a, seeded randomly each ms). */
let lastMs = -1;
let counter = 0;

/**
 * A new UUIDv7 string (lowercase, 8-4-4-4-12): 48 bits of Unix time in
 * milliseconds, version 7, a 12-bit counter that keeps ids of one
 * millisecond ascending, variant 10 and 62 random bits.
 */
export function uuidv7(): string {
  const bytes = random16();
  let ms = Date.now();
  if (ms > lastMs) {
    lastMs = ms;
    counter = ((bytes[6] & 0x07) << 8) | bytes[7]; /* start in the lower half: room to count */
  } else {
    ms = lastMs;
    counter++;
    if (counter > 0xfff) { /* 4096 ids in one ms: borrow the next ms */
      lastMs = ++ms;
      counter = 0;
    }
  }
  /* 48-bit big-endian ms; Math.floor division keeps it exact above 2^32. */
  let t = ms;
  for (let i = 5; i >= 0; i--) {
    bytes[i] = t % 256;
    t = Math.floor(t / 256);
  }
  bytes[6] = 0x70 | (counter >> 8);
  bytes[7] = counter & 0xff;
  bytes[8] = 0x80 | (bytes[8] & 0x3f);
  let s = '';
  for (let i = 0; i < 16; i++) {
    s += HEX[bytes[i]];
    if (i === 3 || i === 5 || i === 7 || i === 9) s += '-';
  }
  return s;
}
