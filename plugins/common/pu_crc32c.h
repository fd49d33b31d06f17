/* SPDX-License-Identifier: MIT */
/*
 * pu_crc32c: CRC-32C (Castagnoli, the iSCSI/ext4 polynomial), the checksum
 * of filevec's records and segment headers and of the host's keyword
 * index snapshots (built into both). pu_crc32c() uses the SSE4.2
 * crc32 instruction when the CPU has it (checked per call) and a table
 * otherwise; both give the same value.
 */
#ifndef MEMD_PU_CRC_H
#define MEMD_PU_CRC_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of n bytes at p (n may be 0; p may then be NULL), continuing
 * from crc (0 to start; pass a previous result to checksum data in
 * pieces). Standard conditioning: pu_crc32c(0, "123456789", 9) ==
 * 0xe3069283. */
uint32_t pu_crc32c(uint32_t crc, const void *p, size_t n);

/* The table version, always available (for tests). */
uint32_t pu_crc32c_sw(uint32_t crc, const void *p, size_t n);

/* Nonzero when the SSE4.2 version can run on this CPU. */
int pu_crc32c_hw_available(void);

/* The SSE4.2 version; only call it when pu_crc32c_hw_available(). */
uint32_t pu_crc32c_hw(uint32_t crc, const void *p, size_t n);

#endif
