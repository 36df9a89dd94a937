"""A small stand-in for a speculating llama.cpp server (stdlib only, no torch): OpenAI streaming completions with
llama.cpp's `timings.draft_n/draft_n_accepted`, `llamacpp:` counters on /metrics, /health, /v1/models, /props.

Every round drafts --num-steps tokens and accepts min(num_steps, 2); the text is the same for every k (lossless).
Test hooks: --startup-delay, --exit-code (die before listening), --ignore-sigterm, --spawn-child (a grandchild that
must not outlive the server), --pid-file (pids appended, one per line), --launch-log (one line per launch),
--die-at-num-steps K (the server launched for k = K exits with status 3 on its first completion request), --fault
NAME (/version says the server runs that injected fault, as `specbench serve --inject NAME` does).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ACCEPT_PER_ROUND = 2


class Counters:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.drafts = self.draft_tokens = self.accepted = self.predicted = 0
        self.per_pos: list[int] = []


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--num-steps", type=int, default=0)
    parser.add_argument("--startup-delay", type=float, default=0.0)
    parser.add_argument("--exit-code", type=int, default=None)
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--spawn-child", action="store_true")
    parser.add_argument("--pid-file", default=None)
    parser.add_argument("--launch-log", default=None)
    parser.add_argument("--die-at-num-steps", type=int, default=None)
    parser.add_argument("--fault", default=None)
    args = parser.parse_args()
    print(f"stand-in starting on port {args.port} with num_steps={args.num_steps}", flush=True)
    if args.launch_log:
        with open(args.launch_log, "a") as f:
            f.write(f"k{args.num_steps}\n")
    pids = [os.getpid()]
    if args.spawn_child:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        pids.append(child.pid)
    if args.pid_file:
        with open(args.pid_file, "a") as f:
            f.write("".join(f"{pid}\n" for pid in pids))
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.exit_code is not None:
        print("stand-in: fatal: could not load the model (test hook)", flush=True)
        sys.exit(args.exit_code)
    time.sleep(args.startup_delay)
    counters = Counters()
    handler = type("Handler", (Handler,), {"num_steps": args.num_steps, "counters": counters,
                                           "is_dying": args.die_at_num_steps == args.num_steps, "fault": args.fault})
    ThreadingHTTPServer(("127.0.0.1", args.port), handler).serve_forever()


class Handler(BaseHTTPRequestHandler):
    num_steps = 0
    counters: Counters
    is_dying = False  # exit mid-sweep, as a server that crashed (out of memory, a fatal error) does
    fault: str | None = None  # the injected fault /version names (None: no /version)

    def log_message(self, format, *args) -> None:  # one line per request into the server log
        print(f"stand-in: {self.command} {self.path}", flush=True)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._json({"status": "ok"})
        elif self.path == "/v1/models":
            self._json({"object": "list", "data": [{"id": "stand-in", "object": "model"}]})
        elif self.path == "/props":
            self._json({"build_info": "stand-in"})
        elif self.path == "/version" and self.fault:
            self._json({"version": "stand-in", "fault": self.fault})
        elif self.path == "/metrics":
            self._text(self._metrics())
        else:
            self._json({"error": {"message": "not found"}}, 404)

    def do_POST(self) -> None:
        if self.is_dying:
            print("stand-in: fatal: crashed mid-request (test hook)", flush=True)
            os._exit(3)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        max_tokens = int(body.get("max_tokens", 16))
        k = self.num_steps
        accept = min(k, ACCEPT_PER_ROUND)
        rounds = []  # tokens per round: 1 + accepted (the last round may be cut by max_tokens)
        produced = 0
        while produced < max_tokens:
            n = min(1 + accept, max_tokens - produced)
            rounds.append(n)
            produced += n
        num_rounds = len(rounds) if k else 0
        accepted = sum(n - 1 for n in rounds) if k else 0
        with self.counters.lock:
            c = self.counters
            c.drafts += num_rounds
            c.draft_tokens += num_rounds * k
            c.accepted += accepted
            c.predicted += produced
            if k:
                c.per_pos += [0] * (k - len(c.per_pos))
                for n in rounds:
                    for pos in range(n - 1):
                        c.per_pos[pos] += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        index = 0
        for i, n in enumerate(rounds):
            text = "".join(f" w{(index + j) % 7}" for j in range(n))
            index += n
            finish = "length" if i == len(rounds) - 1 else None
            self._event({"choices": [{"index": 0, "text": text, "finish_reason": finish}]})
        timings = {"predicted_n": produced}
        if k:
            timings.update(draft_n=num_rounds * k, draft_n_accepted=accepted)
        self._event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": produced},
                     "timings": timings})
        self.wfile.write(b"data: [DONE]\n\n")

    def _metrics(self) -> str:
        c = self.counters
        with c.lock:
            lines = [f"llamacpp:tokens_predicted_total {c.predicted}",
                     f"llamacpp:spec_decode_num_draft_tokens_total {c.draft_tokens}",
                     f"llamacpp:spec_decode_num_accepted_tokens_total {c.accepted}",
                     f"llamacpp:spec_decode_num_drafts_total {c.drafts}"]
            lines += [f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {n}'
                      for i, n in enumerate(c.per_pos)]
        return "\n".join(lines) + "\n"

    def _event(self, body: dict) -> None:
        self.wfile.write(f"data: {json.dumps(body)}\n\n".encode())
        self.wfile.flush()

    def _json(self, body: dict, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _text(self, text: str) -> None:
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if __name__ == "__main__":
    main()
