#!/usr/bin/env python3
"""test-run-chat.py: `faultline run`'s conversation mode, driven through a
pseudo-terminal as a user at a terminal drives it.

  - no -cnv: stdin is a terminal and the model has a chat format, so the
    conversation starts by itself (llama-cli's default); two turns are
    answered (a speed line after each), the second answer comes after the
    first in the KV cache (the prompt of turn 2 is only the new text), and
    /exit ends it with status 0;
  - a format that writes an answer back differently (GLM-4.5's <think>
    turn): the cache goes back to the end of the last prompt it still
    matches, not to the start; a recurrent model starts again;
  - Ctrl-C during a long answer stops the answer, not the program: the
    prompt comes back and a further turn is answered;
  - Ctrl-C at the prompt ends it with status 130;
  - -no-cnv at a terminal with -p: one completion, no prompt;
  - a chat template the model does not have: --chat-template picks one.

usage: test-run-chat.py FAULTLINE"""
import os
import pty
import re
import select
import signal
import sys
import time

CLI = sys.argv[1]
MODEL = "tests/data/qwen3moe-tiny-Q8_0.gguf"
SPEED = re.compile(rb"prompt: (\d+) tokens in [0-9.]+ s \([0-9.]+ t/s\); generation: (\d+) tokens")


def fail(msg, out=b""):
    print("FAIL:", msg)
    if out:
        print("--- output (last 2000 bytes) ---")
        print(out[-2000:].decode("utf-8", "replace"))
    sys.exit(1)


class Pty:
    def __init__(self, args):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(CLI, [CLI] + args)
        self.out = b""

    def read_until(self, pattern, timeout=60.0, start=0):
        """Reads until pattern (bytes regex) matches the output after start."""
        end = time.time() + timeout
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.out, start)
            if m:
                return m
            left = end - time.time()
            if left <= 0:
                fail("timed out waiting for %r" % pattern, self.out)
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    fail("the program ended while waiting for %r" % pattern, self.out)
                self.out += data

    def send(self, text):
        os.write(self.fd, text)

    def wait(self, timeout=60.0):
        end = time.time() + timeout
        while time.time() < end:
            try:
                r, _, _ = select.select([self.fd], [], [], 0.2)
                if r:
                    self.out += os.read(self.fd, 65536)
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, signal.SIGKILL)
        fail("the program did not exit", self.out)


def prompts(out):
    return len(re.findall(rb"\n> ", out))


def turn(p, text, start=0):
    """Sends a turn; returns its speed line's match once the prompt is back."""
    p.send(text)
    m = p.read_until(SPEED, start=start)
    p.read_until(rb"\n> ", start=m.end())
    return m


def two_turns():
    p = Pty(["run", "-m", MODEL, "-n", "12", "--temp", "0", "-sys", "You are brief.", "-t", "2"])
    p.read_until(rb"conversation in the chatml format")
    p.read_until(rb"\n> ")
    m1 = turn(p, b"Hello there\n")
    m2 = turn(p, b"And a second question?\n", start=m1.end())
    p.send(b"/exit\n")
    rc = p.wait()
    if rc != 0:
        fail("/exit gave status %d" % rc, p.out)
    n1, g1 = int(m1.group(1)), int(m1.group(2))
    n2, g2 = int(m2.group(1)), int(m2.group(2))
    if g1 < 1 or g2 < 1:
        fail("an answer made no tokens", p.out)
    # turn 2 feeds only the new text: the first turn's tokens stay cached.
    # "And a second question?" plus the turn markers is far fewer tokens
    # than the whole conversation (system + turn 1 + answer 1 + turn 2).
    if n2 >= n1 + g1:
        fail("turn 2 fed %d tokens: the history was evaluated again (turn 1: %d + %d)"
             % (n2, n1, g1), p.out)
    print("two turns: prompt %d then %d tokens, answers %d and %d tokens, /exit -> 0"
          % (n1, n2, g1, g2))


