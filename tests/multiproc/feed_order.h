/* SPDX-License-Identifier: MIT */
/*
 * feed_order: the change-feed ordering tests of the server-backed stores
 * (feed_order.c), and what each store supplies to them: one of
 * pg_feed_order.c and mysql_feed_order.c is linked with feed_order.c and
 * stress_util.c into the store's test executable.
 */
#ifndef MEMD_TESTS_FEED_ORDER_H
#define MEMD_TESTS_FEED_ORDER_H

/* How long the stall trigger holds a slow insert, in seconds (SQL text). */
#define FEED_ORDER_STALL_S "1.5"

/* Install a trigger, in the schema or database that $MEMD_STRESS_CONFIG
 * names after name (its "@NAME@"), that sleeps FEED_ORDER_STALL_S seconds
 * in the insert of every event whose id starts with "slow" - after the
 * append took its feed position, before its COMMIT. Connects with the
 * raw client library and the test server's variables; a failure fails
 * the test (Criterion assertion). */
void feed_order_install_stall(const char *name);

/* 1 while an insert in name's schema or database is inside the stall
 * (the server shows it sleeping), else 0. Connects as
 * feed_order_install_stall does; a failure fails the test. */
int feed_order_stalling(const char *name);

#endif
