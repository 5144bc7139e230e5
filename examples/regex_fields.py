"""Regex-constrained fields: each value is generated under a regular expression (dtype=int,
dtype=bool, or an explicit regex), so it always parses. Needs a backend with constrained
decoding."""

from __future__ import annotations

from _common import run_example

import radixlm as sgl

IP = r"((25[0-5]|2[0-4]\d|[01]?\d\d?)\.){3}(25[0-5]|2[0-4]\d|[01]?\d\d?)"
EMAIL = r"[a-z]+\.[a-z]+@[a-z]+\.(com|org|net|io|dev)"
DATE = r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d)"


@sgl.function
def contact_card(s, name):
    s += "Contact card for " + name + ".\n"
    with s.var_scope("card"):
        s += "email: " + sgl.gen("email", regex=EMAIL) + "\n"
        s += "born: " + sgl.gen("born", regex=DATE) + "\n"
        s += "server ip: " + sgl.gen("ip", regex=IP) + "\n"
        s += "age: " + sgl.gen_int("age", max_tokens=4) + "\n"
        s += "active: " + sgl.gen("active", dtype=bool) + "\n"


def main(backend) -> None:
    for state in contact_card.run_batch([{"name": n} for n in ("Heidi Smith", "Omar Kim")],
                                        backend=backend, temperature=0):
        if state.error() is not None:
            raise state.error()
        print(state["card"])
        print(f"  parsed: age={int(state['age'])} active={state['active'] == 'True'}")


if __name__ == "__main__":
    run_example(main, __doc__)
