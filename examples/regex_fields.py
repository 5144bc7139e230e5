"""Regex-constrained fields: each value is read off a short note under a regular expression
(an explicit regex, dtype=int or dtype=bool), so it always parses. Each regex starts with
the space after the colon and ends with the newline: the model writes the text as its
worked examples tokenize it, and writing the newline is how it says the value is done. The
notes are a batch sharing the worked examples; every field is graded against its note.
Needs a backend with constrained decoding."""

from __future__ import annotations

from _common import Grades, run_example

import radixlm as sgl

IP = r"((25[0-5]|2[0-4]\d|[01]?\d\d?)\.){3}(25[0-5]|2[0-4]\d|[01]?\d\d?)"
EMAIL = r"[a-z]+\.[a-z]+@[a-z]+\.(com|org|net|io|dev)"
DATE = r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
EXAMPLES = """Note: Ana Ruiz (ana.ruiz@shop.com), born 1990-04-12, age 36, runs the server at \
10.0.0.7; her account is active.
email: ana.ruiz@shop.com
born: 1990-04-12
server ip: 10.0.0.7
age: 36
active: True

Note: Tom Lee (tom.lee@post.io), born 1972-09-30, age 54, runs the server at 10.1.2.3; his \
account is closed.
email: tom.lee@post.io
born: 1972-09-30
server ip: 10.1.2.3
age: 54
active: False

"""
# (note, its fields): the key the values are graded against.
NOTES = [
    ("Omar Kim (omar.kim@mail.net), born 1985-11-03, age 41, runs the server at 192.168.1.20; "
     "his account is closed.",
     {"email": "omar.kim@mail.net", "born": "1985-11-03", "ip": "192.168.1.20", "age": 41,
      "active": False}),
    ("Lena Berg (lena.berg@web.org), born 2001-02-28, age 25, runs the server at 172.16.0.5; "
     "her account is active.",
     {"email": "lena.berg@web.org", "born": "2001-02-28", "ip": "172.16.0.5", "age": 25,
      "active": True}),
]


@sgl.function
def contact_card(s, note):
    s += EXAMPLES + "Note: " + note + "\n"
    s += "email:" + sgl.gen("email", regex=f" {EMAIL}\n")
    s += "born:" + sgl.gen("born", regex=f" {DATE}\n")
    s += "server ip:" + sgl.gen("ip", regex=f" {IP}\n")
    s += "age: " + sgl.gen_int("age", max_tokens=4) + "\n"  # dtype=int stops at "\n" itself
    s += "active: " + sgl.gen("active", dtype=bool) + "\n"


def main(backend) -> Grades:
    states = contact_card.run_batch([{"note": note} for note, _ in NOTES], backend=backend,
                                    temperature=0)
    grades = Grades()
    for (note, truth), state in zip(NOTES, states):
        if state.error() is not None:
            raise state.error()
        print(note)
        got = {"email": state["email"].strip(), "born": state["born"].strip(),
               "ip": state["ip"].strip(), "age": int(state["age"]),  # always parses
               "active": state["active"] == "True"}
        for field, expected in truth.items():
            grades.check(f"  {field}", got[field], expected)
    grades.summary()
    return grades


if __name__ == "__main__":
    run_example(main, __doc__)
