/* SPDX-License-Identifier: MIT */
#include "cli.h"
int cli_main(int argc, char **argv) { (void)argc; (void)argv; return 0; }
