/* SPDX-License-Identifier: MIT */
/* stk-mkfolder ROOT NCLASSES PER_CLASS MINSIDE MAXSIDE SEED — write a generated ImageFolder
 * (t_make_imagefolder: class_000.., several sizes and subsamplings) for the shell and Python
 * tests of `stoker pack`. Prints the number of files. */
#include "testutil.h"

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: stk-mkfolder ROOT NCLASSES PER_CLASS MINSIDE MAXSIDE SEED\n");
        return 2;
    }
    int nc = atoi(argv[2]), per = atoi(argv[3]), lo = atoi(argv[4]), hi = atoi(argv[5]);
    if (nc < 1 || per < 0 || lo < 1 || hi < lo) {
        fprintf(stderr, "stk-mkfolder: bad arguments\n");
        return 2;
    }
    size_t n = t_make_imagefolder(argv[1], nc, per, lo, hi, strtoull(argv[6], NULL, 10));
    printf("%zu\n", n);
    return 0;
}
