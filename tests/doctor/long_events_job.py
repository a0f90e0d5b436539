# SPDX-License-Identifier: MIT
"""A job that writes, in place of the hook, the events of a long run: 200000 batches 5 us apart and
2000 save calls, all within about a second, then waits for the doctor to read them (test_doctor_cli.sh:
the --plot stays small and its labels inside)."""
import os, sys, time

fd = os.open(os.environ["STOKER_DOCTOR_EVENTS"], os.O_WRONLY | os.O_APPEND)
pid, t = os.getpid(), time.monotonic_ns()
os.write(fd, b"H %d %d 1 3.11\nI %d %d %d torch 0 16 0 1\n" % (pid, t, pid, t, t + 1000))
lines = [b"N %d %d %d 16 float32 1 -\n" % (pid, t + 5000 * i, 1000 + (i % 97) * 20) for i in range(200000)]
lines += [b"S %d %d %d 1000 torch.save\n" % (pid, t + 500000 * i, t + 500000 * i + 1000) for i in range(2000)]
for i in range(0, len(lines), 2000):
    os.write(fd, b"".join(lines[i:i + 2000]))
time.sleep(1.5)
