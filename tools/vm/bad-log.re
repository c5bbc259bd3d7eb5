WARNING:
------------\[ cut here \]------------
BUG:
kernel BUG at
Oops
KASAN
UBSAN
lockdep
general protection
refcount_t
Kernel panic
Call Trace:
INFO: task .* blocked for more than
rcu: INFO: rcu_.* detected stalls
