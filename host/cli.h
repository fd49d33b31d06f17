/* SPDX-License-Identifier: MIT */
/* cli: the memd command line. Returns the process exit code (see cli.c). */
#ifndef MEMD_HOST_CLI_H
#define MEMD_HOST_CLI_H
int cli_main(int argc, char **argv);
#endif
