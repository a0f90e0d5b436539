/* SPDX-License-Identifier: MIT */
/*
 * stoker run — the CLI's `run` command (run.c): a training command run unchanged with stoker's
 * DataLoader in each of its Python processes (the Python package's stoker.launch).
 */
#ifndef STOKER_RUN_H
#define STOKER_RUN_H

int cmd_run(int argc, char **argv);

#endif
