"""Runtime side in Python: the executors the C++ delegate calls, and the program Runner."""
