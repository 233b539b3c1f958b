# A CPU-bound Python program for the stack sampler's Python tests (stacks_test.cc,
# python_stacks_cli_test.sh): <module> -> outer -> middle -> hot_loop, at the lines the tests
# look for. Keep the line numbers: the tests name them. Usage: python_prog.py CPU_SECONDS
import sys
import time


def hot_loop(n):
    total = 0
    for i in range(n):  # line 10
        total += i * i % 7  # line 11
    return total


def middle(n):
    return hot_loop(n)  # line 16


def outer(seconds):
    end = time.process_time() + seconds
    print("ready", flush=True)
    while time.process_time() < end:
        middle(20000)  # line 23


outer(float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)  # line 26
