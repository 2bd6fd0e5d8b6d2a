#!/usr/bin/env python3
"""A stand-in teacher for benchmarks: an OpenAI-compatible /v1/chat/completions on loopback
that answers the triples stage's NER and OpenIE prompts deterministically (capitalised word
runs as entities, each entity "appears with" the next) after a fixed per-request latency, the
way a remote GPU server's time per request dominates a teacher stage.

    python3 scripts/bench/stand_in_teacher.py PORT LATENCY_MS
"""
import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def entities(text):
    out, cur = [], []
    for raw in text.split():
        w = raw.strip(".,;:!?()[]{}\"'")
        upper = w[:1].isupper()
        if upper:
            cur.append(w)
        if (raw.endswith((".", ",", ";", ":")) or not upper) and cur:
            e = " ".join(cur)
            if e not in out:
                out.append(e)
            cur = []
    if cur and " ".join(cur) not in out:
        out.append(" ".join(cur))
    return out


def answer(body):
    user = body["messages"][-1]["content"]
    task = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
    if task == "named_entities":
        return json.dumps({"named_entities": entities(user)})
    m = re.search(r'\{"named_entities".*', user, re.S)
    ents = []
    if m:
        try:
            ents = json.loads(m.group(0))["named_entities"]
        except (ValueError, KeyError):
            ents = []
    return json.dumps({"triples": [[a, "appears with", b] for a, b in zip(ents, ents[1:])]})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    latency = 0.0

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(self.latency)
        content = answer(body)
        out = json.dumps({
            "id": "bench", "object": "chat.completion", "model": body.get("model", ""),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": len(json.dumps(body)) // 4,
                      "completion_tokens": len(content) // 4,
                      "total_tokens": (len(json.dumps(body)) + len(content)) // 4},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


if __name__ == "__main__":
    Handler.latency = float(sys.argv[2]) / 1000.0
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