def rerendered_turns(model, extra, want_rewind):
    """GLM-4.5's format writes an answer back inside its <think></think>
    turn, so the second render does not extend the first render plus the
    answer: the cache goes back to the end of turn 1's prompt (before the
    answer) and feeds from there, not the whole history (the long system
    turn) again. A recurrent model cannot go back: it feeds everything."""
    sysp = " ".join(["Answer briefly and politely, in plain words."] * 20)
    p = Pty(["run", "-m", model, "-n", "12", "--temp", "0", "-sys", sysp, "-t", "2"] + extra)
    p.read_until(rb"conversation in the glm-4.5 format")
    p.read_until(rb"\n> ")
    m1 = turn(p, b"Hello there\n")
    m2 = turn(p, b"And a second question?\n", start=m1.end())
    m3 = turn(p, b"A third one\n", start=m2.end())
    p.send(b"/exit\n")
    rc = p.wait()
    n = [int(m.group(1)) for m in (m1, m2, m3)]
    if rc != 0:
        fail("/exit gave status %d" % rc, p.out)
    if want_rewind and (n[1] >= n[0] or n[2] >= n[0]):
        fail("%s: turns fed %s tokens: the history was evaluated again" % (model, n), p.out)
    if not want_rewind and (n[1] <= n[0] or n[2] <= n[1]):
        fail("%s (recurrent): turns fed %s tokens, want the whole history each time" % (model, n),
             p.out)
    print("%s, glm-4.5 format: turns fed %s prompt tokens (%s)"
          % (model.split("/")[-1], n, "back to turn 1's prompt" if want_rewind
             else "recurrent: from the start"))


def interrupt_answer():
    p = Pty(["run", "-m", MODEL, "-n", "-1", "--ignore-eos", "-c", "32768", "-t", "2",
             "--temp", "0.9", "-s", "7", "-cnv"])
    p.read_until(rb"\n> ")
    p.send(b"Tell me a very long story\n")
    start = len(p.out)
    p.read_until(rb"(?s).{200}", start=start)  # the answer is flowing
    p.send(b"\x03")  # Ctrl-C through the terminal: SIGINT to the program
    m = p.read_until(SPEED, start=start)
    g = int(m.group(2))
    p.read_until(rb"\n> ", start=m.end())
    if g >= 32000:
        fail("Ctrl-C did not stop the answer (%d tokens)" % g, p.out)
    p.send(b"Short one\n")
    # the answer may be long again (--ignore-eos): stop it as well
    p.read_until(rb"(?s).{50}", start=m.end() + 3)
    p.send(b"\x03")
    m2 = p.read_until(SPEED, start=m.end())
    p.read_until(rb"\n> ", start=m2.end())
    p.send(b"\x03")  # at the prompt: ends the conversation
    rc = p.wait()
    if rc != 130:
        fail("Ctrl-C at the prompt gave status %d, not 130" % rc, p.out)
    print("Ctrl-C: stopped an answer after %d tokens, answered again, ended at the prompt -> 130" % g)


def no_conversation():
    p = Pty(["run", "-m", MODEL, "-n", "4", "--temp", "0", "-no-cnv", "-p", "Once upon"])
    rc = p.wait()
    if rc != 0 or prompts(p.out) or not SPEED.search(p.out) or b"Once upon" not in p.out:
        fail("-no-cnv -p at a terminal: status %d, expected one completion" % rc, p.out)
    print("-no-cnv at a terminal: one completion")


def template_flag():
    p = Pty(["run", "-m", MODEL, "-n", "4", "--temp", "0", "--chat-template", "llama3", "-cnv"])
    p.read_until(rb"conversation in the llama3 format")
    p.read_until(rb"\n> ")
    turn(p, b"Hi\n")
    p.send(b"/exit\n")
    rc = p.wait()
    if rc != 0:
        fail("--chat-template llama3: status %d" % rc, p.out)
    print("--chat-template llama3: answered, /exit -> 0")


two_turns()
rerendered_turns("tests/data/glm4moe-tiny-Q8_0.gguf", [], True)
rerendered_turns("tests/data/qwen35moe-tiny-Q8_0.gguf", ["--chat-template", "glm-4.5"], False)
interrupt_answer()
no_conversation()
template_flag()
print("PASS")
