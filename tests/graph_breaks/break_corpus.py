"""Corpus functions for the graph-break corpus test in test_break_corpus.py.

None of these functions break on their own through a marker: the test reads each
one's source, inserts a `brk()` statement (a call framejit must not put in a
graph) before one statement of some statement list, at every nesting level, one
insertion per variant, and checks every variant against eager.

Every function takes `(x, n)`: `x` a float tensor of 4 elements, `n` a small int.
They may only use `torch` and builtins (each variant is exec'd in a fresh namespace).
"""

import torch


def c_for_range(x, n):
    acc = x * 0
    for i in range(n):
        acc = acc + x * i
        if i % 2 == 0:
            acc = acc - 1
        else:
            acc = acc * 0.5
    return acc + 1


def c_while(x, n):
    i = 0
    y = x + 0
    while i < n:
        y = y * 1.5
        i += 1
        if i > 5:
            break
    else:
        y = y - 1
    return y, i


def c_tensor_while(x, n):
    y = x.abs() + 0.1
    k = 0
    while y.sum() < 20 and k < 10:
        y = y * 2 + n
        k += 1
    return y, k


def c_no_grad(x, n):
    y = x * 2
    with torch.no_grad():
        z = y + n
        w = z * 3
    v = w + y
    return v, z, torch.is_grad_enabled()


def c_nested_with(x, n):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
            c = b + a
        d = c * 4
    e = d + x
    return a, b, c, d, e


def c_try_except(x, n):
    log = []
    y = x + 1
    try:
        log.append(1)
        if n > 2:
            raise ValueError("big")
        y = y * 2
    except ValueError as err:
        log.append(str(err))
        y = y - 1
    else:
        log.append(4)
    finally:
        log.append(3)
        y = y + 0.5
    return y, log


def c_try_finally_return(x, n):
    y = x * 2
    try:
        if n > 1:
            return y + 1
        y = y - 1
    finally:
        y = y * 0
    return y


def c_nested_calls(x, n):
    def inner(t, k):
        u = t * k
        return u + 1

    def middle(t):
        v = inner(t, 2)
        return inner(v, 3) - 1

    return middle(x) + inner(x, n)


def c_comprehensions(x, n):
    ys = [x * i for i in range(n + 1)]
    total = sum(ys)
    d = {i: y.sum() for i, y in enumerate(ys)}
    keys = sorted(d)
    return total, keys


def c_early_return(x, n):
    if n == 0:
        return x
    y = x * n
    if n > 2:
        return y - 1
    y = y + 1
    return y


def c_if_chain(x, n):
    s = x.sum()
    if s > 1:
        y = x * 2
    elif s > -1:
        y = x + 2
    else:
        y = x - 2
    if n == 3:
        y = y * n
    elif n == 1:
        y = y / n
    else:
        y = -y
    return y


def c_tensor_rows(x, n):
    m = x.reshape(2, 2)
    acc = []
    for row in m:
        r = row * n
        acc.append(r)
    return torch.stack(acc)


def c_closure(x, n):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        return t + count

    y = bump(x)
    for _ in range(n):
        y = bump(y)
    return y, count


def c_containers(x, n):
    d = {"a": x, "b": x * 2}
    d["c"] = d["a"] + d["b"]
    a, b = d["b"], d["c"]
    t = (a, b, n)
    lst = list(t)
    lst.append(a * b)
    return lst, sorted(d)


def c_enumerate_zip(x, n):
    xs = [x, x + 1, x * 2]
    ys = [n, n + 1, n + 2]
    out = x * 0
    for i, (a, b) in enumerate(zip(xs, ys)):
        out = out + a * b
        if i == n:
            out = out - 1
    return out


def c_with_in_loop(x, n):
    outs = []
    for i in range(n):
        with torch.no_grad():
            y = x * i
        outs.append(y + x)
    return outs


CORPUS = [
    c_for_range,
    c_while,
    c_tensor_while,
    c_no_grad,
    c_nested_with,
    c_try_except,
    c_try_finally_return,
    c_nested_calls,
    c_comprehensions,
    c_early_return,
    c_if_chain,
    c_tensor_rows,
    c_closure,
    c_containers,
    c_enumerate_zip,
    c_with_in_loop,
]
